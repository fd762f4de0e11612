"""`all_cores` regions: one SPMD program (`core.program @cores on all_cores`) run by every core;
an all-cores receive pairs with one request_load per core and takes one buffer at the same
offset on every core."""

from __future__ import annotations

import numpy as np
from compiler_helpers import assert_bit_equal, rand, run_both, ttype

from legato.model import bertha

N = 4


def _kernel() -> str:
    tin = ttype([2, 8], "f32", "shared_dram")
    lines = [
        f"legato.kernel @spmd(%a : {ttype([N * 2, 8], 'f32', 'shared_dram')}, %out : {tin}) {{",
        "  legato.on top {",
    ]
    for i in range(N):
        lines.append(
            f"    %s{i} = legato.slice %a [{2 * i}, 0] [2, 8] [1, 1] : "
            f"{ttype([N * 2, 8], 'f32', 'shared_dram')} -> {tin}"
        )
        lines.append(f"    legato.request_load %s{i} to core({i}) memory sram queue 0 : {tin}")
    lines += [
        "    legato.yield",
        "  }",
        "  legato.on all_cores {",
        f"    %x = legato.receive_type queue 0 memory sram : {ttype([2, 8], 'f32', 'sram')}",
        f"    %m = legato.amax %x dim 0 keepdim : {ttype([2, 8], 'f32', 'sram')} -> "
        f"{ttype([1, 8], 'f32', 'sram')}",
        f"    %r = legato.sub %x, %m : {ttype([2, 8], 'f32', 'sram')}, "
        f"{ttype([1, 8], 'f32', 'sram')} -> {ttype([2, 8], 'f32', 'sram')}",
        f"    %z = legato.mul %r, %r : {ttype([2, 8], 'f32', 'sram')}, "
        f"{ttype([2, 8], 'f32', 'sram')} -> {ttype([2, 8], 'f32', 'sram')}",
        f"    %e = legato.exp %z : {ttype([2, 8], 'f32', 'sram')}",
        f"    legato.memcpy %out, %e : {tin}, {ttype([2, 8], 'f32', 'sram')}",
        "    legato.yield",
        "  }",
        "  legato.return",
        "}",
    ]
    return "\n".join(lines)


def test_spmd_program_runs_on_every_core():
    model = bertha.Bertha(None, "bertha", N)
    rng = np.random.default_rng(13)
    # every core gets a slice with the same values, so every core writes the same output
    block = rand([2, 8], "f32", rng)
    a = np.concatenate([block] * N)
    emu, ref, art = run_both(_kernel(), [a, np.zeros((2, 8), np.float32)], model)
    assert ".program cores on all_cores" in art.asm
    assert_bit_equal(emu[-1], ref[-1])
    assert "core.program @cores on all_cores" in art.core_ir
