"""Single-core work as a phase of an all-core chain (issue 14: as few kernels as the chip
allows): a decode step's small segment between two chip-scale nodes (a norm, projections too
narrow to split over the cores, the rotary, a residual add) runs on core 0 inside the chain's
`get_all_cores()` region (`kernelgen.generate_chain`) instead of as a single-core kernel of its
own. The other cores go on to the chain's next barrier; the next phase reads what core 0 wrote
from shared DRAM, as it would from the separate kernel's outputs, but without that kernel's
launch and the first loads' DRAM latency after it. A phase may also open or close a chain (the
embedding and first norm before the first attention, the last MLP, final norm and LM head
after the last).

Each step runs the same single-core implementation as in a kernel of its own (`kernelgen.
generate`), so the results are the same bits: its sram operands are loaded into core 0's sram,
its MPU weights into its mpu_buffer, shared-DRAM operands (an embedding table) are used where
they are, and an MPU weight the kernel module prepares once per parameter version (nn.Linear's
`t(W)`, `kernelgen._prepared_step`) is read from its prepared input."""

from __future__ import annotations

import operator

import torch

from legato.torch import kernelgen


def _prepared(steps: list) -> dict:
    """node -> the parameter whose kernel argument holds it prepared, for each prepared step."""
    return {s.node: s.impl.args[0].node for s in steps if kernelgen._prepared_step(s)}


def _values(node) -> list:
    v = node.meta.get("val")
    vals = list(v) if isinstance(v, (tuple, list)) else [v]
    return [x for x in vals if isinstance(x, torch.Tensor)]


def onchip_bytes(inputs: list, steps: list, bound) -> tuple[int, int] | None:
    """(sram, mpu_buffer) bytes core 0 holds at most for the phase (`phase_lines`): every input
    it loads and every value it computes, as if all were live at once (dynamic dims at their
    bound); None when a dim has no bound."""
    prep = _prepared(steps)
    mpu, sram, counted = 0, 0, set()

    def size(t) -> int | None:
        n = t.element_size()
        for d in t.shape:
            d = d if isinstance(d, int) else bound(d)
            if d is None:
                return None
            n *= int(d)
        return n

    for s in steps:
        if s.impl is None or kernelgen._prepared_step(s):
            continue
        for pos, a in enumerate(s.impl.args):
            if not isinstance(a, torch.fx.Node) or a not in inputs and a not in prep:
                continue
            mem = s.impl.memory.get(pos, "sram")
            key = (prep.get(a, a), mem)
            if mem == "shared_dram" or key in counted:
                continue
            counted.add(key)
            for t in _values(a):
                n = size(t)
                if n is None:
                    return None
                if mem == "mpu_weight":
                    mpu += n
                else:
                    sram += n
        if s.node.target is operator.getitem:
            continue
        for t in _values(s.node):
            n = size(t)
            if n is None:
                return None
            sram += n
    return sram, mpu


def phase_lines(
    inputs: list,
    steps: list,
    outputs: list,
    names: dict,
    ns: dict,
    fresh,
    impl_names: dict,
    indent: str = "        ",
) -> list[str]:
    """Source lines (inside `get_all_cores()`) running the single-core `steps` on core 0 (a
    loop that runs once there and not at all on the other cores, as `kernelgen`'s prologue
    writes): every input's load issued first, then the steps, then each output written to its
    shared-DRAM tensor (`names`: each input's and output's tensor in the kernel)."""
    pad = indent + "    "
    prep = _prepared(steps)
    var: dict = {}
    loads: list[str] = []
    loaded: dict = {}

    def operand(s, pos, a):
        mem = s.impl.memory.get(pos, "sram")
        a = prep.get(a, a)
        if mem == "shared_dram" and a in names:
            return names[a]  # used where it is (an embedding table: rows gathered from it)
        if a in var:
            return var[a]
        if mem not in ("sram", "mpu_weight"):
            raise AssertionError(f"{s.node.name}: operand memory {mem!r} in a core-0 phase")
        key = (a, mem)
        if key not in loaded:
            loaded[key] = fresh(f"{'w' if mem == 'mpu_weight' else 'v'}_{a.name}")
            where = ', "mpu_buffer"' if mem == "mpu_weight" else ""
            loads.append(f"{pad}{loaded[key]} = legato.tensor.load({names[a]}{where})")
        return loaded[key]

    body: list[str] = []
    for s in steps:
        if kernelgen._prepared_step(s):
            continue  # an input of the kernel (`kernelgen.generate_chain`)
        line = kernelgen._step_line(s, var, operand, ns, fresh, impl_names, pad)
        if line is not None:
            body.append(line)
    writes = [f"{pad}legato.tensor.memcpy({names[n]}, {var[n]})" for n in outputs]
    return [
        f"{indent}for _ in range(legato.core_id(), 1, device.num_cores):  # core 0",
        *loads,
        *body,
        *writes,
    ]
