"""Roofline and efficiency (DESIGN section 5): every term from the ComputeModel the run used, and
efficiency = roofline / cycles never exceeds 1, on the seed kernel and on random hand-written
programs."""

import dataclasses

import numpy as np
import pytest
from bertha_helpers import run, small_model, tensor
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from seed_kernel import seed_args, seed_binary

from legato.model import bertha
from legato.targets.bertha.runtime import run_binary
from legato.targets.bertha.timing import roofline
from legato.types import i64


def test_roofline_terms_follow_the_model():
    m = bertha.evt0()
    r = roofline(m, dram_bytes=8 * 64 * 1000, macs=0, vpu_ops=0)
    assert (r.dram_cycles, r.mpu_cycles, r.vpu_cycles, r.cycles, r.bound) == (
        1000,
        0,
        0,
        1000,
        "dram",
    )
    r = roofline(m, 0, macs=32 * 1024 * 7, vpu_ops=0)
    assert (r.mpu_cycles, r.bound) == (7, "mpu")
    # VPU: plain ops at lanes, transcendental at their lower rate, on every core
    r = roofline(m, 0, 0, vpu_ops=32 * 64 * 10 + 32 * 16 * 5, vpu_transcendental_ops=32 * 16 * 5)
    assert (r.vpu_cycles, r.bound) == (15, "vpu")
    # rounded up, never down
    assert roofline(m, 1, 1, 1).as_dict() == {
        "dram": 1,
        "mpu": 1,
        "vpu": 1,
        "cycles": 1,
        "bound": "dram",
    }
    assert roofline(m, 0, 0, 0).bound == "none"


def test_roofline_reads_every_parameter_from_the_model():
    base = bertha.evt0()
    counts = {
        "dram_bytes": 1 << 20,
        "macs": 1 << 24,
        "vpu_ops": 1 << 20,
        "vpu_transcendental_ops": 1 << 18,
    }
    r0 = roofline(base, **counts)
    for field, factor, term in [
        ("num_memory_channels", 2, "dram_cycles"),
        ("dram_bytes_per_cycle_per_channel", 2, "dram_cycles"),
        ("num_cores", 2, "mpu_cycles"),
        ("mpu_macs_per_cycle", 2, "mpu_cycles"),
        ("vpu_lanes", 2, "vpu_cycles"),
        ("vpu_transcendental_per_cycle", 2, "vpu_cycles"),
    ]:
        m = dataclasses.replace(base, **{field: getattr(base, field) * factor})
        assert getattr(roofline(m, **counts), term) < getattr(r0, term), field
    evt1 = roofline(bertha.evt1(), **counts)
    assert evt1.dram_cycles < r0.dram_cycles and evt1.mpu_cycles < r0.mpu_cycles


def test_roofline_rejects_inconsistent_counts():
    with pytest.raises(ValueError):
        roofline(bertha.evt0(), -1, 0, 0)
    with pytest.raises(ValueError):
        roofline(bertha.evt0(), 0, 0, 1, 2)


@pytest.mark.parametrize("make_model", [bertha.evt0, bertha.evt1])
@pytest.mark.parametrize("rows", [1, 10])
def test_seed_kernel_efficiency(make_model, rows):
    model = make_model()
    args, expected = seed_args(rows)
    res = run_binary(seed_binary(model), model, args)
    assert args[2].tobytes() == expected.tobytes()
    assert res.dram_bytes == rows * 256 * 2 + 256 * 128 * 2 + rows * 128 * 2
    assert res.mac_count == rows * 256 * 128
    assert res.roofline == roofline(model, res.dram_bytes, res.mac_count, 0)
    assert 0 < res.roofline_cycles <= res.cycles
    assert 0 < res.efficiency <= 1
    text = res.summary()
    assert f"roofline: {res.roofline_cycles} cycles (dram-bound" in text
    assert f"efficiency {res.efficiency:.1%}" in text
    assert f"on {model.name}" in text


# ---- random hand-written programs ------------------------------------------------------------
X_BYTES = 64 * 1024  # the shared input (and output) argument
OUT_OFF = 1 << 20  # unit results go to sram + 1 MiB

