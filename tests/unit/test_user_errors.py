"""User mistakes that raised non-Legato exceptions (issue 17, item 8): every one is now a
`LegatoError` naming the problem (and, where a kernel is involved, the argument and kernel);
the API-level ones are also the built-in TypeError/ValueError they were, for code catching
those."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import legato
from legato.errors import ArgumentError, LegatoError, LegatoTypeError, LegatoValueError
from legato.model import bertha
from legato.tools import run as legato_run
from tests.corpus.one_core import double, f32

X = torch.arange(32, dtype=torch.float32).reshape(4, 8)


def test_a_sparse_tensor_is_an_argument_error():
    # was: torch RuntimeError "unsupported memory format option Contiguous"
    with pytest.raises(
        ArgumentError, match=r"argument 'x' of kernel double .*layout torch.sparse_coo"
    ):
        double(X.to_sparse(), torch.zeros(4, 8))


def test_an_expanded_output_is_an_argument_error():
    # was: torch RuntimeError "more than one element of the written-to tensor refers to a
    # single memory location" from the write-back, after the run
    out = torch.zeros(1, 8).expand(4, 8)
    with pytest.raises(ArgumentError, match=r"argument 'out' has elements that share memory"):
        double(X, out)
    assert not out.any()
    arr = np.lib.stride_tricks.as_strided(np.zeros(8, np.float32), (4, 8), (0, 4), writeable=True)
    with pytest.raises(ArgumentError, match="share memory"):
        double(X.numpy(), arr)
    # an expanded *input* is fine: it is only read
    out = torch.zeros(4, 8)
    double(torch.ones(1, 8).expand(4, 8), out)
    assert (out == 2).all()
    # and so is a transposed or strided output (no two elements share memory)
    big = torch.zeros(8, 16)
    double(X, big[::2, ::2])
    assert torch.equal(big[::2, ::2], X * 2) and not big[1::2].any()


def test_type_and_shape_mistakes_are_legato_errors():
    # were: ValueError / TypeError
    with pytest.raises(LegatoValueError, match="unknown float type 'float99'"):
        legato.types.float("float99")
    with pytest.raises(LegatoValueError, match="unknown"):
        legato.types.int("int3")
    model = bertha.Bertha(None)
    with pytest.raises(LegatoTypeError, match="shape entry -3 is negative"):
        model.tensor_type(f32, [4, -3], "shared_dram")
    with pytest.raises(LegatoTypeError, match="not an int or"):
        model.tensor_type(f32, ["a"], "shared_dram")
    with pytest.raises(LegatoValueError, match="unknown memory space 'nowhere'"):
        model.tensor_type(f32, [4], "nowhere")
    with pytest.raises(LegatoTypeError, match="'f32' is not an element type"):
        model.tensor_type("f32", [4], "shared_dram")
    with pytest.raises(LegatoValueError, match="num_cores must be a positive int"):
        bertha.Bertha(None, "bertha", 0)
    for cls, builtin in ((LegatoTypeError, TypeError), (LegatoValueError, ValueError)):
        assert issubclass(cls, LegatoError) and issubclass(cls, builtin)


@pytest.mark.parametrize("text", ["zeros@4xa", "rand:x", "[[1, 2], [3]]", "'abc'", "{1: 2}"])
def test_legato_run_unreadable_arguments_are_errors_not_tracebacks(text, capsys, tmp_path):
    src = tmp_path / "k.mlir"
    src.write_text(double.to_mlir())
    assert legato_run.main([str(src), "-a", text, "-a", "zeros"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"legato-run: error: argument 0: cannot read {text!r}"), err
    assert "Traceback" not in err
