"""torch's own OpInfo samples through `torch.compile(backend="legato")` (issue 13, item 4).

For every op of the LLM op set (`legato.tools.opinfo_table.OPS`) in f32 and bf16, at most
`CAP` of the op's `reference_inputs` (its `sample_inputs` first, then the reference extras;
spread evenly over them, so CI's time stays bounded: ~0.3 s a sample) run through the backend
with default options on the emulator and eagerly. Every sample is classified: on Legato and
equal to eager within tolerance, on Legato and wrong, eager (a fallback with its reason), not
traced (dynamo ran it eagerly), or a crash. No sample may be wrong or crash, and no node may
run eagerly because its kernel failed to compile or run (a resolver that accepted what the
compiler then refused). `python -m legato.tools.opinfo_table` prints the table (docs/torch.md).
"""

import pytest
import torch

from legato.tools.opinfo_table import CAP, OPS, dtypes_of, opinfos, run_sample, samples

pytest.importorskip("expecttest")  # torch.testing._internal needs it (a dev dependency)

# Ops with no Legato resolver for the overload their samples trace to: every sample runs
# eagerly. Every other op must run at least one sample on Legato (so "zero wrong" cannot hold
# by everything falling back).
NO_RESOLVER = {
    "nn.functional.softplus",  # beta / threshold other than the VPU's 1 / 20
}

# int64/bool index and mask ops whose samples have no compute node on Legato's side (the
# graph holds no node that either runs on Legato or falls back): asserted, so a change shows.
NO_COMPUTE = {"bitwise_and"}


def _cases():
    return [
        pytest.param(name, variant, dn, id=f"{name}{'.' + variant if variant else ''}-{dn}")
        for name, variant in OPS
        for dn in dtypes_of(name)
    ]


_INFOS: dict = {}


def _info(name, variant):
    if not _INFOS:
        _INFOS.update({(o.name, o.variant_test_name): o for o in opinfos()})
    return _INFOS[(name, variant)]


@pytest.mark.parametrize(("name", "variant", "dn"), _cases())
def test_opinfo_samples(name, variant, dn):
    info = _info(name, variant)
    dtype = dtypes_of(name)[dn]
    ss = samples(info, dtype, CAP)
    if ss is None:
        pytest.skip(f"{name} does not take {dn}")
    outs = [run_sample(info, s, dtype) for s in ss]
    bad = [o for o in outs if o.wrong or o.status == "crash"]
    assert not bad, "\n".join(f"[{o.sample}] {o.status}: {o.detail}" for o in bad)
    late = [
        (o.sample, r)
        for o in outs
        for r in o.reasons
        if "kernel failed" in r or r.startswith("call: kernel run failed")
    ]
    assert not late, f"a resolver accepted what the compiler refused: {late}"
    full = f"{name}.{variant}" if variant else name
    on = [o for o in outs if o.status in ("legato", "partial")]
    if full in NO_COMPUTE:
        assert all(o.status == "none" for o in outs), [(o.sample, o.status) for o in outs]
    elif full in NO_RESOLVER:
        assert not on, f"{full} now runs on Legato: drop it from NO_RESOLVER"
    else:
        assert on, f"no sample of {full} ran on Legato: " + "; ".join(
            f"[{o.sample}] {o.status} {o.reasons[:1]}" for o in outs
        )


def test_comparison_catches_a_wrong_result():
    """The classifier is not vacuous: a result off by more than the tolerance is wrong."""
    from legato.tools.opinfo_table import _compare

    e = torch.tensor([1.0, 2.0, float("nan")], dtype=torch.bfloat16)
    assert _compare(e.clone(), e, torch.bfloat16, False) == ""
    assert "differ" in _compare(e * 1.1, e, torch.bfloat16, False)
    assert "NaN" in _compare(torch.zeros(3, dtype=torch.bfloat16), e, torch.bfloat16, False)
    assert _compare(e.float(), e, torch.bfloat16, False).startswith("output 0: torch.float32")