op = st.one_of(
    st.tuples(st.just("dma_in"), st.integers(0, X_BYTES), st.integers(0, 4096)),
    st.tuples(st.just("dma_out"), st.integers(0, X_BYTES), st.integers(0, 4096)),
    st.tuples(
        st.just("vpu"),
        st.sampled_from(["vpu.add", "vpu.mul", "vpu.exp", "vpu.tanh"]),
        st.integers(0, 8192),
    ),
    st.tuples(
        st.just("v2d"),
        st.sampled_from(["vpu.rsum", "vpu.transpose"]),
        st.integers(1, 64),
        st.integers(1, 64),
    ),
    st.tuples(st.just("mm"), st.integers(1, 64), st.integers(1, 256), st.integers(1, 128)),
)
programs = st.lists(st.lists(op, max_size=6), min_size=1, max_size=4)


def render(core: int, ops) -> tuple[str, dict]:
    """Assembly of one core's program and what it should count."""
    lines = [
        f".program c{core} on core({core})",
        "    ld r3, 8(r1)",
        "    ld r4, 16(r1)",
        "    lsa r5, sram, 0",
        f"    lsa r6, sram, {OUT_OFF}",
        "    lsa r7, mpu_buffer, 0",
    ]
    counts = {"dram": 0, "macs": 0, "vpu": 0, "trans": 0}
    for o in ops:
        if o[0] in ("dma_in", "dma_out"):
            n, off = o[1], min(o[2], X_BYTES - o[1])
            lines += [
                f"    li r8, {n}",
                f"    addi r9, {'r3' if o[0] == 'dma_in' else 'r4'}, {off}",
            ]
            lines.append("    dma r5, r9, r8" if o[0] == "dma_in" else "    dma r9, r5, r8")
            counts["dram"] += n
        elif o[0] == "vpu":
            mn, n = o[1], o[2]
            lines += [f"    li r8, {n}"]
            if mn in ("vpu.add", "vpu.mul"):
                lines.append(f"    {mn} r6, r5, r5, r8, f32")
            else:
                lines.append(f"    {mn} r6, r5, r8, f32")
                counts["trans"] += n
            counts["vpu"] += n
        elif o[0] == "v2d":
            lines += [f"    li r8, {o[2]}", f"    li r9, {o[3]}", f"    {o[1]} r6, r5, r8, r9, f32"]
            counts["vpu"] += o[2] * o[3]
        else:
            rows, k, n = o[1:]
            lines += [
                f"    li r8, {k}",
                f"    li r9, {n}",
                "    mpu.ldw r7, r8, r9",
                f"    li r8, {rows}",
                "    mpu.mm r6, r5, r8, f32",
            ]
            counts["macs"] += rows * k * n
    lines += ["    dmawait", "    halt"]
    return "\n".join(lines) + "\n", counts


@pytest.mark.parametrize("name", ["bertha", "bertha-evt1"])
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(progs=programs)
def test_random_programs_never_beat_the_roofline(name, progs):
    model = small_model(name, cores=4)
    src, total = "", {"dram": 0, "macs": 0, "vpu": 0, "trans": 0}
    for core, ops in enumerate(progs):
        text, counts = render(core, ops)
        src += text
        for k in total:
            total[k] += counts[k]
    x = np.zeros(X_BYTES // 8, np.int64)
    out = np.zeros(X_BYTES // 8, np.int64)
    res = run(
        src,
        [tensor("x", i64, [X_BYTES // 8]), tensor("out", i64, [X_BYTES // 8], "write")],
        [x, out],
        model=model,
        trace=False,
        hazards=False,  # the random cores write `out` unsynchronised: only timing is tested
    )
    assert res.dram_bytes == total["dram"]
    assert res.mac_count == total["macs"]
    assert (res.vpu_element_ops, res.vpu_transcendental_ops) == (total["vpu"], total["trans"])
    assert res.roofline == roofline(
        model, total["dram"], total["macs"], total["vpu"], total["trans"]
    )
    assert res.roofline_cycles <= res.cycles
    assert 0 <= res.efficiency <= 1


def test_vpu_bound_program_counts_transcendental_ops_at_their_rate():
    model = small_model(cores=1)
    n = 64 * 16 * 4
    src = (
        ".program c0 on core(0)\n    lsa r5, sram, 0\n    lsa r6, sram, 65536\n"
        f"    li r8, {n}\n    vpu.exp r6, r5, r8, f32\n    vpu.add r6, r5, r5, r8, f32\n"
        "    halt\n"
    )
    res = run(src, model=model)
    r = res.roofline
    assert r.vpu_cycles == n // model.vpu_transcendental_per_cycle + n // model.vpu_lanes
    assert r.bound == "vpu"
    # one core doing everything: the VPU was busy exactly the roofline's VPU time
    assert res.unit_busy["core0"]["vpu"] == r.vpu_cycles
    assert res.efficiency <= 1
