"""One target registry (legato.model.targets): every registered name is accepted by every place
that takes a target name, and a name registered with `legato.register_backend` reaches all of
them. (They used to keep three lists that disagreed: "bertha-evt0" worked for
`@legato.compile` only.)"""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "frontend"))

from frontend_helpers import load_source
from xdsl.dialects.builtin import ModuleOp

import legato
from legato.compiler import context
from legato.model import bertha
from legato.model.ir import model_of
from legato.model.targets import _TARGETS, target_model, target_names
from legato.tools import objdump, run
from legato.tools.targets import AsmTarget
from legato.torch.options import Options

KERNEL = """\
import legato

T = legato.get_model().tensor_type(legato.types.float("bfloat16"), [8, 64], "shared_dram")


@legato.compile(backend={backend!r})
def copy(x: T, out: T):
    device = legato.get_context().get_device()
    with device.get_top():
        legato.tensor.request_load(x, device.get_core(0), "sram")
    with device.get_core(0):
        y = legato.tensor.receive(x, 0, "sram")
        legato.tensor.memcpy(out, y)
"""


@pytest.fixture
def custom_target():
    """A target registered through the public API, removed afterwards."""
    legato.register_backend("bertha-test4", lambda ctx: bertha.Bertha(ctx, "bertha", 4))
    yield "bertha-test4"
    del _TARGETS["bertha-test4"]


def _names(extra: str) -> list[str]:
    return [*target_names(), extra]


def test_the_seed_names_are_registered():
    assert {"bertha", "bertha-evt0", "bertha-evt1"} <= set(target_names())
    assert target_model("bertha-evt0") == bertha.evt0()
    assert target_model("bertha-evt1") == bertha.evt1()
    assert target_model("nope") is None


def test_every_name_works_everywhere(custom_target, tmp_path):
    for name in _names(custom_target):
        expected = target_model(name)
        # @legato.compile(backend=name)
        kernel = load_source(tmp_path, KERNEL.format(backend=name)).copy
        assert kernel.model == expected, name
        # the passes' and legato-opt's `target` option (a module without a model attribute)
        assert model_of(ModuleOp([]), name) == expected, name
        # torch.compile(backend="legato", options={"legato.device": name})
        assert Options.parse({"legato.device": name}).device == name
        # legato-run --model NAME and legato-objdump --target NAME
        assert run._model(name) == expected, name
        assert objdump._model(name) == expected, name
        # legato-opt -t asm{target=NAME}: lowers the frontend's module for that chip
        out = io.StringIO()
        AsmTarget(target=name).emit(context(), kernel.emit_module(), out)
        assert "dma" in out.getvalue(), name


def test_an_unknown_name_is_refused_everywhere_with_the_registered_names():
    with pytest.raises(legato.LegatoError, match="unknown backend 'berta'.*bertha-evt0"):

        @legato.compile(backend="berta")
        def k(x):
            pass

    with pytest.raises(ValueError, match="unknown target 'berta'.*bertha-evt0"):
        model_of(ModuleOp([]), "berta")
    with pytest.raises(legato.LegatoError, match="'berta' is not a Legato device.*bertha-evt0"):
        Options.parse({"legato.device": "berta"})
    with pytest.raises(legato.LegatoError, match="unknown model 'berta'.*bertha-evt0"):
        run._model("berta")
    with pytest.raises(objdump.BinaryError, match="unknown target 'berta'.*bertha-evt0"):
        objdump._model("berta")
