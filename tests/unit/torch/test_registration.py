"""`torch.compile(backend="legato")` in a fresh process that never imports legato itself."""

import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent(
    """
    import sys
    import torch

    assert "legato" in torch._dynamo.list_backends(), torch._dynamo.list_backends()
    assert "legato" not in sys.modules

    W = torch.randn(256, 128).bfloat16()

    def f(x):
        return torch.relu(x @ W)

    x = torch.randn(8, 256).bfloat16()
    g = torch.compile(f, backend="legato", options={"legato.device": DEVICE})
    with torch.no_grad():
        y = g(x)
    ref = f(x)
    assert (y.float() - ref.float()).abs().max().item() <= 0.02 * ref.float().abs().max().item()
    import legato.torch
    s = legato.torch.last_summary()
    assert s.device == DEVICE and s.num_kernels == 1 and s.num_extern == 0, str(s)
    assert s.kernels[0].last_cycles > 0
    print("OK", s.kernels[0].last_cycles)
    """
)


@pytest.mark.parametrize("device", ["bertha", "bertha-evt1"])
def test_backend_found_through_entry_point(device, tmp_path):
    code = f"DEVICE = {device!r}\n" + SCRIPT
    env = {"LEGATO_CACHE_DIR": str(tmp_path), "PATH": "/usr/bin:/bin"}
    r = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.startswith("OK")


def test_unknown_option_and_device_are_errors():
    import torch

    from legato.errors import LegatoError

    for options in ({"legato.device": "tpu"}, {"legato.nope": 1}):
        g = torch.compile(lambda x: x + 1, backend="legato", options=options)
        with pytest.raises(Exception) as e:
            g(torch.ones(4))
        assert isinstance(e.value, LegatoError) or "legato" in str(e.value)
