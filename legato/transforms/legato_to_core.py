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
from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects import arith
from xdsl.dialects.builtin import ArrayAttr, IndexType, IntegerAttr, ModuleOp, StringAttr
from xdsl.ir import Block, Operation, OpResult, SSAValue
from xdsl.passes import ModulePass

from legato.dialects import core
from legato.dialects import legato as lg
from legato.model.compute_model import ComputeModel
from legato.model.ir import model_of
from legato.transforms import lower_runtime as _runtime
from legato.transforms import lower_tensor_ops as _tensor_ops
from legato.transforms.diagnostics import error_at

BUFFER_ATTR = "buffer"
RING_SLOTS = 3  # receive buffers of a core-to-core stream (see _ring_streams)
RING_CREDIT_BYTES = 64  # bytes a credit DMA copies onto themselves
MAX_QUEUE = 255  # queues per (core, space): credit queues are taken from the top down


def _starts_at(view: SSAValue, buf: SSAValue) -> bool:
    """`view` is `buf` or a chain of views of it at offset 0."""
    while view is not buf:
        op = view.owner
        if not isinstance(op, core.ViewOp) and not (
            isinstance(op, core.SubviewOp)
            and not op.offsets
            and all(o == 0 for o in op.static_offsets.get_values())
        ):
            return False
        view = op.source
    return True


ARG_NAMES_ATTR = "arg_names"


def _last_touches(body: list[Operation]) -> dict[SSAValue, int | None]:
    """For each buffer allocated in `body`: the index of the last top-level op touching it (or a
    view of it; ops nested in loops count as their loop), or None when that last touch does not
    reach the buffer's first byte (only views at a nonzero offset)."""
    root: dict[SSAValue, SSAValue] = {}
    last: dict[SSAValue, list] = {}  # buffer -> [index, touches its first byte]
    for i, top in enumerate(body):
        for op in top.walk():
            if isinstance(op, core.AllocOp):
                root[op.result] = op.result
                continue
            hit = {root[v] for v in op.operands if v in root}
            if not hit:
                continue
            view = isinstance(op, core.SubviewOp | core.ViewOp)
            if view and len(hit) == 1:
                root[op.results[0]] = next(iter(hit))
            for v in op.operands:
                if v not in root:
                    continue
                r = root[v]
                entry = last.setdefault(r, [i, False])
                if entry[0] != i:
                    entry[0], entry[1] = i, False
                if not view:
                    entry[1] = entry[1] or _starts_at(v, r)
    return {r: (e[0] if e[1] else None) for r, e in last.items()}


@dataclass
class _Buffer:
    """A core-level buffer standing for a legato tensor value in one program."""

    value: SSAValue  # a !core.buf value
    dims: list  # per dim: an index SSA value (dynamic) or an int (static)
    contiguous: bool = True  # False for a strided view (a slice): copy before computing

    @property
    def type(self) -> core.BufType:
        t = self.value.type
        assert isinstance(t, core.BufType)
        return t

    @property
    def bounds(self) -> list[int]:
        return list(self.type.get_bounds())


@dataclass
class _Program:
    ctx: lg.ContextAttr
    op: core.ProgramOp
    prologue: list[Operation] = field(default_factory=list)
    body: list[Operation] = field(default_factory=list)
    args: dict[int, _Buffer] = field(default_factory=dict)
    values: dict[SSAValue, _Buffer] = field(default_factory=dict)
    scalars: dict[SSAValue, SSAValue] = field(default_factory=dict)  # legato index -> core
    issued_dma: bool = False
    loaded_weight: SSAValue | None = None  # the legato value whose tile is in the MPU

    def emit(self, op: Operation, at: Operation | None = None) -> Operation:
        if at is not None:
            op.location = at.location
        self.body.append(op)
        return op


def _program_name(ctx: lg.ContextAttr) -> str:
    if ctx.is_top:
        return "top"
    if ctx.is_core:
        return f"core{ctx.core_index}"
    return "cores"


