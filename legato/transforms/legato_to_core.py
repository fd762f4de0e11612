"""`convert-legato-to-core`: split a kernel's contexts into one program per module, turn
value-semantics tensors into buffers, transfers into DMA descriptors and queue waits, and tensor
ops into unit ops.

- Regions of the same context concatenate, in source order, into that module's program (one PC
  per module); `yield`ed values stay the same buffers across them.
- The i-th `request_load` to (core, space, queue) pairs with the i-th receive on that core and
  queue (the hardware's FIFO order). Each pair shares one buffer in the receiving core's memory
  (`core.alloc` on both sides, tied by the `buffer` attribute; `core-plan-memory` gives them one
  offset). The sender's DMA notifies the queue; the receiver waits on it.
- A weight received as `mpu_weight` through `mpu_buffer` is loaded into the MPU on arrival.
- In an `all_cores` (SPMD) program, a `request_load` to `core(%c)` (a runtime core) pairs with
  the same program's receives on (space, queue): the k-th such send with the k-th receive. Every
  instance has the same buffer layout, so the sender writes the receive buffer at the same offset
  on core %c (`core.alloc on core(%c)`, tied by `buffer`) and notifies core %c's queue. The
  target must be computed from `core_id` and constants, and be a permutation of the cores (every
  core receives exactly one transfer per send), the same one for every send of a queue (one
  sender per receiver and queue: arrivals come in the sender's program order); checked here.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ArrayAttr, ModuleOp, StringAttr, UnrealizedConversionCastOp
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    PatternRewriter,
    PatternRewriteWalker,
)
from xdsl.rewriter import InsertPoint, Rewriter

from legato.dialects import core
from legato.dialects import legato as lg
from legato.errors import CompileError
from legato.model.ir import model_of
from legato.targets.bertha.abi import ARG_NAMES_ATTR
from legato.transforms.diagnostics import error_at, inherit_location
from legato.transforms.index_arith import per_core_values
from legato.transforms.ir_walk import walk
from legato.transforms.lower_data_movement import data_movement_patterns
from legato.transforms.lower_matmul import matmul_patterns
from legato.transforms.lower_runtime import runtime_patterns
from legato.transforms.lower_tensor_ops import tensor_patterns
from legato.transforms.lowering_state import LoweringPattern, LoweringState
from legato.transforms.pattern_dispatch import TypedPatternApplier


class _KernelLowering(LoweringState):
    """The driver: checks the contexts, pairs the transfers, then lowers each `legato.on`
    region in place with the op families' patterns and moves it into its context's program."""

    # -- entry ---------------------------------------------------------------------------------

    def lower(self) -> core.KernelOp:
        self._check_contexts()
        self._pair_transfers()
        walker = PatternRewriteWalker(
            # no dead-code elimination: a legato op nothing reads still computes (and costs):
            # lower it, never drop it
            TypedPatternApplier(
                [
                    *data_movement_patterns(self),
                    *tensor_patterns(self),
                    *matmul_patterns(self),
                    *runtime_patterns(self),
                    RefuseUnlowered(self),
                ]
            ),
            apply_recursively=False,
        )
        for op in self.kernel.body.block.ops:
            if isinstance(op, lg.OnOp):
                self._lower_on(op, walker)
            elif not isinstance(op, lg.ReturnOp):
                raise error_at(op, f"{op.name} must be inside a context (`with device.get_...():`)")
        if not self.programs:
            # a kernel that does nothing (every interpreter runs it as a no-op) is still a
            # binary: its top program ends at once
            self.program(lg.ContextAttr.top())
        # A program's closing ops are located at the last op lowered into it (else at the
        # kernel): a wait there stops for what that op and those before it started.
        for prog in self.programs.values():
            inherit_location(prog.op, self.kernel)
            closing = [core.DmaWaitOp()] if prog.issued_dma else []
            for op in [*closing, core.EndOp()]:
                inherit_location(inherit_location(op, prog.source), self.kernel)
                prog.block.add_op(op)
        kernel = core.KernelOp(
            self.kernel.sym_name.data,
            [self._arg_attr(i, t) for i, t in enumerate(self.kernel.function_type.inputs.data)],
            Region(Block([prog.op for prog in self.programs.values()])),
        )
        # The casts standing for lowered tensors have no users left.
        for cast in [op for op in walk(kernel) if isinstance(op, UnrealizedConversionCastOp)]:
            Rewriter.erase_op(cast)
        # Argument names travel to the binary's metadata, so runtime errors name them.
        names = [a.name_hint or f"arg{i}" for i, a in enumerate(self.kernel.args)]
        kernel.attributes[ARG_NAMES_ATTR] = ArrayAttr([StringAttr(n) for n in names])
        kernel.location = self.kernel.location
        return kernel

    def _arg_attr(self, i: int, t: Attribute) -> core.ArgAttr:
        acc = self.access.get(i, set())
        access = (
            "readwrite" if acc == {"read", "write"} else ("write" if acc == {"write"} else "read")
        )
        arg_type = core.BufType.from_tensor(t) if isinstance(t, lg.TensorType) else t
        return core.ArgAttr(i, arg_type, access)

    def _lower_on(self, on: lg.OnOp, walker: PatternRewriteWalker) -> None:
        """Lower `on`'s region in place, then move it to the end of its context's program."""
        prog = self.program(on.ctx)
        inherit_location(prog.op, on)  # a program is located at its context's first region
        prog.source = on
        block = on.body.block
        # An input is the buffer an earlier region of this context yielded; each region's
        # argument stays a value of its own (the MPU's loaded weight is tracked by value).
        rewriter = PatternRewriter(block.first_op or on)
        for barg, inp in zip(block.args, on.inputs):
            prog.rewriter, prog.at = rewriter, InsertPoint.at_start(block)
            barg.replace_all_uses_with(self.cast(prog, prog.values[inp], barg))
        try:
            walker.rewrite_region(on.body)
        except CompileError as err:
            # The walker notes the whole module, printed, on an error; ours names its op.
            if hasattr(err, "__notes__"):
                del err.__notes__
            raise
        terminator = block.last_op
        assert isinstance(terminator, lg.YieldOp)
        for res, v in zip(on.res, terminator.values):
            prog.values[res] = self.lookup(prog, v, terminator)
        Rewriter.erase_op(terminator)
        Rewriter.inline_block(block, InsertPoint.at_end(prog.block))

    def _check_contexts(self) -> None:
        has_all = any(
            isinstance(op, lg.OnOp) and op.ctx.is_all_cores for op in self.kernel.body.block.ops
        )
        for op in self.kernel.body.block.ops:
            if not isinstance(op, lg.OnOp):
                continue
            if op.ctx.is_core:
                i = op.ctx.core_index
                if i >= self.model.num_cores:
                    raise error_at(
                        op,
                        f"core({i}) does not exist: target '{self.model.name}' has "
                        f"{self.model.num_cores} cores (indices 0..{self.model.num_cores - 1})",
                    )
                if has_all:
                    raise error_at(
                        op,
                        "a kernel mixing get_core(i) and get_all_cores() regions is not supported "
                        "yet; use get_all_cores() with a static `if legato.core_id() == i`",
                    )

    # -- transfers -----------------------------------------------------------------------------

    def _pair_transfers(self) -> None:
        sends: dict[tuple, list[lg.RequestLoadOp]] = defaultdict(list)
        recvs: dict[tuple, list[Operation]] = defaultdict(list)
        spmd_sends: dict[tuple, list[lg.RequestLoadOp]] = defaultdict(list)  # runtime targets
        spmd_recvs: dict[tuple, list[Operation]] = defaultdict(list)
        for on in self.kernel.body.block.ops:
            if not isinstance(on, lg.OnOp):
                continue
            for op in on.body.walk():
                if isinstance(op, lg.RequestLoadOp) and op.target_core is not None:
                    if not on.ctx.is_all_cores:
                        raise error_at(
                            op, "a request_load to a runtime core runs in an all_cores region"
                        )
                    spmd_sends[(op.memory.data, op.queue.data)].append(op)
                elif isinstance(op, lg.RequestLoadOp):
                    if not op.target.is_core:
                        raise error_at(op, "request_load can only target one core: get_core(i)")
                    sends[(op.target.core_index, op.memory.data, op.queue.data)].append(op)
                elif isinstance(op, lg.ReceiveOp | lg.ReceiveTypeOp):
                    if on.ctx.is_all_cores:
                        spmd_recvs[(op.memory.data, op.queue.data)].append(op)
                        continue
                    if not on.ctx.is_core:
                        raise error_at(
                            op,
                            f"receive runs in a core context, not in {on.ctx.spelling}",
                        )
                    recvs[(on.ctx.core_index, op.memory.data, op.queue.data)].append(op)
        for (space, q), rs in spmd_recvs.items():
            if (space, q) in spmd_sends:
                continue  # paired with the same program's sends below
            # SPMD: every core runs this receive; each needs its own request_load
            for i in range(self.model.num_cores):
                recvs[(i, space, q)].extend(rs)
        n = self._pair_spmd(spmd_sends, spmd_recvs, sends)
        for key in list(sends) + [k for k in recvs if k not in sends]:
            s, r = sends.get(key, []), recvs.get(key, [])
            core_i, space, q = key
            if len(s) < len(r):
                raise error_at(
                    r[len(s)],
                    f"this receive on core({core_i}) {space} queue {q} has no matching "
                    f"request_load ({len(s)} sent, {len(r)} received); it would wait forever",
                )
            if len(s) > len(r):
                raise error_at(
                    s[len(r)],
                    f"this request_load to core({core_i}) {space} queue {q} is never received "
                    f"({len(s)} sent, {len(r)} received)",
                )
            for send, recv in zip(s, r):
                src_t = send.src.type
                assert isinstance(src_t, lg.TensorType)
                recv_t = recv.result.type
                assert isinstance(recv_t, lg.TensorType)
                if recv in self.transfer_of:  # an all_cores receive: one buffer on every core
                    name = self.transfer_of[recv]
                    self.transfer_of[send] = name
                    if self.transfer_type[name] != core.BufType(
                        src_t.dims, src_t.element_type, space
                    ):
                        raise error_at(
                            send,
                            f"this request_load to core({core_i}) sends {src_t.dims_str()} "
                            f"{src_t.dtype.name}, but the all-cores receive it pairs with "
                            f"takes {self.transfer_type[name].dims_str()}: every core must "
                            "receive the same type",
                        )
                    continue
                name = f"xfer{n}"
                n += 1
                self.transfer_of[send] = name
                self.transfer_of[recv] = name
                if src_t.dtype != recv_t.dtype or src_t.get_bounds() != recv_t.get_bounds():
                    raise error_at(
                        recv,
                        f"received type {recv_t.dims_str()} {recv_t.dtype.name} does not match "
                        f"what the paired request_load sends: {src_t.dims_str()} "
                        f"{src_t.dtype.name}",
                    )
                self.transfer_type[name] = core.BufType(src_t.dims, src_t.element_type, space)

    def _pair_spmd(self, spmd_sends: dict, spmd_recvs: dict, sends: dict) -> int:
        """Pair the runtime-target sends of the SPMD program with its receives (module
        docstring); returns the number of transfer buffers named."""
        n = 0
        for (space, q), ss in spmd_sends.items():
            rs = spmd_recvs.get((space, q), [])
            static = [x for i in range(self.model.num_cores) for x in sends.get((i, space, q), [])]
            if static:
                raise error_at(
                    static[0],
                    f"this request_load feeds {space} queue {q}, which the all-cores region "
                    "also receives from sends to a runtime core; use another queue for one of "
                    "them",
                )
            if len(ss) != len(rs):
                at = ss[len(rs)] if len(ss) > len(rs) else rs[len(ss)]
                raise error_at(
                    at,
                    f"the all-cores region sends {len(ss)} transfer(s) to a runtime core on "
                    f"{space} queue {q} and receives {len(rs)}: each send pairs with the "
                    "region's receive of the same rank on that queue",
                )
            first = None
            memo: dict[SSAValue, tuple[int, ...] | None] = {}
            for send, recv in zip(ss, rs):
                per_core = per_core_values(
                    send.target_core, self.model.num_cores, lg.CoreIdOp, memo
                )
                if per_core is None:
                    raise error_at(
                        send,
                        "the target core of a request_load in an all-cores region must be "
                        "computed from legato.core_id() and compile-time ints (+ - * // % "
                        "min max)",
                    )
                targets = list(per_core)
                nc = self.model.num_cores
                if sorted(targets) != list(range(nc)):  # type: ignore[type-var]
                    bad = next(
                        (
                            f"core {c} sends to core {t}, which does not exist"
                            for c, t in enumerate(targets)
                            if not 0 <= t < nc
                        ),  # type: ignore[operator]
                        None,
                    ) or "; ".join(
                        f"core {t} receives from {[c for c, u in enumerate(targets) if u == t]}"
                        for t in sorted(set(targets))
                        if targets.count(t) > 1  # type: ignore[type-var]
                    )
                    raise error_at(
                        send,
                        f"the target core of this request_load is not a permutation of the "
                        f"{nc} cores ({bad}): every core must receive exactly one transfer "
                        "from each send of an all-cores region",
                    )
                if first is None:
                    first = targets
                elif targets != first:
                    raise error_at(
                        send,
                        f"every request_load to a runtime core on {space} queue {q} must target "
                        "the same core (arrivals on one queue must come from one sender, in its "
                        "program order); use another queue",
                    )
                src_t = send.src.type
                recv_t = recv.result.type
                assert isinstance(src_t, lg.TensorType) and isinstance(recv_t, lg.TensorType)
                if src_t.dtype != recv_t.dtype or src_t.get_bounds() != recv_t.get_bounds():
                    raise error_at(
                        recv,
                        f"received type {recv_t.dims_str()} {recv_t.dtype.name} does not match "
                        f"what the paired request_load sends: {src_t.dims_str()} "
                        f"{src_t.dtype.name}",
                    )
                name = f"spmd_xfer{n}"
                n += 1
                self.transfer_of[send] = self.transfer_of[recv] = name
                self.transfer_type[name] = core.BufType(src_t.dims, src_t.element_type, space)
        return 0


class RefuseUnlowered(LoweringPattern):
    """The last pattern: an op no family lowered has no lowering to the core level."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if isinstance(op, lg.YieldOp | UnrealizedConversionCastOp) or op.dialect_name() == "arith":
            # the region's terminator and the casts of its arguments (the driver's); index
            # arithmetic, kept
            return
        raise error_at(
            op,
            f"{op.name} cannot be compiled for {self.state.model.name} yet "
            "(no lowering to the core level)",
        )


@dataclass(frozen=True)
class ConvertLegatoToCorePass(ModulePass):
    """Lower every `legato.kernel` of the module to a `core.kernel`."""

    name = "convert-legato-to-core"

    target: str = "bertha"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        model = model_of(op, self.target)
        for kernel in list(op.body.block.ops):
            if isinstance(kernel, lg.KernelOp):
                new = _KernelLowering(kernel, model).lower()
                op.body.block.insert_op_before(new, kernel)
                op.body.block.detach_op(kernel)
                kernel.erase(safe_erase=False)
