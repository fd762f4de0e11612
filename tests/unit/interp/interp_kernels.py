"""Builders of small legato-level kernels for the interpreter tests."""

from __future__ import annotations

from collections.abc import Sequence


def ttype(shape: Sequence, dtype: str, space: str) -> str:
    dims = ", ".join(f"?{d[1]}" if isinstance(d, tuple) else str(d) for d in shape)
    return f"!legato.tensor<[{dims}], {dtype}, {space}>"


def core0_kernel(
    inputs: Sequence[tuple[Sequence, str]],
    out: tuple[Sequence, str],
    body: str,
    name: str = "k",
) -> str:
    """A kernel: top sends each input to core 0's sram (queue i); core 0 receives them as
    %x0, %x1, ..., runs `body` (which must define %r, in sram) and memcpys %r to the output."""
    args = [f"%a{i} : {ttype(s, d, 'shared_dram')}" for i, (s, d) in enumerate(inputs)]
    args.append(f"%out : {ttype(out[0], out[1], 'shared_dram')}")
    lines = [f"legato.kernel @{name}({', '.join(args)}) {{", "  legato.on top {"]
    for i, (s, d) in enumerate(inputs):
        lines.append(
            f"    legato.request_load %a{i} to core(0) memory sram queue {i} : "
            f"{ttype(s, d, 'shared_dram')}"
        )
    lines += ["    legato.yield", "  }", "  legato.on core(0) {"]
    for i, (s, d) in enumerate(inputs):
        lines.append(
            f"    %x{i} = legato.receive %a{i} queue {i} memory sram : "
            f"{ttype(s, d, 'shared_dram')} -> {ttype(s, d, 'sram')}"
        )
    lines += ["    " + line for line in body.strip().splitlines()]
    lines.append(
        f"    legato.memcpy %out, %r : {ttype(out[0], out[1], 'shared_dram')}, "
        f"{ttype(out[0], out[1], 'sram')}"
    )
    lines += ["    legato.yield", "  }", "  legato.return", "}"]
    return "\n".join(lines)


SEED_MATMUL = """
legato.kernel @simple_matmul(%a : !legato.tensor<[?10, 256], bf16, shared_dram>,
                             %b : !legato.tensor<[256, 128], bf16, mpu_dram>,
                             %out : !legato.tensor<[10, 128], bf16, shared_dram>) {
  legato.on top {
    legato.request_load %a to core(0) memory sram queue 0 : !legato.tensor<[?10, 256], bf16, shared_dram>
    legato.request_load %b to core(0) memory mpu_buffer queue 0 : !legato.tensor<[256, 128], bf16, mpu_dram>
    legato.yield
  }
  legato.on core(0) {
    %la = legato.receive %a queue 0 memory sram : !legato.tensor<[?10, 256], bf16, shared_dram> -> !legato.tensor<[?10, 256], bf16, sram>
    %lb = legato.receive_type queue 0 memory mpu_buffer : !legato.tensor<[256, 128], bf16, mpu_weight>
    %r = legato.matmul %la, %lb : !legato.tensor<[?10, 256], bf16, sram>, !legato.tensor<[256, 128], bf16, mpu_weight> -> !legato.tensor<[?10, 128], bf16, sram>
    legato.memcpy %out, %r : !legato.tensor<[10, 128], bf16, shared_dram>, !legato.tensor<[?10, 128], bf16, sram>
    legato.yield
  }
  legato.return
}
"""