class _KernelLowering:
    def __init__(self, kernel: lg.KernelOp, model: ComputeModel):
        self.kernel = kernel
        self.model = model
        self.programs: dict[lg.ContextAttr, _Program] = {}
        self.access: dict[int, set[str]] = defaultdict(set)
        self.arg_index = {a: i for i, a in enumerate(kernel.args)}
        self.transfer_of: dict[Operation, str] = {}  # request_load / receive -> buffer name
        self.transfer_type: dict[str, core.BufType] = {}
        self.fused: set[Operation] = set()  # ops folded into an earlier op's lowering
        # core-to-core streams (receiver core, space, queue) -> (sends, receives) in pairing order
        self.streams: dict[tuple, tuple[list, list]] = {}
        self.send_ctx: dict[Operation, lg.ContextAttr] = {}
        # SPMD streams (space, queue) -> the target core of each core (a permutation)
        self.spmd_targets: dict[tuple, list[int]] = {}
        self.lowered: dict[Operation, tuple[_Program, Operation, core.AllocOp]] = {}

    # -- entry ---------------------------------------------------------------------------------

    def lower(self) -> core.KernelOp:
        self._check_contexts()
        self._pair_transfers()
        for op in self.kernel.body.block.ops:
            if isinstance(op, lg.OnOp):
                self._lower_on(op)
            elif isinstance(op, lg.ReturnOp):
                pass
            else:
                raise error_at(op, f"{op.name} must be inside a context (`with device.get_...():`)")
        args = []
        for i, t in enumerate(self.kernel.function_type.inputs.data):
            acc = self.access.get(i, set())
            access = (
                "readwrite"
                if acc == {"read", "write"}
                else ("write" if acc == {"write"} else "read")
            )
            arg_type = core.BufType.from_tensor(t) if isinstance(t, lg.TensorType) else t
            args.append(core.ArgAttr(i, arg_type, access))
        self._ring_streams()
        body = Block()
        for prog in self.programs.values():
            block = prog.op.body.block
            for op in prog.prologue + prog.body:
                block.add_op(op)
            if prog.issued_dma:
                block.add_op(core.DmaWaitOp())
            block.add_op(core.EndOp())
            body.add_op(prog.op)
        from xdsl.ir import Region

        kernel = core.KernelOp(self.kernel.sym_name.data, args, Region(body))
        # Argument names travel to the binary's metadata, so runtime errors name them.
        names = [a.name_hint or f"arg{i}" for i, a in enumerate(self.kernel.args)]
        kernel.attributes[ARG_NAMES_ATTR] = ArrayAttr([StringAttr(n) for n in names])
        kernel.location = self.kernel.location
        return kernel

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
                    self.send_ctx[op] = on.ctx
                elif isinstance(op, lg.RequestLoadOp):
                    if not op.target.is_core:
                        raise error_at(op, "request_load can only target one core: get_core(i)")
                    sends[(op.target.core_index, op.memory.data, op.queue.data)].append(op)
                    self.send_ctx[op] = on.ctx
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
            self.streams[key] = (s, r)
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
            for send, recv in zip(ss, rs):
                targets = [_eval_index(send.target_core, c) for c in range(self.model.num_cores)]
                if any(t is None for t in targets):
                    raise error_at(
                        send,
                        "the target core of a request_load in an all-cores region must be "
                        "computed from legato.core_id() and compile-time ints (+ - * // % "
                        "min max)",
                    )
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
            self.streams[(None, space, q)] = (ss, rs)
            self.spmd_targets[(space, q)] = first  # type: ignore[assignment]
        return 0

    # -- transfer rings ------------------------------------------------------------------------

    def _ring_streams(self) -> None:
        """Core-to-core streams of more than `RING_SLOTS` transfers reuse `RING_SLOTS` buffers.

        Each transfer of a stream normally has its own receive buffer for the whole kernel (the
        sender writes it whenever it runs). A stream from one core program to another whose
        transfers all have one static type, and whose receiver is done with transfer k - S before
        it receives transfer k (its last touch of that buffer comes first in its program, and
        touches the buffer from its start), instead cycles through S buffers (slot k % S), with
        credits: after its last touch of transfer k's buffer the receiver copies the buffer's
        first bytes onto themselves, a DMA that the scoreboard holds until the unit ops reading
        the buffer are done, and that notifies a credit queue of the sender; before sending
        transfer k >= S the sender waits on that queue (for transfer k - S's credit). A stream
        that does not qualify keeps one buffer per transfer."""
        used = {(c, sp, q) for c, sp, q in self.streams}
        touch: dict[int, dict[SSAValue, int | None]] = {}  # program -> buffer -> last touch
        pos: dict[int, dict[Operation, int]] = {}  # program -> op -> index (before inserting)
        inserts: dict[int, tuple[_Program, list[tuple[int, list[Operation]]]]] = {}
        for key, (sends, recvs) in self.streams.items():
            n = len(sends)
            if n <= RING_SLOTS or any(x not in self.lowered for x in sends + recvs):
                continue
            if key[0] is None:  # an SPMD stream: sender and receiver run one program
                self._ring_spmd(key, sends, recvs, used, touch, pos, inserts)
                continue
            ctxs = {self.send_ctx[x] for x in sends}
            if len(ctxs) != 1 or not next(iter(ctxs)).is_core:
                continue
            sender = next(iter(ctxs)).core_index
            rprog = self.lowered[recvs[0]][0]
            sprog = self.lowered[sends[0]][0]
            if not rprog.ctx.is_core or any(self.lowered[x][0] is not rprog for x in recvs):
                continue
            allocs = [self.lowered[x][2] for x in recvs]
            types = {a.result.type for a in allocs}
            t = next(iter(types))
            assert isinstance(t, core.BufType)
            if len(types) != 1 or not t.is_static:
                continue
            for prog in (rprog, sprog):
                if id(prog) not in pos:
                    pos[id(prog)] = {op: k for k, op in enumerate(prog.body)}
                    touch[id(prog)] = _last_touches(prog.body)
            touches = [touch[id(rprog)].get(a.result) for a in allocs]
            waits = [pos[id(rprog)][self.lowered[x][1]] for x in recvs]
            if any(p is None for p in touches) or any(
                touches[k - RING_SLOTS] >= waits[k]
                for k in range(RING_SLOTS, n)  # type: ignore[operator]
            ):
                continue
            cq = next(q for q in range(MAX_QUEUE, -1, -1) if (sender, "sram", q) not in used)
            used.add((sender, "sram", cq))
            s_ins = inserts.setdefault(id(sprog), (sprog, []))[1]
            self._ring_slots_and_waits(sends, recvs, cq, pos[id(sprog)], s_ins)
            nbytes = min(RING_CREDIT_BYTES, t.max_bytes)
            r_ins = inserts.setdefault(id(rprog), (rprog, []))[1]
            for k in range(n - RING_SLOTS):
                buf = allocs[k].result
                at = touches[k] + 1  # type: ignore[operator]
                c = arith.ConstantOp(IntegerAttr(nbytes, IndexType()))
                credit = core.DmaOp(buf, buf, c.result, (sender, "sram", cq))
                for o in (c, credit):
                    o.location = rprog.body[at - 1].location
                r_ins.append((at, [c, credit]))
        for prog, items in inserts.values():
            # from the back, so that the indices (taken before any insertion) stay valid; at one
            # index, in the order they were planned
            for at, ops in sorted(items, key=lambda x: x[0], reverse=True):
                prog.body[at:at] = ops

    def _ring_slots_and_waits(self, sends, recvs, cq: int, prog_pos, inserts: list) -> None:
        """Put transfer k of a ring stream (sender side and receiver side) in buffer slot
        k % RING_SLOTS, and make the sender wait for a credit on its queue `cq` before each send
        from the (RING_SLOTS+1)-th on; `inserts` collects (position, ops) of the sender's
        program."""
        base = self.transfer_of[sends[0]]
        for k, (snd, rcv) in enumerate(zip(sends, recvs, strict=True)):
            slot = StringAttr(f"{base}_slot{k % RING_SLOTS}")
            self.lowered[snd][2].attributes[BUFFER_ATTR] = slot
            self.lowered[rcv][2].attributes[BUFFER_ATTR] = slot
        for k in range(RING_SLOTS, len(sends)):
            dma = self.lowered[sends[k]][1]
            wait = core.WaitQueueOp("sram", cq)
            wait.location = dma.location
            inserts.append((prog_pos[dma], [wait]))

    def _sender_of(
        self, prog: _Program, key: tuple, before: int, positions: dict, limit: int
    ) -> SSAValue | None:
        """An `index` value (of `prog`'s core level) holding the core that sends to the running
        core under the permutation `targets`: another SPMD stream's target when it is the
        inverse, else the target applied order - 1 times (order <= `limit`, built in the
        prologue), else None."""
        targets = self.spmd_targets[key[1:]]
        inverse = [0] * len(targets)
        for c, t in enumerate(targets):
            inverse[t] = c
        for (space, q), tg in self.spmd_targets.items():
            if tg == inverse:
                send = self.streams[(None, space, q)][0][0]
                v = prog.scalars.get(send.target_core)
                if isinstance(v, OpResult) and positions.get(v.op, before) < before:
                    return v  # computed in the body before the first credit
        order, cur = 1, list(targets)
        while cur != list(range(len(targets))):
            cur = [targets[x] for x in cur]
            order += 1
            if order > limit:
                return None
        value = self.streams[key][0][0].target_core
        x: SSAValue = core.CoreIdOp().results[0]
        prog.prologue.append(x.owner)  # type: ignore[arg-type]
        for _ in range(order - 1):
            x = self._clone_index(prog, value, x, {})
        return x

    def _clone_index(self, prog: _Program, value: SSAValue, cid: SSAValue, memo: dict) -> SSAValue:
        """`value` (a legato index computed from core_id and constants) recomputed in `prog`'s
        prologue with `cid` for core_id."""
        assert isinstance(value, OpResult)
        op = value.op
        if isinstance(op, lg.CoreIdOp):
            return cid
        if value not in memo:
            operands = [self._clone_index(prog, v, cid, memo) for v in op.operands]
            new = op.clone()
            for i, v in enumerate(operands):
                new.operands[i] = v
            prog.prologue.append(new)
            memo[value] = new.results[value.index]
        return memo[value]

    def _ring_spmd(self, key, sends, recvs, used, touch, pos, inserts) -> None:
        """`_ring_streams` for a stream of an SPMD program (sends to a runtime core and the
        receives they pair with): the same slots and credits; the credit goes to the core that
        sends to this one (the inverse permutation), and the receiver's last touch of transfer
        k - S also comes before the send of transfer k in the program (every core runs both
        sides, so a credit wait never waits on a later point of the program: no deadlock)."""
        _, space, q = key
        prog = self.lowered[sends[0]][0]
        if any(self.lowered[x][0] is not prog for x in sends + recvs) or space != "sram":
            return
        allocs = [self.lowered[x][2] for x in recvs]
        types = {a.result.type for a in allocs}
        t = next(iter(types))
        assert isinstance(t, core.BufType)
        if len(types) != 1 or not t.is_static:
            return
        if id(prog) not in pos:
            pos[id(prog)] = {op: k for k, op in enumerate(prog.body)}
            touch[id(prog)] = _last_touches(prog.body)
        n = len(sends)
        touches = [touch[id(prog)].get(a.result) for a in allocs]
        waits = [pos[id(prog)][self.lowered[x][1]] for x in recvs]
        dmas = [pos[id(prog)][self.lowered[x][1]] for x in sends]
        if any(p is None for p in touches) or any(
            touches[k - RING_SLOTS] >= min(waits[k], dmas[k])  # type: ignore[operator]
            for k in range(RING_SLOTS, n)
        ):
            return
        sender = self._sender_of(prog, key, touches[0] + 1, pos[id(prog)], 4)  # type: ignore[operator]
        if sender is None:
            return
        spmd_used = {(sp, qq) for _, sp, qq in used}
        cq = next(x for x in range(MAX_QUEUE, -1, -1) if ("sram", x) not in spmd_used)
        used.add((None, "sram", cq))
        ins = inserts.setdefault(id(prog), (prog, []))[1]
        self._ring_slots_and_waits(sends, recvs, cq, pos[id(prog)], ins)
        nbytes = min(RING_CREDIT_BYTES, t.max_bytes)
        for k in range(n - RING_SLOTS):
            buf = allocs[k].result
            at = touches[k] + 1  # type: ignore[operator]
            # The credit DMA issues once the unit ops reading the buffer are done, and the core
            # issues in order: after the next MPU/VPU op, which the unit then has queued while
            # the credit waits (if that still comes before transfer k + S is received or sent).
            limit = min(waits[k + RING_SLOTS], dmas[k + RING_SLOTS])
            nxt = next((j for j in range(at, limit) if _is_unit_op(prog.body[j])), None)
            if nxt is not None:
                at = nxt + 1
            c = arith.ConstantOp(IntegerAttr(nbytes, IndexType()))
            credit = core.DmaOp(buf, buf, c.result, (sender, "sram", cq))
            for o in (c, credit):
                o.location = prog.body[at - 1].location
            ins.append((at, [c, credit]))

    # -- programs ------------------------------------------------------------------------------

    def _program(self, ctx: lg.ContextAttr) -> _Program:
        if ctx not in self.programs:
            op = core.ProgramOp(_program_name(ctx), ctx)
            self.programs[ctx] = _Program(ctx, op)
        return self.programs[ctx]

    def _arg(self, prog: _Program, i: int) -> _Buffer:
        if i not in prog.args:
            t = self.kernel.function_type.inputs.data[i]
            arg = core.ArgOp(i, core.BufType.from_tensor(t))
            prog.prologue.append(arg)
            dims: list = []
            for d, dim in enumerate(t.dims):
                if dim.is_dynamic:
                    dop = core.DimOp(arg, d)
                    prog.prologue.append(dop)
                    dims.append(dop.result)
                else:
                    dims.append(dim.size)
            prog.args[i] = _Buffer(arg.result, dims)
        return prog.args[i]

    def _lookup(self, prog: _Program, value: SSAValue, user: Operation) -> _Buffer:
        if value in self.arg_index:
            return self._arg(prog, self.arg_index[value])
        if value in prog.values:
            return prog.values[value]
        raise error_at(user, "internal: operand has no buffer (a value used out of its region?)")

    def _alloc(
        self,
        prog: _Program,
        t: core.BufType,
        dims: list,
        at: Operation,
        on: int | None = None,
        name: str | None = None,
    ) -> _Buffer:
        dyn = [d for d in dims if isinstance(d, SSAValue)]
        op = core.AllocOp(t, dyn, core=on)
        if name is not None:
            op.attributes[BUFFER_ATTR] = StringAttr(name)
        prog.emit(op, at)
        return _Buffer(op.result, list(dims))

    # -- ops -----------------------------------------------------------------------------------

    def _lower_on(self, on: lg.OnOp) -> None:
        prog = self._program(on.ctx)
        for barg, inp in zip(on.body.block.args, on.inputs):
            prog.values[barg] = prog.values[inp]
        for op in on.body.block.ops:
            if isinstance(op, lg.YieldOp):
                for res, v in zip(on.res, op.values):
                    prog.values[res] = self._lookup(prog, v, op)
            else:
                self._lower_op(prog, op)

    def _lower_op(self, prog: _Program, op: Operation) -> None:
        if op in self.fused:  # e.g. an accumulator add done by the MPU (tensor_ops.matmul)
            return
        if isinstance(op, lg.RequestLoadOp):
            self._request_load(prog, op)
        elif isinstance(op, lg.ReceiveOp | lg.ReceiveTypeOp):
            self._receive(prog, op)
        elif isinstance(op, lg.MatmulOp):
            self._matmul(prog, op)
        elif isinstance(op, lg.MemcpyOp):
            self._memcpy(prog, op)
        elif type(op) in _tensor_ops.BINARY_KINDS:
            _tensor_ops.binary(self, prog, op)
        elif type(op) in _tensor_ops.UNARY_KINDS:
            _tensor_ops.unary(self, prog, op)
        elif isinstance(op, lg.CastOp):
            _tensor_ops.cast(self, prog, op)
        elif isinstance(op, lg.ClampOp):
            _tensor_ops.clamp(self, prog, op)
        elif isinstance(op, lg.ConstantOp):
            _tensor_ops.constant(self, prog, op)
        elif type(op) in _tensor_ops.REDUCE_KINDS:
            _tensor_ops.reduce(self, prog, op)
        elif isinstance(op, lg.ReshapeOp):
            _tensor_ops.reshape(self, prog, op)
        elif isinstance(op, lg.TransposeOp):
            _tensor_ops.transpose(self, prog, op)
        elif isinstance(op, lg.SliceOp):
            _tensor_ops.slice_(self, prog, op)
        elif isinstance(op, lg.CatOp):
            _tensor_ops.cat(self, prog, op)
        elif isinstance(op, lg.BroadcastToOp):
            _tensor_ops.broadcast_to(self, prog, op)
        elif isinstance(op, lg.WhereOp):
            _tensor_ops.where(self, prog, op)
        elif isinstance(op, lg.GatherOp):
            _tensor_ops.gather(self, prog, op)
        elif isinstance(op, lg.CoreIdOp):
            prog.scalars[op.result] = prog.emit(core.CoreIdOp(), op).results[0]
        elif _runtime.handles(op):
            _runtime.lower(self, prog, op)
        else:
            raise error_at(
                op,
                f"{op.name} cannot be compiled for {self.model.name} yet "
                "(no lowering to the core level)",
            )

    def _note_access(self, value: SSAValue, kind: str) -> None:
        # A slice or reshape of an argument is a view of it: writing the view writes the
        # argument (the runtime copies back only arguments written).
        while isinstance(value, OpResult) and isinstance(
            value.op, lg.SliceOp | lg.DynamicSliceOp | lg.ReshapeOp
        ):
            value = value.op.operands[0]
        if value in self.arg_index:
            self.access[self.arg_index[value]].add(kind)

    def _request_load(self, prog: _Program, op: lg.RequestLoadOp) -> None:
        src = self._lookup(prog, op.src, op)
        self._note_access(op.src, "read")
        name = self.transfer_of[op]
        t = self.transfer_type[name]
        if op.target_core is not None:  # a runtime core: its copy of the SPMD receive buffer
            target = prog.scalars[op.target_core]
            dst = self._alloc(prog, t, src.dims, op, on=target, name=name)
            dma = prog.emit(
                core.DmaOp(src.value, dst.value, None, (target, op.memory.data, op.queue.data)), op
            )
            prog.issued_dma = True
            self.lowered[op] = (prog, dma, dst.value.owner)
            return
        core_i = op.target.core_index
        dst = self._alloc(prog, t, src.dims, op, on=core_i, name=name)
        dma = prog.emit(
            core.DmaOp(src.value, dst.value, None, (core_i, op.memory.data, op.queue.data)), op
        )
        prog.issued_dma = True
        self.lowered[op] = (prog, dma, dst.value.owner)

    def _receive(self, prog: _Program, op: lg.ReceiveOp | lg.ReceiveTypeOp) -> None:
        name = self.transfer_of[op]
        t = self.transfer_type[name]
        if isinstance(op, lg.ReceiveOp):
            dims = self._lookup(prog, op.like, op).dims
        elif op.src is not None:
            dims = self._lookup(prog, op.src, op).dims
        else:
            rt = op.result.type
            assert isinstance(rt, lg.TensorType)
            if not rt.is_static:
                raise error_at(
                    op,
                    "receive_type of a type with dynamic dims needs its source tensor "
                    "(receive_type(type, queue, src, memory)) to know the runtime sizes",
                )
            dims = [d.size for d in rt.dims]
        wait = prog.emit(core.WaitQueueOp(op.memory.data, op.queue.data), op)
        buf = self._alloc(prog, t, dims, op, name=name)
        self.lowered[op] = (prog, wait, buf.value.owner)
        result_t = op.result.type
        assert isinstance(result_t, lg.TensorType)
        if result_t.space == "mpu_weight":
            if self._fits_tile(buf):
                self._load_weight(prog, buf, op)
                prog.loaded_weight = op.result
            # else: matmul splits it into tiles (and stages them in mpu_buffer)
        prog.values[op.result] = buf

    def _fits_tile(self, buf: _Buffer) -> bool:
        t = buf.type
        return (
            t.rank == 2
            and t.is_static
            and t.space == "mpu_buffer"
            and lg.element_type_name(t.element_type) == "bf16"  # f32: matmul splits it first
            and t.get_shape()[0] <= self.model.mpu_tile_k
            and t.get_shape()[1] <= self.model.mpu_tile_n
        )

    def _load_weight(self, prog: _Program, buf: _Buffer, at: Operation) -> None:
        t = buf.value.type
        assert isinstance(t, core.BufType)
        k, n = t.get_bounds() if t.rank == 2 else (None, None)
        if t.rank != 2 or k > self.model.mpu_tile_k or n > self.model.mpu_tile_n:
            raise error_at(
                at,
                f"a {t.dims_str()} weight does not fit the MPU weight tile "
                f"({self.model.mpu_tile_k}x{self.model.mpu_tile_n}) of {self.model.name}; "
                "receive it into 'mpu_buffer' or 'sram' and let matmul tile it",
            )
        if not t.is_static:
            raise error_at(at, "an MPU weight must have static dims")
        if t.space != "mpu_buffer":
            raise error_at(at, f"the MPU loads weights from mpu_buffer, not {t.space}")
        prog.emit(core.MpuLoadWeightOp(buf.value), at)

    def _matmul(self, prog: _Program, op: lg.MatmulOp) -> None:
        _tensor_ops.matmul(self, prog, op)

    def _memcpy(self, prog: _Program, op: lg.MemcpyOp) -> None:
        dst = self._lookup(prog, op.dst, op)
        src = self._lookup(prog, op.src, op)
        self._note_access(op.dst, "write")
        self._note_access(op.src, "read")
        prog.emit(core.DmaOp(src.value, dst.value), op)
        prog.issued_dma = True
        # A copy into core memory is not waited for: the scoreboard makes this program's later
        # unit ops (and `ld`) on the copied range wait for it.


def _is_unit_op(op: Operation) -> bool:
    """An op the MPU or VPU runs (the core only issues it)."""
    return op.name.startswith(("core.mpu_", "core.vpu_"))


_INDEX_OPS = {
    "arith.addi": lambda a, b: a + b,
    "arith.subi": lambda a, b: a - b,
    "arith.muli": lambda a, b: a * b,
    "arith.divsi": lambda a, b: abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1),
    "arith.remsi": lambda a, b: a - b * (abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)),
    "arith.floordivsi": lambda a, b: a // b,
    "arith.minsi": min,
    "arith.maxsi": max,
}


def _eval_index(value: SSAValue | None, core_id: int) -> int | None:
    """`value` on core `core_id` when it is computed from `legato.core_id` and constants."""
    if value is None or not isinstance(value, OpResult):
        return None
    op = value.op
    if isinstance(op, lg.CoreIdOp):
        return core_id
    if isinstance(op, arith.ConstantOp) and isinstance(op.value, IntegerAttr):
        return op.value.value.data
    fn = _INDEX_OPS.get(op.name)
    if fn is None or len(op.operands) != 2:
        return None
    a, b = (_eval_index(v, core_id) for v in op.operands)
    if (
        a is None
        or b is None
        or (b == 0 and op.name in ("arith.divsi", "arith.remsi", "arith.floordivsi"))
    ):
        return None
    return fn(a, b)


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
