"""Python AST -> `legato` dialect.

The decorated function is never run as Python. `CodeGenerator` walks its AST once, folding every
expression over compile-time values (ints, strings, TensorSpecs, the device, legato API objects)
with Python itself, and emitting IR for the rest:

  * `with <execution context>:`                 -> `legato.on <ctx> { ... legato.yield }`
  * `legato.tensor.request_load/receive/...`     -> the data-movement ops
  * `a @ b`, `a + b`, `legato.tensor.exp(x)` ... -> tensor ops
  * `yield x` inside a region                    -> operand of the region's `legato.yield`; `x`
                                                    becomes visible to later regions of the same
                                                    context (as a `legato.on` input)
  * `if` on a static condition, `for` over a static range, `assert` on static values: resolved
    at compile time. `@legato.function` helpers are inlined.

Values are either static (plain Python objects) or `IRValue`s (an SSA value with its TensorSpec
and the region that defined it). Every op gets the `FileLineColLoc` of the Python node it came
from; every error is a `CompileError` naming the Python file:line:col.

Extending: a new `legato.tensor.X` needs one `_op_X(self, node, args)` method (see
`_call_legato_op`); a new statement kind one `_stmt_<AstClass>` method; a new operator one entry
in `_BINARY_OPS` / `_UNARY_OPS`.
"""

from __future__ import annotations

import ast
import builtins
import functools
import inspect
import io
import operator
from collections.abc import Callable
from dataclasses import dataclass

from xdsl.dialects.builtin import FileLineColLoc, IntAttr, ModuleOp, StringAttr
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException

import legato.dialects.legato as L
from legato import opset
from legato.context import CompileContext, ExecContext, compiling
from legato.dialects.fast_verify import verify_op
from legato.errors import CompileError, LegatoError
from legato.frontend.language import Param, constexpr
from legato.frontend.runtime import (
    LoopLocal,
    RuntimeCodegen,
    RuntimeRange,
    TensorMethod,
)
from legato.frontend.source import FunctionSource, LegatoFunction
from legato.frontend.values import IRScalar, IRValue, RegionState
from legato.frontend.values import describe as _describe
from legato.frontend.values import op_symbol as _op_symbol
from legato.tensor import SIGNATURES as BUILTIN_SIGNATURES
from legato.types import (
    CORE_SPACES,
    MEMORY_SPACES,
    SHARED_SPACES,
    Dim,
    DType,
    TensorSpec,
    parse_dim,
)

# --------------------------------------------------------------------------------------------
# Values


@dataclass(eq=False)
class Frame:
    """One function being visited: the kernel, or an inlined `@legato.function`."""

    source: FunctionSource
    env: dict  # local names
    scope: dict  # globals + closure
    returned: bool = False
    return_value: object = None
    is_kernel: bool = False
    loop_depth: int = 0  # runtime loops open around the call (an inlined function's return is fine)


class _Unbound:
    pass


_UNBOUND = _Unbound()

# Builtins a kernel may use (all at compile time).
_BUILTINS = {
    name: getattr(builtins, name)
    for name in (
        "abs",
        "all",
        "any",
        "bool",
        "dict",
        "divmod",
        "enumerate",
        "float",
        "int",
        "isinstance",
        "len",
        "list",
        "max",
        "min",
        "pow",
        "range",
        "reversed",
        "round",
        "set",
        "slice",
        "sorted",
        "str",
        "sum",
        "tuple",
        "zip",
        "True",
        "False",
        "None",
        "ValueError",
        "TypeError",
        "AssertionError",
    )
}

_BINARY_OPS: dict[type, tuple[Callable, type | None]] = {
    ast.Add: (operator.add, L.AddOp),
    ast.Sub: (operator.sub, L.SubOp),
    ast.Mult: (operator.mul, L.MulOp),
    ast.Div: (operator.truediv, L.DivOp),
    ast.FloorDiv: (operator.floordiv, None),
    ast.Mod: (operator.mod, None),
    ast.Pow: (operator.pow, None),
    ast.LShift: (operator.lshift, None),
    ast.RShift: (operator.rshift, None),
    ast.BitOr: (operator.or_, None),
    ast.BitAnd: (operator.and_, None),
    ast.BitXor: (operator.xor, None),
    ast.MatMult: (operator.matmul, L.MatmulOp),
}
_UNARY_OPS: dict[type, tuple[Callable, type | None]] = {
    ast.USub: (operator.neg, L.NegOp),
    ast.UAdd: (operator.pos, None),
    ast.Not: (operator.not_, None),
    ast.Invert: (operator.invert, None),
}
_COMPARE_OPS = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.Is: operator.is_,
    ast.IsNot: operator.is_not,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
}
_TENSOR_COMPARE = {
    ast.Eq: "eq",
    ast.NotEq: "ne",
    ast.Lt: "lt",
    ast.LtE: "le",
    ast.Gt: "gt",
    ast.GtE: "ge",
}
"""Python comparisons of tensors -> the op table's comparison (a 0/1 mask in the dtype)."""
_UNARY_TENSOR_OPS = {o.name: L.ELEMENTWISE_OPS[o.name] for o in opset.legato_unary()}
"""`legato.tensor.<name>(x)` -> its op class (the op table's unary rows)."""
_BINARY_TENSOR_OPS = {
    **{o.name: L.ELEMENTWISE_OPS[o.name] for o in opset.legato_binary()},
    "matmul": L.MatmulOp,
}

_STATEMENT_NAMES = {
    ast.While: "a `while` loop",
    ast.Try: "`try`",
    ast.Raise: "`raise`",
    ast.Import: "`import`",
    ast.ImportFrom: "`import`",
    ast.FunctionDef: "a nested function definition",
    ast.AsyncFunctionDef: "a nested function definition",
    ast.ClassDef: "a class definition",
    ast.Global: "`global`",
    ast.Nonlocal: "`nonlocal`",
    ast.Delete: "`del`",
    ast.AsyncWith: "`async with`",
    ast.AsyncFor: "`async for`",
}
if hasattr(ast, "TryStar"):
    _STATEMENT_NAMES[ast.TryStar] = "`try`"
if hasattr(ast, "Match"):
    _STATEMENT_NAMES[ast.Match] = "`match`"


def location(src: FunctionSource, node: ast.AST | None) -> FileLineColLoc:
    return _file_line_col(src.file, *src.line_col(node))


@functools.lru_cache(maxsize=4096)
def _file_line_col(file: str, line: int, col: int) -> FileLineColLoc:
    # Attributes are immutable values, so ops at one source position share one: building and
    # verifying four attributes per emitted op was ~10% of a big kernel's frontend.
    return FileLineColLoc(StringAttr(file), IntAttr(line), IntAttr(col))


@functools.cache
def _handler(cls: type, prefix: str, node_type: type):
    """The method of class `cls` that handles an AST node of `node_type` (`_stmt_If`,
    `_expr_Name`, ...), or None: found once per class and node type, not by formatting its
    name and looking it up on every node (the classes' methods are not changed at run time)."""
    return getattr(cls, f"{prefix}{node_type.__name__}", None)


def _signature_names(op: str, sig) -> tuple[tuple[str, ...], dict]:
    """(parameter names, defaults) of builtin `op`'s signature `sig`; callers only read them.
    Remembered per op name while its signature is the same object (hashing an
    `inspect.Signature` for a cache key hashes every parameter: ~1% of a big kernel's
    frontend)."""
    got = _SIGNATURE_NAMES.get(op)
    if got is None or got[0] is not sig:
        names = tuple(sig.parameters)
        defaults = {n: p.default for n, p in sig.parameters.items() if p.default is not p.empty}
        got = _SIGNATURE_NAMES[op] = (sig, names, defaults)
    return got[1], got[2]


_SIGNATURE_NAMES: dict[str, tuple] = {}


@dataclass(frozen=True)
class _SignatureText:
    """`legato.tensor.<op>(<signature>)` for an error message, formatted only when one is
    raised (formatting a signature per call was ~2% of a big kernel's frontend)."""

    op: str
    sig: object

    def __str__(self) -> str:
        return f"legato.tensor.{self.op}{'' if self.sig is None else self.sig}"


def _is_static(value) -> bool:
    if isinstance(value, (IRValue, IRScalar)):
        return False
    if isinstance(value, (tuple, list)):
        return all(_is_static(v) for v in value)
    return True


def _scope_of(fn) -> dict:
    fn = inspect.unwrap(fn)
    scope = dict(getattr(fn, "__globals__", {}))
    try:
        scope.update(inspect.getclosurevars(fn).nonlocals)
    except (TypeError, ValueError):
        pass
    return scope


def _legato_op_name(value) -> str | None:
    return getattr(value, "_legato_op", None) if callable(value) else None


# --------------------------------------------------------------------------------------------
# Signature


def _is_constexpr_annotation(ann) -> bool:
    return ann is constexpr or isinstance(ann, constexpr)


def kernel_params(src: FunctionSource, ctx: CompileContext) -> list:
    """The kernel's parameters: evaluated annotations (def-time objects, or strings under
    `from __future__ import annotations` evaluated in the function's globals now)."""
    fn = inspect.unwrap(src.fn)
    args = src.tree.args
    if args.vararg is not None or args.kwarg is not None:
        node = args.vararg or args.kwarg
        raise src.error(node, "*args and **kwargs are not supported in a Legato kernel signature")
    annotations = getattr(fn, "__annotations__", {})
    signature = inspect.signature(fn)
    scope = _scope_of(fn)
    params = []
    with compiling(ctx):
        for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs]:
            name = arg.arg
            if name not in annotations:
                raise src.error(
                    arg,
                    f"parameter '{name}' has no type annotation; annotate it with a tensor type "
                    "(legato.get_model().tensor_type(dtype, shape, memory)) or legato.constexpr",
                )
            ann = annotations[name]
            if isinstance(ann, str):
                try:
                    ann = eval(ann, scope)
                except Exception as e:  # noqa: BLE001
                    raise src.error(
                        arg.annotation or arg,
                        f"cannot evaluate the annotation of parameter '{name}': "
                        f"{type(e).__name__}: {e}",
                    ) from None
            default = signature.parameters[name].default
            if _is_constexpr_annotation(ann):
                params.append(Param(name, "constexpr", None, default))
            elif isinstance(ann, TensorSpec):
                params.append(Param(name, "tensor", ann, default))
            else:
                raise src.error(
                    arg.annotation or arg,
                    f"the annotation of parameter '{name}' must be a tensor type "
                    f"(legato.get_model().tensor_type(...)) or legato.constexpr, got {ann!r}",
                )
    return params


# --------------------------------------------------------------------------------------------
# Code generator


class CodeGenerator(RuntimeCodegen):
    """Emits one `legato.kernel` for a kernel's AST (see the module docstring; runtime
    values, loops and sync are in `legato.frontend.runtime`)."""

    def __init__(self, src: FunctionSource, params: list, constexprs: dict, ctx: CompileContext):
        self.ctx = ctx
        self.model = ctx.get_model()
        self.src = src
        self.params = params
        self.constexprs = constexprs
        self.region: RegionState | None = None
        self.frames: list[Frame] = []
        self.inline_stack: list[object] = []
        self.inlined: dict[
            object, tuple
        ] = {}  # function -> (signature, scope, plain names) (`inline`)
        # (core index, memory, queue) -> nodes, to check that every receive has a sender.
        self.sends: dict[tuple, list] = {}
        self.receives: dict[tuple, list] = {}
        self.blocks: list[Block] = []  # bodies of the runtime loops being emitted
        self.loop_depth = 0

    # -- helpers -------------------------------------------------------------------------------

    @property
    def frame(self) -> Frame:
        return self.frames[-1]

    def error(self, node: ast.AST | None, message: str, note: str | None = None) -> CompileError:
        return self.frame.source.error(node, message, note)

    def loc(self, node: ast.AST | None) -> FileLineColLoc:
        return location(self.frame.source, node)

    def emit(self, op: Operation, node: ast.AST) -> Operation:
        """Check `op` (its own verifier, as a CompileError at `node`) and append it."""
        op.location = self.loc(node)
        self.check(op, node)
        if self.region is None:
            raise self.error(
                node,
                f"{op.name} must run in an execution context; put it inside "
                "`with device.get_top():`, `with device.get_core(i):` or "
                "`with device.get_all_cores():`",
            )
        self.current_block().add_op(op)
        return op

    def new_value(self, ssa: SSAValue, node: ast.AST, name: str | None = None) -> IRValue:
        t = ssa.type
        assert isinstance(t, L.TensorType)
        return IRValue(ssa, t.to_spec(), self.region, name, None, node, self.frame.source)

    # -- entry ---------------------------------------------------------------------------------

    def generate(self) -> ModuleOp:
        src = self.src
        tensor_params = [p for p in self.params if p.kind == "tensor"]
        kernel = L.KernelOp(
            src.tree.name,
            [L.TensorType.from_spec(p.spec) for p in tensor_params],
            target=self.model.name,
        )
        kernel.location = location(src, src.tree)
        env: dict = {}
        arg_nodes = {
            a.arg: a
            for a in [*src.tree.args.posonlyargs, *src.tree.args.args, *src.tree.args.kwonlyargs]
        }
        for p, barg in zip(tensor_params, kernel.body.block.args):
            barg.name_hint = p.name
            barg.location = location(src, arg_nodes.get(p.name))
            env[p.name] = IRValue(barg, p.spec, None, p.name, None, arg_nodes.get(p.name), src)
        for p in self.params:
            if p.kind == "constexpr":
                if p.name in self.constexprs:
                    env[p.name] = self.constexprs[p.name]
                elif p.default is not inspect.Parameter.empty:
                    env[p.name] = p.default
                else:
                    raise src.error(
                        arg_nodes.get(p.name), f"no value given for constexpr parameter '{p.name}'"
                    )
        self.kernel_block = kernel.body.block
        self.frames.append(Frame(src, env, _scope_of(src.fn), is_kernel=True))
        with compiling(self.ctx):
            self.visit_body(src.tree.body)
        self.check_transfers()
        ret = L.ReturnOp()
        ret.location = location(src, src.tree)
        kernel.body.block.add_op(ret)
        self.check(ret, src.tree)
        self.check(kernel, src.tree)
        module = ModuleOp([kernel])
        module.location = location(src, src.tree)
        self.check(module, src.tree)
        setattr(module, _FRONTEND_VERIFIED, True)
        return module

    def check(self, op: Operation, node: ast.AST) -> None:
        """`op`'s own verifier, as a CompileError at `node` (what `emit` runs on every op it
        appends; the ops built around a region are checked with this once it is complete)."""
        try:
            verify_op(op)
        except VerifyException as e:
            raise self.error(node, str(e)) from None

    def check_transfers(self) -> None:
        """A receive on (core, memory, queue) with no request_load to it would block forever."""
        for key, nodes in self.receives.items():
            sent = len(self.sends.get(key, []))
            if len(nodes) > sent:
                node, source = nodes[sent]
                core, memory, queue = key
                raise source.error(
                    node,
                    f"this receive on core({core}) queue {queue} memory {memory} would wait "
                    f"forever: only {sent} request_load(s) send to core({core}) memory "
                    f"{memory} queue {queue}, and this is receive number {sent + 1}",
                )

    # -- statements ----------------------------------------------------------------------------

    def visit_body(self, stmts: list[ast.stmt]) -> None:
        for stmt in stmts:
            if self.frame.returned:
                return
            self.visit_stmt(stmt)

    def visit_stmt(self, node: ast.stmt) -> None:
        method = _handler(type(self), "_stmt_", type(node))
        if method is None:
            what = _STATEMENT_NAMES.get(type(node), f"`{type(node).__name__}` statement")
            raise self.error(node, f"{what} is not supported in a Legato kernel")
        method(self, node)

    def _stmt_Pass(self, node: ast.Pass) -> None:
        pass

    def _stmt_Expr(self, node: ast.Expr) -> None:
        value = node.value
        if isinstance(value, ast.Yield):
            self.visit_yield(value)
            return
        if isinstance(value, ast.YieldFrom):
            raise self.error(value, "`yield from` is not supported in a Legato kernel")
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            return  # docstring / comment string
        self.eval(value)

    def _stmt_Assign(self, node: ast.Assign) -> None:
        value = self.eval(node.value)
        for target in node.targets:
            self.assign(target, value, node.value)

    def _stmt_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is None:
            return
        self.assign(node.target, self.eval(node.value), node.value)

    def _stmt_AugAssign(self, node: ast.AugAssign) -> None:
        if not isinstance(node.target, ast.Name):
            raise self.error(node.target, "augmented assignment needs a plain name on the left")
        load = ast.copy_location(ast.Name(node.target.id, ast.Load()), node.target)
        current = self.eval(load)
        value = self.binary(node, node.op, current, self.eval(node.value), node.target, node.value)
        self.assign(node.target, value, node)

    def assign(self, target: ast.expr, value, value_node: ast.AST) -> None:
        if isinstance(target, ast.Name):
            if isinstance(value, IRValue) and value.name is None:
                value.name = target.id
                if value.ssa.name_hint is None and _valid_hint(target.id):
                    value.ssa.name_hint = target.id
            self.frame.env[target.id] = value
            return
        if isinstance(target, (ast.Tuple, ast.List)):
            if not isinstance(value, (tuple, list)):
                raise self.error(value_node, f"cannot unpack {_describe(value)} into names")
            if len(value) != len(target.elts):
                raise self.error(
                    value_node,
                    f"cannot unpack {len(value)} values into {len(target.elts)} names",
                )
            for t, v in zip(target.elts, value):
                self.assign(t, v, value_node)
            return
        if isinstance(target, ast.Subscript):
            base = self.eval(target.value)
            if isinstance(base, (list, dict)):  # a compile-time container: `parts[i] = t`
                index = self.eval(target.slice)
                if not _is_static(index):
                    raise self.error(target.slice, "a list index must be a compile-time value")
                if not _is_static(value):
                    self.refuse_in_loop(
                        target,
                        "storing a tensor into a list",
                        "the loop body is compiled once; unroll the loop with "
                        "legato.static_range, or carry a tensor through it",
                    )
                try:
                    base[index] = value
                except Exception as e:  # noqa: BLE001 - report where in the kernel it happened
                    raise self.error(target, _message(e)) from None
                return
        raise self.error(
            target,
            "only names (and items of a Python list: `parts[i] = t`) can be assigned in a "
            "Legato kernel (tensors are values; write into a tensor with legato.tensor.memcpy)",
        )

    def _stmt_With(self, node: ast.With) -> None:
        if len(node.items) != 1:
            raise self.error(node, "a `with` statement takes exactly one execution context")
        item = node.items[0]
        ctx = self.eval(item.context_expr)
        if not isinstance(ctx, ExecContext):
            raise self.error(
                item.context_expr,
                f"`with` needs an execution context (device.get_top(), device.get_core(i) or "
                f"device.get_all_cores()), got {_describe(ctx)}",
            )
        if ctx.is_runtime_core:
            raise self.error(
                item.context_expr,
                "`with device.get_core(i)` needs a compile-time core index; a runtime index "
                "(from legato.core_id()) selects a core only as a request_load target; run "
                "per-core work in `with device.get_all_cores():` instead",
            )
        if item.optional_vars is not None:
            raise self.error(item.optional_vars, "`with <context> as name` is not supported")
        if self.region is not None:
            raise self.error(
                node,
                f"execution contexts cannot be nested: this `with {ctx}` is inside the "
                f"`with {self.region.ctx}` region at line {self.region.source.loc(self.region.node).line}",
            )
        region = RegionState(ctx, Block(), node, self.frame.source)
        self.region = region
        try:
            self.visit_body(node.body)
        finally:
            self.region = None
        yields = region.yields
        yield_op = L.YieldOp(*[v.ssa for _, v in yields])
        yield_op.location = self.loc(region.yield_node or node)
        region.block.add_op(yield_op)
        self.check(yield_op, region.yield_node or node)
        on = L.OnOp(
            L.context_from_str(str(ctx)),
            region.inputs,
            [v.type for _, v in yields],
            Region(region.block),
        )
        on.location = self.loc(node)
        self.check(on, node)
        self.kernel_block.add_op(on)
        for (name, v), result in zip(yields, on.res):
            if _valid_hint(name):
                result.name_hint = name
            self.frame.env[name] = IRValue(
                result, v.spec, None, name, ctx, v.defined_at, self.frame.source
            )

    def visit_yield(self, node: ast.Yield) -> None:
        if self.region is None:
            raise self.error(
                node, "`yield` is only allowed inside a `with <execution context>:` region"
            )
        self.refuse_in_loop(node, "`yield`", "yield after the loop")
        self.region.yield_node = node
        if node.value is None:
            return
        names = node.value.elts if isinstance(node.value, ast.Tuple) else [node.value]
        for n in names:
            if not isinstance(n, ast.Name):
                raise self.error(
                    n,
                    "yield names of tensor values (e.g. `yield q`): a yielded name is what "
                    "later regions of the same context see",
                )
            value = self.eval(n)
            if not isinstance(value, IRValue):
                raise self.error(
                    n,
                    f"'{n.id}' is a compile-time value ({_describe(value)}); only tensors are "
                    "yielded (compile-time values are visible everywhere already)",
                )
            self.region.yields = [(k, v) for k, v in self.region.yields if k != n.id]
            self.region.yields.append((n.id, value))

    def _stmt_If(self, node: ast.If) -> None:
        cond = self.eval(node.test)
        if not _is_static(cond):
            raise self.error(
                node.test,
                "`if` on a runtime tensor value is not supported; the condition must be a "
                "compile-time value",
            )
        try:
            taken = bool(cond)
        except Exception as e:  # noqa: BLE001
            raise self.error(node.test, f"cannot evaluate this condition: {e}") from None
        self.visit_body(node.body if taken else node.orelse)

    def _stmt_For(self, node: ast.For) -> None:
        iterable = self.eval(node.iter)
        if isinstance(iterable, RuntimeRange):
            self.runtime_for(node, iterable)
            return
        if isinstance(iterable, IRValue) or not _iterable(iterable):
            raise self.error(
                node.iter,
                "a `for` loop must iterate over a compile-time range or sequence "
                "(legato.static_range(n), range(n), a tuple) or over range(...) of a runtime "
                "index (x.size(d) of a dynamic dim, legato.core_id()); tensors are not iterable",
            )
        if node.orelse:
            raise self.error(node.orelse[0], "`for ... else` is not supported in a Legato kernel")
        for item in iterable:
            self.assign(node.target, item, node.iter)
            self.visit_body(node.body)
            if self.frame.returned:
                return

    def _stmt_Break(self, node):
        raise self.error(node, "`break` is not supported in a Legato kernel (loops are unrolled)")

    def _stmt_Continue(self, node):
        raise self.error(node, "`continue` is not supported in a Legato kernel")

    def _stmt_Assert(self, node: ast.Assert) -> None:
        cond = self.eval(node.test)
        if not _is_static(cond):
            raise self.error(node.test, "`assert` needs a compile-time condition")
        if not cond:
            msg = self.eval(node.msg) if node.msg is not None else None
            text = f"assertion failed: {ast.unparse(node.test)}"
            if msg is not None:
                text += f": {msg}"
            raise self.error(node, text)

    def _stmt_Return(self, node: ast.Return) -> None:
        if self.loop_depth > self.frame.loop_depth:
            self.refuse_in_loop(node, "`return`", "return after the loop")
        if self.frame.is_kernel:
            if node.value is not None:
                raise self.error(
                    node,
                    "a Legato kernel returns nothing: write results into an output argument "
                    "with legato.tensor.memcpy",
                )
            self.frame.returned = True
            return
        self.frame.return_value = self.eval(node.value) if node.value is not None else None
        self.frame.returned = True

    # -- expressions ---------------------------------------------------------------------------

    def eval(self, node: ast.expr):
        method = _handler(type(self), "_expr_", type(node))
        if method is None:
            raise self.error(
                node, f"`{type(node).__name__}` expressions are not supported in a Legato kernel"
            )
        return method(self, node)

    def _expr_Constant(self, node: ast.Constant):
        return node.value

    def _expr_Name(self, node: ast.Name):
        name = node.id
        frame = self.frame
        if name in frame.env:
            value = frame.env[name]
        elif name in frame.scope:
            value = frame.scope[name]
        elif name in _BUILTINS:
            value = _BUILTINS[name]
        elif hasattr(builtins, name):
            raise self.error(node, f"the builtin '{name}' cannot be used in a Legato kernel")
        else:
            raise self.error(node, f"name '{name}' is not defined")
        if isinstance(value, IRValue):
            return self.use(value, node)
        if isinstance(value, LoopLocal):
            raise self.error(
                node,
                f"'{name}' is assigned inside the runtime loop at line {value.line} and is not "
                "visible after it (only tensors that exist before the loop are carried through "
                "it: assign the tensor before the loop)",
            )
        if (
            isinstance(value, IRScalar)
            and value.region is not None
            and value.region is not self.region
        ):
            raise self.error(
                node,
                f"'{name}' is a runtime index of another region; runtime values do not cross "
                "regions (recompute it in this region)",
            )
        return value

    def use(self, value: IRValue, node: ast.AST) -> IRValue:
        """`value` as seen from the current region (enforces "values cross regions only by
        yield"; a value yielded by an earlier region of this context becomes an input)."""
        region = self.region
        if region is None or value.region is region:
            return value
        if value.region is None and value.yielded_from is None:
            return value  # a kernel argument
        name = value.name or "this value"
        if value.yielded_from is not None:
            if value.yielded_from != region.ctx:
                raise self.error(
                    node,
                    f"'{name}' was yielded by a `{value.yielded_from}` region and can only be "
                    f"used by later `{value.yielded_from}` regions, not in this `{region.ctx}` "
                    "region; move data between contexts with request_load/receive or memcpy",
                )
            key = id(value.ssa)
            if key not in region.input_args:
                arg = region.block.insert_arg(value.type, len(region.block.args))
                if _valid_hint(name):
                    arg.name_hint = name
                region.inputs.append(value.ssa)
                region.input_args[key] = IRValue(
                    arg, value.spec, region, value.name, None, value.defined_at, value.source
                )
            return region.input_args[key]
        where = ""
        if value.defined_at is not None and value.source is not None:
            where = f" at line {value.source.loc(value.defined_at).line}"
        raise self.error(
            node,
            f"'{name}' is defined{where} in another region (`with {value.region.ctx}`); "
            "values cross regions only by `yield`: end that region with `yield "
            f"{name}` and use it in a later region of the same context",
        )

    def _expr_Attribute(self, node: ast.Attribute):
        base = self.eval(node.value)
        attr = node.attr
        if isinstance(base, IRValue):
            return self.tensor_attribute(base, attr, node)
        if attr.startswith("__"):
            raise self.error(node, f"attribute '{attr}' cannot be used in a Legato kernel")
        try:
            return getattr(base, attr)
        except AttributeError:
            raise self.error(node, f"{_describe(base)} has no attribute '{attr}'") from None
        except LegatoError as e:
            raise self.error(node, _message(e)) from None

    def tensor_attribute(self, value: IRValue, attr: str, node: ast.AST):
        spec = value.spec
        if attr == "shape":
            if spec.dynamic_dims:
                raise self.error(
                    node,
                    f"tensor '{value.name or '?'}' ({spec}) has dynamic dims "
                    f"{list(spec.dynamic_dims)}: their sizes are only known at run time; use "
                    ".bounds for the compile-time upper bounds",
                )
            return tuple(d.size for d in spec.dims)
        if attr == "bounds":
            return spec.bounds
        if attr == "dtype":
            return spec.dtype
        if attr in ("memory", "space"):
            return spec.memory
        if attr in ("type", "spec"):
            return spec
        if attr == "ndim":
            return spec.rank
        if attr == "size":
            return TensorMethod(self, value, node)
        if attr == "T":
            if spec.rank != 2:
                raise self.error(node, f".T needs a rank-2 tensor, got {spec}")
            return self.emit_value(L.TransposeOp, node, value.ssa, [1, 0])
        raise self.error(
            node,
            f"tensor '{value.name or '?'}' ({spec}) has no attribute '{attr}' "
            "(tensors have .shape, .bounds, .dtype, .memory, .ndim, .T)",
        )

    def _expr_Tuple(self, node: ast.Tuple):
        return tuple(self.elements(node.elts))

    def _expr_List(self, node: ast.List):
        return self.elements(node.elts)

    def elements(self, elts: list[ast.expr]) -> list:
        """The values of a tuple/list display or a call's positional arguments, `*xs`
        unpacked (`(*parts, t)`)."""
        out: list = []
        for e in elts:
            if isinstance(e, ast.Starred):
                v = self.eval(e.value)
                if not isinstance(v, (tuple, list)):
                    raise self.error(e, f"cannot unpack {_describe(v)} with *")
                out.extend(v)
            else:
                out.append(self.eval(e))
        return out

    def _expr_Dict(self, node: ast.Dict):
        if any(k is None for k in node.keys):
            raise self.error(node, "`**` in a dict display is not supported")
        return {self.eval(k): self.eval(v) for k, v in zip(node.keys, node.values)}

    def _expr_JoinedStr(self, node: ast.JoinedStr):
        parts = []
        for v in node.values:
            if isinstance(v, ast.Constant):
                parts.append(str(v.value))
            else:
                assert isinstance(v, ast.FormattedValue)
                x = self.eval(v.value)
                spec = self.eval(v.format_spec) if v.format_spec is not None else ""
                if v.conversion == ord("r"):
                    x = repr(x)
                elif v.conversion == ord("s"):
                    x = str(x)
                parts.append(format(x, spec))
        return "".join(parts)

    def _expr_IfExp(self, node: ast.IfExp):
        cond = self.eval(node.test)
        if not _is_static(cond):
            raise self.error(node.test, "a conditional expression needs a compile-time condition")
        return self.eval(node.body if cond else node.orelse)

    def _expr_BoolOp(self, node: ast.BoolOp):
        result = None
        for v in node.values:
            result = self.eval(v)
            if not _is_static(result):
                raise self.error(v, "`and`/`or` need compile-time operands")
            if isinstance(node.op, ast.And) and not result:
                return result
            if isinstance(node.op, ast.Or) and result:
                return result
        return result

    def _expr_Compare(self, node: ast.Compare):
        left = self.eval(node.left)
        for op, right_node in zip(node.ops, node.comparators):
            right = self.eval(right_node)
            if (isinstance(left, IRValue) or isinstance(right, IRValue)) and len(node.ops) == 1:
                if type(op) in _TENSOR_COMPARE:  # `x < y`: the 0/1 mask of legato.lt
                    b = {"a": (left, node.left), "b": (right, right_node)}
                    return self._elementwise_binary(node, _TENSOR_COMPARE[type(op)], b)
            if not (_is_static(left) and _is_static(right)):
                raise self.error(
                    node,
                    "this comparison of tensors is not supported: compare two tensors (or a "
                    "tensor and a number) with one of == != < <= > >=, or compare compile-time "
                    "values",
                )
            try:
                ok = _COMPARE_OPS[type(op)](left, right)
            except Exception as e:  # noqa: BLE001
                raise self.error(node, f"cannot compare: {e}") from None
            if not ok:
                return False
            left = right
        return True

    def _expr_UnaryOp(self, node: ast.UnaryOp):
        operand = self.eval(node.operand)
        fn, tensor_op = _UNARY_OPS[type(node.op)]
        if isinstance(operand, IRScalar):
            return self.scalar_unary(node, operand)
        if isinstance(operand, IRValue):
            if tensor_op is None:
                raise self.error(node, f"operator {_op_symbol(node.op)} is not defined on tensors")
            return self.emit_value(tensor_op, node, operand.ssa)
        try:
            return fn(operand)
        except Exception as e:  # noqa: BLE001
            raise self.error(node, f"{type(e).__name__}: {e}") from None

    def _expr_BinOp(self, node: ast.BinOp):
        return self.binary(
            node, node.op, self.eval(node.left), self.eval(node.right), node.left, node.right
        )

    def binary(self, node, op, left, right, left_node, right_node):
        fn, tensor_op = _BINARY_OPS[type(op)]
        if isinstance(left, IRScalar) or isinstance(right, IRScalar):
            return self.scalar_binary(node, op, left, right, left_node, right_node)
        if not isinstance(left, IRValue) and not isinstance(right, IRValue):
            try:
                return fn(left, right)
            except Exception as e:  # noqa: BLE001
                raise self.error(node, f"{type(e).__name__}: {e}") from None
        if tensor_op is None:
            raise self.error(node, f"operator {_op_symbol(op)} is not defined on tensors")
        if tensor_op is L.MatmulOp:
            for v, n in ((left, left_node), (right, right_node)):
                if not isinstance(v, IRValue):
                    raise self.error(n, f"`@` needs two tensors, got {_describe(v)}")
            return self.matmul(node, left, right)
        lhs = self.as_tensor(left, right, left_node)
        rhs = self.as_tensor(right, left, right_node)
        return self.emit_value(tensor_op, node, lhs.ssa, rhs.ssa)

    def as_tensor(self, value, like: IRValue, node: ast.AST) -> IRValue:
        """A tensor operand: tensors pass; a Python number becomes a rank-0 `legato.constant`
        of `like`'s dtype and memory (torch's scalar broadcasting)."""
        if isinstance(value, IRValue):
            return value
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.error(node, f"expected a tensor or a number, got {_describe(value)}")
        if isinstance(value, float) and not like.spec.dtype.is_float:
            raise self.error(
                node, f"float constant {value} used with an integer tensor ({like.spec})"
            )
        t = L.TensorType([], like.spec.dtype, like.spec.memory)
        return self.emit_value(L.ConstantOp, node, value, t)

    def emit_value(self, op_cls, node: ast.AST, *args, **kwargs) -> IRValue:
        """Build `op_cls(*args)`, emit it at `node`, return its result as an IRValue."""
        try:
            op = op_cls(*args, **kwargs)
        except VerifyException as e:
            raise self.error(node, str(e)) from None
        self.emit(op, node)
        return self.new_value(op.results[0], node)

    def _expr_Subscript(self, node: ast.Subscript):
        base = self.eval(node.value)
        index = self.eval(node.slice)
        if isinstance(base, IRValue):
            return self.slice_tensor(base, index, node)
        if not _is_static(index):
            raise self.error(node.slice, "an index must be a compile-time value")
        try:
            return base[index]
        except Exception as e:  # noqa: BLE001
            raise self.error(node, f"{type(e).__name__}: {e}") from None

    def _expr_Slice(self, node: ast.Slice):
        parts = [
            self.eval(p) if p is not None else None for p in (node.lower, node.upper, node.step)
        ]
        return slice(*parts)

    def slice_tensor(self, value: IRValue, index, node: ast.AST) -> IRValue:
        """`x[a:b, :, c]` with static bounds -> legato.slice (+ reshape for int indices)."""
        spec = value.spec
        items = index if isinstance(index, tuple) else (index,)
        if len(items) > spec.rank:
            raise self.error(node, f"too many indices ({len(items)}) for {spec}")
        items = items + (slice(None),) * (spec.rank - len(items))
        if self.needs_dynamic_slice(value, items):
            return self.dynamic_slice(value, items, node)
        offsets, sizes, strides, keep = [], [], [], []
        for i, (d, it) in enumerate(zip(spec.dims, items)):
            if isinstance(it, slice):
                if it == slice(None) and d.is_dynamic:
                    offsets.append(0), sizes.append(-1), strides.append(1), keep.append(True)
                    continue
                if d.is_dynamic:
                    raise self.error(
                        node, f"dim {i} of {spec} is dynamic; it can only be sliced whole (`:`)"
                    )
                if it.step is not None and not (isinstance(it.step, int) and it.step > 0):
                    raise self.error(node, "slice steps must be positive")  # before indices()
                start, stop, step = it.indices(d.size)
                n = max(0, (stop - start + (step - 1)) // step)
                offsets.append(start), sizes.append(n), strides.append(step), keep.append(True)
            elif isinstance(it, int) and not isinstance(it, bool):
                if d.is_dynamic:
                    raise self.error(node, f"dim {i} of {spec} is dynamic; index it with `:`")
                j = it + d.size if it < 0 else it
                if not 0 <= j < d.size:
                    raise self.error(node, f"index {it} is out of range for dim {i} of {spec}")
                offsets.append(j), sizes.append(1), strides.append(1), keep.append(False)
            else:
                raise self.error(
                    node, f"tensor indices must be compile-time ints or slices, got {_describe(it)}"
                )
        result = self.emit_value(L.SliceOp, node, value.ssa, offsets, sizes, strides)
        if not all(keep):
            dims = [d for d, k in zip(result.spec.dims, keep) if k]
            result = self.emit_value(L.ReshapeOp, node, result.ssa, None, dims)
        return result

    def _expr_Call(self, node: ast.Call):
        fn = self.eval(node.func)
        op_name = _legato_op_name(fn)
        if op_name is not None:
            return self.call_legato_op(op_name, node)
        if isinstance(fn, LegatoFunction):
            return self.inline(fn, node)
        if getattr(fn, "_legato_kernel", False):  # a legato.jit.Kernel (a layer above)
            raise self.error(
                node,
                f"{fn.name} is a @legato.compile kernel; kernels cannot call kernels. Make the "
                "shared code a @legato.function",
            )
        args, kwargs = self.call_args(node)
        if not (_is_static(list(args)) and _is_static(list(kwargs.values()))):
            if _is_container_call(fn, args):
                return self.container_call(fn, args, kwargs, node)
            result = self.runtime_call(fn, args, kwargs, node)
            if result is not NotImplemented:
                return result
            name = getattr(fn, "__qualname__", None) or ast.unparse(node.func)
            raise self.error(
                node,
                f"'{name}' is a Python function: it runs at compile time and cannot take "
                "tensors. Use legato.tensor operations, or make it a @legato.function",
            )
        if not callable(fn):
            raise self.error(node.func, f"{_describe(fn)} is not callable")
        try:
            return fn(*args, **kwargs)
        except CompileError:
            raise
        except Exception as e:  # noqa: BLE001 - report where in the kernel it happened
            raise self.error(node, _message(e)) from None

    def container_call(self, fn, args: list, kwargs: dict, node: ast.Call):
        """A compile-time container operation on tensors (`parts.append(t)`, `tuple(parts)`,
        `len`, `zip`, ...): it moves references to tensors, never reads them, so it runs now."""
        if isinstance(getattr(fn, "__self__", None), list):
            self.refuse_in_loop(
                node,
                f"list.{fn.__name__} of a tensor",
                "the loop body is compiled once, so the list would get one element; unroll "
                "the loop with legato.static_range, or carry a tensor through it",
            )
        try:
            return fn(*args, **kwargs)
        except Exception as e:  # noqa: BLE001 - report where in the kernel it happened
            raise self.error(node, _message(e)) from None

    # -- comprehensions: unrolled at compile time, like a static `for` --------------------------

    def _expr_ListComp(self, node: ast.ListComp):
        return self.comprehension(node, lambda: self.eval(node.elt))

    def _expr_GeneratorExp(self, node: ast.GeneratorExp):
        # materialized: a generator of tensors is only ever consumed whole (tuple(), cat, ...)
        return tuple(self.comprehension(node, lambda: self.eval(node.elt)))

    def _expr_DictComp(self, node: ast.DictComp):
        return dict(self.comprehension(node, lambda: (self.eval(node.key), self.eval(node.value))))

    def comprehension(self, node, element) -> list:
        """The elements of a comprehension over compile-time iterables, each `for` clause
        unrolled in order and each `if` clause resolved at compile time; the loop names are
        local to it (as in Python 3)."""
        names = {
            n.id for g in node.generators for n in ast.walk(g.target) if isinstance(n, ast.Name)
        }
        env = self.frame.env
        saved = {n: env[n] for n in names if n in env}
        out: list = []
        try:
            self._unroll_generators(node.generators, 0, element, out)
        finally:
            for n in names:
                env.pop(n, None)
            env.update(saved)
        return out

    def _unroll_generators(self, gens, i: int, element, out: list) -> None:
        if i == len(gens):
            out.append(element())
            return
        g = gens[i]
        if g.is_async:
            raise self.error(g.iter, "`async for` is not supported in a Legato kernel")
        iterable = self.eval(g.iter)
        if isinstance(iterable, (RuntimeRange, IRValue)) or not _iterable(iterable):
            raise self.error(
                g.iter,
                "a comprehension unrolls at compile time: it must iterate over a compile-time "
                "range or sequence (legato.static_range(n), range(n), a tuple or list); for a "
                "range of a runtime index write a `for` loop that carries a tensor",
            )
        for item in iterable:
            self.assign(g.target, item, g.iter)
            keep = True
            for cond_node in g.ifs:
                cond = self.eval(cond_node)
                if not _is_static(cond):
                    raise self.error(
                        cond_node, "the `if` of a comprehension must be a compile-time condition"
                    )
                keep = keep and bool(cond)
            if keep:
                self._unroll_generators(gens, i + 1, element, out)

    def call_args(self, node: ast.Call) -> tuple[list, dict]:
        args = self.elements(node.args)
        kwargs = {}
        for k in node.keywords:
            if k.arg is None:
                raise self.error(k.value, "`**kwargs` in calls is not supported in a Legato kernel")
            kwargs[k.arg] = self.eval(k.value)
        return args, kwargs

    def bind_op_args(
        self,
        node: ast.Call,
        op: str,
        names: list[str] | None = None,
        defaults: dict | None = None,
    ) -> dict:
        """Bind a legato op call's arguments: name -> (value, node). The names and defaults are
        the builtin's signature (`legato.tensor.SIGNATURES[op]`) unless given; an error names
        the signature and points at the offending argument."""
        sig = BUILTIN_SIGNATURES.get(op)
        if names is None:
            assert sig is not None, f"legato.tensor.{op} has no registered signature"
            names, defaults = _signature_names(op, sig)
        defaults = defaults or {}
        what = _SignatureText(op, sig)
        bound: dict = {}
        if len(node.args) > len(names):
            raise self.error(
                node,
                f"{what} takes at most {len(names)} arguments ({', '.join(names)}), got "
                f"{len(node.args)}",
            )
        for name, a in zip(names, node.args):
            if isinstance(a, ast.Starred):
                raise self.error(a, f"`*` arguments are not supported for {what}")
            bound[name] = (self.eval(a), a)
        for k in node.keywords:
            if k.arg not in names:
                raise self.error(k.value, f"{what} has no argument '{k.arg}' ({', '.join(names)})")
            if k.arg in bound:
                raise self.error(k.value, f"{what}: argument '{k.arg}' given twice")
            bound[k.arg] = (self.eval(k.value), k.value)
        for name in names:
            if name not in bound:
                if name not in defaults:
                    raise self.error(node, f"{what}: missing argument '{name}'")
                bound[name] = (defaults[name], node)
        return bound

    # -- legato.tensor ops ---------------------------------------------------------------------

    def call_legato_op(self, op: str, node: ast.Call):
        method = getattr(self, "_op_" + op.replace(".", "_"), None)
        if method is None:
            raise self.error(node, f"legato {op} is not supported by this compiler yet")
        return method(node)

    def tensor_arg(self, bound: dict, name: str, op: str) -> IRValue:
        value, n = bound[name]
        if not isinstance(value, IRValue):
            raise self.error(
                n, f"legato.tensor.{op}: '{name}' must be a tensor, got {_describe(value)}"
            )
        return value

    def memory_arg(self, bound: dict, name: str, op: str, allowed=CORE_SPACES) -> str:
        value, n = bound[name]
        if not isinstance(value, str):
            raise self.error(
                n,
                f"legato.tensor.{op}: '{name}' must be a memory space name, got {_describe(value)}",
            )
        if value not in MEMORY_SPACES:
            raise self.error(
                n,
                f"unknown memory space '{value}'; expected one of {', '.join(MEMORY_SPACES)}",
            )
        if value not in allowed:
            kind = "a shared memory" if value in SHARED_SPACES else "not allowed here"
            raise self.error(
                n,
                f"legato.tensor.{op}: memory space '{value}' is {kind}; expected one of "
                f"{', '.join(allowed)} (a core's memory)",
            )
        return value

    def queue_arg(self, bound: dict, op: str) -> int:
        value, n = bound["queue"]
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise self.error(
                n,
                f"legato.tensor.{op}: queue must be a non-negative compile-time int, got "
                f"{_describe(value)}",
            )
        return value

    def require_region(self, node: ast.AST, op: str, core_only: bool = False) -> RegionState:
        if self.region is None:
            raise self.error(
                node,
                f"legato.tensor.{op} must run in an execution context; put it inside "
                "`with device.get_top():` or `with device.get_core(i):`",
            )
        if core_only and self.region.ctx.kind == "top":
            raise self.error(
                node,
                f"legato.tensor.{op} receives into a core's memory and must run in a core "
                "context (`with device.get_core(i):`), not on top",
            )
        return self.region

    def _op_request_load(self, node: ast.Call):
        op = "request_load"
        self.require_region(node, op)
        self.refuse_in_loop(
            node,
            "request_load",
            "their pairing is static; load tiles inside the loop with legato.tensor.load(x[...], 'sram')",
        )
        b = self.bind_op_args(node, op)
        src = self.tensor_arg(b, "src", op)
        target, tnode = b["target_ctx"]
        to_all = isinstance(target, ExecContext) and target.kind == "all_cores"
        if not isinstance(target, ExecContext) or not (target.is_core or to_all):
            raise self.error(
                tnode,
                f"legato.tensor.request_load: the target must be a core "
                f"(device.get_core(i)) or every core (device.get_all_cores()), got "
                f"{_describe(target)}",
            )
        memory = self.memory_arg(b, "memory", op)
        if memory == "mpu_weight":
            raise self.error(
                b["memory"][1],
                "request_load cannot write mpu_weight directly: load into 'mpu_buffer' and "
                "receive it with receive_type(<mpu_weight type>, queue, None, 'mpu_buffer')",
            )
        queue = self.queue_arg(b, op)
        if to_all:
            self.request_load_all_cores(node, src, memory, queue)
            return
        if target.is_runtime_core:
            self.request_load_runtime_core(node, tnode, src, target.index, memory, queue)
            return
        self.emit(L.RequestLoadOp(src.ssa, L.ContextAttr.core(target.index), memory, queue), node)
        self.sends.setdefault((target.index, memory, queue), []).append((node, self.frame.source))

    def _note_receive(self, node, memory, queue):
        ctx = self.region.ctx
        if ctx.is_core:
            self.receives.setdefault((ctx.index, memory, queue), []).append(
                (node, self.frame.source)
            )

    def _op_receive(self, node: ast.Call):
        op = "receive"
        self.require_region(node, op, core_only=True)
        self.refuse_in_loop(
            node,
            "receive",
            "their pairing is static; load tiles inside the loop with legato.tensor.load(x[...], 'sram')",
        )
        b = self.bind_op_args(node, op)
        like = self.tensor_arg(b, "like", op)
        queue = self.queue_arg(b, op)
        memory = self.memory_arg(b, "memory", op)
        self._note_receive(node, memory, queue)
        return self.emit_value(L.ReceiveOp, node, like.ssa, queue, memory)

    def _op_receive_type(self, node: ast.Call):
        op = "receive_type"
        self.require_region(node, op, core_only=True)
        self.refuse_in_loop(
            node,
            "receive_type",
            "their pairing is static; load tiles inside the loop with legato.tensor.load(x[...], 'sram')",
        )
        b = self.bind_op_args(node, op, ["type", "queue", "src", "memory"], {"src": None})
        spec, snode = b["type"]
        if isinstance(spec, IRValue) or not isinstance(spec, TensorSpec):
            raise self.error(
                snode,
                "legato.tensor.receive_type: 'type' must be a tensor type "
                f"(legato.get_model().tensor_type(...)), got {_describe(spec)}",
            )
        queue = self.queue_arg(b, op)
        memory = self.memory_arg(b, "memory", op)
        src_value, src_node = b["src"]
        src = None
        if src_value is not None:
            src = self.tensor_arg(b, "src", op)
            if src.spec.dims != spec.dims or src.spec.dtype != spec.dtype:
                raise self.error(
                    src_node,
                    f"receive_type: the source {src.spec} and the received type {spec} must "
                    "have the same shape and element type",
                )
        elif spec.dynamic_dims:
            raise self.error(
                snode,
                f"receive_type of {spec} without a source: its dynamic dims "
                f"({', '.join(str(i) for i in spec.dynamic_dims)}) have no runtime size; pass "
                "the tensor that was sent as `src` (receive_type(type, queue, src, memory))",
            )
        if spec.memory not in CORE_SPACES:
            raise self.error(
                snode,
                f"receive_type: the received type must be in a core memory, not {spec.memory}",
            )
        if spec.memory != memory and not (spec.memory == "mpu_weight" and memory == "mpu_buffer"):
            raise self.error(
                node,
                f"receive_type: the type's memory '{spec.memory}' differs from the receive "
                f"memory '{memory}'; only an mpu_weight type may be received through mpu_buffer",
            )
        self._note_receive(node, memory, queue)
        return self.emit_value(
            L.ReceiveTypeOp,
            node,
            L.TensorType.from_spec(spec),
            queue,
            memory,
            src.ssa if src is not None else None,
        )

    def _op_memcpy(self, node: ast.Call):
        op = "memcpy"
        self.require_region(node, op)
        b = self.bind_op_args(node, op)
        dst = self.tensor_arg(b, "dst", op)
        src = self.tensor_arg(b, "src", op)
        if dst.spec.rank != src.spec.rank:
            raise self.error(
                node, f"memcpy: destination {dst.spec} and source {src.spec} differ in rank"
            )
        for i, (d, s) in enumerate(zip(dst.spec.dims, src.spec.dims)):
            if s.bound > d.bound or (not d.is_dynamic and not s.is_dynamic and d.size != s.size):
                raise self.error(
                    node,
                    f"memcpy: dim {i} of the source ({s}) does not fit dim {i} of the "
                    f"destination ({d}); destination {dst.spec}, source {src.spec}",
                )
        self.emit(L.MemcpyOp(dst.ssa, src.ssa), node)

    def matmul(self, node: ast.AST, a: IRValue, b: IRValue, dtype=None) -> IRValue:
        if a.spec.rank < 2 or b.spec.rank != 2:
            raise self.error(node, f"matmul expects [M, K] @ [K, N], got {a.spec} @ {b.spec}")
        ka, kb = a.spec.dims[-1], b.spec.dims[0]
        if ka != kb:
            hint = ""
            if ka.is_dynamic != kb.is_dynamic:
                hint = (
                    "; a slice of a dynamic dim has a runtime size unless it provably lies "
                    "inside the dim: loop over its whole tiles (for t in range(x.size(d) // R): "
                    "x[t*R : t*R + R]) and take the partial tile apart"
                )
            raise self.error(
                node,
                f"matmul shape mismatch: inner dimensions differ ({a.name or 'lhs'} has K = "
                f"{ka}, {b.name or 'rhs'} has K = {kb}): {a.spec} @ {b.spec}{hint}",
            )
        if dtype is None:
            return self.emit_value(L.MatmulOp, node, a.ssa, b.ssa)
        t = L.infer_matmul(a.ssa.type, b.ssa.type)
        rt = L.TensorType(t.dims, dtype, t.memory)
        return self.emit_value(L.MatmulOp, node, a.ssa, b.ssa, rt)

    def _op_matmul(self, node: ast.Call):
        self.require_region(node, "matmul")
        b = self.bind_op_args(node, "matmul")
        dtype, dnode = b["dtype"]
        if dtype is not None and not isinstance(dtype, DType):
            raise self.error(dnode, f"matmul: dtype must be a legato type, got {_describe(dtype)}")
        return self.matmul(
            node, self.tensor_arg(b, "a", "matmul"), self.tensor_arg(b, "b", "matmul"), dtype
        )

    def _op_full(self, node: ast.Call):
        self.require_region(node, "full")
        b = self.bind_op_args(node, "full")
        dims = self._shape_arg(*b["shape"])
        value, vnode = b["value"]
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.error(
                vnode, f"full: value must be a compile-time number, got {_describe(value)}"
            )
        dtype, dnode = b["dtype"]
        if not isinstance(dtype, DType):
            raise self.error(dnode, f"full: dtype must be a legato type, got {_describe(dtype)}")
        memory = self.memory_arg(b, "memory", "full")
        if any(d.is_dynamic for d in dims):
            raise self.error(b["shape"][1], "full: the shape must be static")
        if isinstance(value, float) and not dtype.is_float:
            raise self.error(vnode, f"full: float value {value} for the integer type {dtype}")
        return self.emit_value(L.ConstantOp, node, value, L.TensorType(dims, dtype, memory))

    def _op_where(self, node: ast.Call):
        self.require_region(node, "where")
        b = self.bind_op_args(node, "where")
        cond = self.tensor_arg(b, "cond", "where")
        (x, xn), (y, yn) = b["a"], b["b"]
        if not isinstance(x, IRValue) and not isinstance(y, IRValue):
            raise self.error(
                node,
                "legato.tensor.where needs a tensor for `a` or `b` (its dtype is the result's)",
            )
        like = x if isinstance(x, IRValue) else y
        a, c = self.as_tensor(x, like, xn), self.as_tensor(y, like, yn)
        return self.emit_value(L.WhereOp, node, cond.ssa, a.ssa, c.ssa)

    def _op_gather(self, node: ast.Call):
        self.require_region(node, "gather")
        b = self.bind_op_args(node, "gather")
        table = self.tensor_arg(b, "table", "gather")
        given, inode = b["indices"]
        if isinstance(given, (tuple, list)):  # table[i0, i1, ...]: one index per leading dim
            if not given or not all(isinstance(x, IRValue) for x in given):
                raise self.error(
                    inode, "legato.tensor.gather: indices must be a tensor or a tuple of tensors"
                )
            indices, more = given[0], [x.ssa for x in given[1:]]
        else:
            indices, more = self.tensor_arg(b, "indices", "gather"), []
        memory = self.memory_arg(
            b, "memory", "gather", [s for s in CORE_SPACES if s != "mpu_weight"]
        )
        try:
            rt = L.infer_gather(
                table.ssa.type, indices.ssa.type, memory, tuple(m.type for m in more)
            )
        except VerifyException as e:
            raise self.error(node, str(e)) from None
        wrap, wnode = b.get("wrap", (False, None))
        if not isinstance(wrap, bool):
            raise self.error(
                wnode or node, "legato.tensor.gather: wrap must be a compile-time bool"
            )
        offset, onode = b.get("offset", (0, None))
        if (
            not isinstance(offset, int)
            or isinstance(offset, bool)
            or not -(2**63) <= offset < 2**63
        ):
            raise self.error(
                onode or node, "legato.tensor.gather: offset must be a compile-time int64"
            )
        return self.emit_value(L.GatherOp, node, table.ssa, indices.ssa, rt, wrap, more, offset)

    def _op_scatter(self, node: ast.Call):
        self.require_region(node, "scatter")
        b = self.bind_op_args(node, "scatter")
        table = self.tensor_arg(b, "table", "scatter")
        indices = self.tensor_arg(b, "indices", "scatter")
        rows = self.tensor_arg(b, "rows", "scatter")
        try:
            L.verify_scatter(table.ssa.type, indices.ssa.type, rows.ssa.type)
        except VerifyException as e:
            raise self.error(node, str(e)) from None
        self.emit(L.ScatterOp(table.ssa, indices.ssa, rows.ssa), node)

    def __getattr__(self, name: str):
        # `_op_add`, `_op_exp`, ...: the elementwise ops share two implementations.
        if name.startswith("_op_"):
            op = name[4:]
            if op in _BINARY_TENSOR_OPS and op != "matmul":
                return lambda node: self._elementwise_binary(node, op)
            if op in _UNARY_TENSOR_OPS:
                return lambda node: self._elementwise_unary(node, op)
        raise AttributeError(name)

    def _elementwise_binary(self, node: ast.Call, op: str, b: dict | None = None):
        self.require_region(node, op)
        if b is None:
            b = self.bind_op_args(node, op)
        (x, xn), (y, yn) = b["a"], b["b"]
        if not isinstance(x, IRValue) and not isinstance(y, IRValue):
            raise self.error(node, f"legato.tensor.{op} needs at least one tensor operand")
        like = x if isinstance(x, IRValue) else y
        lhs, rhs = self.as_tensor(x, like, xn), self.as_tensor(y, like, yn)
        if op == "matmul":
            return self.matmul(node, lhs, rhs)
        return self.emit_value(_BINARY_TENSOR_OPS[op], node, lhs.ssa, rhs.ssa)

    def _elementwise_unary(self, node: ast.Call, op: str):
        self.require_region(node, op)
        b = self.bind_op_args(node, op)
        return self.emit_value(_UNARY_TENSOR_OPS[op], node, self.tensor_arg(b, "x", op).ssa)

    def _reduction(self, node: ast.Call, op: str, op_cls, b: dict | None = None):
        """`op(x, dim=None, keepdim=False)` as in torch (`axis=` is the older spelling): `dim`
        an int, a tuple of ints, or None (every dim)."""
        self.require_region(node, op)
        if b is None:
            b = self.bind_op_args(node, op)
        x = self.tensor_arg(b, "x", op)
        dim, anode = b["dim"]
        if dim is None and b.get("axis", (None, None))[0] is not None:
            dim, anode = b["axis"]
        keepdim, _ = b.get("keepdim", (False, None))
        rank = x.spec.rank
        if dim is None:
            dims = list(range(rank))
        elif isinstance(dim, (tuple, list)):
            dims = list(dim)
        else:
            dims = [dim]
        if not dims or any(isinstance(d, bool) or not isinstance(d, int) for d in dims):
            raise self.error(
                anode, f"legato.tensor.{op}: dim must be a compile-time int or tuple of ints"
            )
        norm = sorted({d + rank if d < 0 else d for d in dims})
        if len(norm) == 1:
            return self.emit_value(op_cls, node, x.ssa, dims[0], bool(keepdim))
        if op == "mean":  # the mean over several dims: their sum, divided once
            count = 1
            for d in norm:
                if not 0 <= d < rank:
                    raise self.error(
                        anode, f"legato.tensor.mean: dim {d} out of range for {x.spec}"
                    )
                if x.spec.dims[d].is_dynamic:
                    raise self.error(
                        anode, "legato.tensor.mean over several dims needs static dims"
                    )
                count *= x.spec.dims[d].size
            total = self._reduction(
                node,
                "sum",
                L.SumOp,
                {"x": (x, node), "dim": (dim, anode), "keepdim": (keepdim, None)},
            )
            return self.emit_value(
                L.DivOp, node, total.ssa, self.as_tensor(float(count), total, node).ssa
            )
        result = x
        for d in reversed(norm):  # highest dim first, so the lower ones keep their index
            result = self.emit_value(op_cls, node, result.ssa, d, bool(keepdim))
        return result

    def _op_sum(self, node):
        return self._reduction(node, "sum", L.SumOp)

    def _op_mean(self, node):
        return self._reduction(node, "mean", L.MeanOp)

    def _max_min(self, node: ast.Call, op: str, elementwise: str, reduce_cls):
        """`max(a, b)` (a tensor or float second operand) is elementwise; `max(x, axis)`,
        `max(x, axis=...)` a reduction."""
        if not node.keywords and len(node.args) == 2:
            b = self.bind_op_args(node, op, ["a", "b"], {})
            second = b["b"][0]
            if isinstance(second, (IRValue, float)):
                return self._elementwise_binary(node, elementwise, b)
            return self._reduction(node, op, reduce_cls, {"x": b["a"], "dim": b["b"]})
        return self._reduction(node, op, reduce_cls)

    def _op_max(self, node):
        return self._max_min(node, "max", "maximum", L.AmaxOp)

    def _op_min(self, node):
        return self._max_min(node, "min", "minimum", L.AminOp)

    def _op_amax(self, node):
        return self._reduction(node, "amax", L.AmaxOp)

    def _op_amin(self, node):
        return self._reduction(node, "amin", L.AminOp)

    def _op_to(self, node):  # torch's `x.to(dtype)` spelling of cast
        return self._op_cast(node, "to")

    def _op_clamp(self, node: ast.Call):
        self.require_region(node, "clamp")
        b = self.bind_op_args(node, "clamp")
        x = self.tensor_arg(b, "x", "clamp")
        bounds = []
        for name in ("min", "max"):
            v, n = b[name]
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))):
                raise self.error(
                    n,
                    f"legato.tensor.clamp: {name} must be a compile-time number or None, got "
                    f"{_describe(v)}",
                )
            if isinstance(v, float) and not x.spec.dtype.is_float:
                raise self.error(n, f"clamp: float bound {v} for the integer tensor {x.spec}")
            bounds.append(v)
        if bounds == [None, None]:
            raise self.error(node, "legato.tensor.clamp needs a min or a max bound")
        return self.emit_value(L.ClampOp, node, x.ssa, *bounds)

    def _op_cast(self, node: ast.Call, op: str = "cast"):
        self.require_region(node, op)
        b = self.bind_op_args(node, op)
        x = self.tensor_arg(b, "x", op)
        dtype, dnode = b["dtype"]
        if not isinstance(dtype, DType):
            raise self.error(dnode, f"{op}: dtype must be a legato type, got {_describe(dtype)}")
        return self.emit_value(L.CastOp, node, x.ssa, dtype)

    def _shape_arg(self, value, n) -> list[Dim]:
        if isinstance(value, int):
            value = (value,)
        if not isinstance(value, (tuple, list)):
            raise self.error(n, f"a shape must be a tuple of ints, got {_describe(value)}")
        try:
            return [parse_dim(e) for e in value]
        except TypeError as e:
            raise self.error(n, str(e)) from None

    def _op_reshape(self, node: ast.Call):
        self.require_region(node, "reshape")
        b = self.bind_op_args(node, "reshape")
        x = self.tensor_arg(b, "x", "reshape")
        dims = self._shape_arg(*b["shape"])
        return self.emit_value(L.ReshapeOp, node, x.ssa, None, dims)

    def _op_broadcast(self, node: ast.Call):
        self.require_region(node, "broadcast")
        b = self.bind_op_args(node, "broadcast")
        x = self.tensor_arg(b, "x", "broadcast")
        dims = self._shape_arg(*b["shape"])
        return self.emit_value(L.BroadcastToOp, node, x.ssa, None, dims)

    def _op_transpose(self, node: ast.Call):
        self.require_region(node, "transpose")
        b = self.bind_op_args(node, "transpose")
        x = self.tensor_arg(b, "x", "transpose")
        perm, pnode = b["dims"]
        d1, _ = b["dim1"]
        if isinstance(perm, int) and isinstance(d1, int):  # torch: transpose(x, dim0, dim1)
            rank = x.spec.rank
            i, j = perm % rank if rank else 0, d1 % rank if rank else 0
            perm = list(range(rank))
            perm[i], perm[j] = perm[j], perm[i]
        elif d1 is not None:
            raise self.error(node, "transpose: give (x, dim0, dim1) or (x, dims) with dims a tuple")
        if perm is None:
            perm = list(reversed(range(x.spec.rank)))
        if not isinstance(perm, (tuple, list)) or not all(isinstance(p, int) for p in perm):
            raise self.error(pnode, "transpose: dims must be a tuple of compile-time ints")
        return self.emit_value(L.TransposeOp, node, x.ssa, list(perm))

    def _op_concat(self, node: ast.Call):
        self.require_region(node, "concat")
        b = self.bind_op_args(node, "concat")
        xs, xnode = b["xs"]
        if not isinstance(xs, (tuple, list)) or not all(isinstance(x, IRValue) for x in xs):
            raise self.error(xnode, "concat: xs must be a tuple of tensors")
        axis, anode = b["dim"] if b["dim"][0] is not None else b["axis"]
        if axis is None:
            axis = 0
        if isinstance(axis, bool) or not isinstance(axis, int):
            raise self.error(anode, "concat: axis must be a compile-time int")
        return self.emit_value(L.CatOp, node, [x.ssa for x in xs], axis)

    # -- inlining ------------------------------------------------------------------------------

    def inline(self, fn: LegatoFunction, node: ast.Call):
        if fn in self.inline_stack:
            raise self.error(
                node, f"@legato.function {fn.__qualname__} calls itself; recursion is not supported"
            )
        src = fn.source
        args, kwargs = self.call_args(node)
        # a function's signature and scope, once per kernel: copying its module's globals and
        # finding its closure's names per call was ~10% of a big kernel's frontend
        known = self.inlined.get(fn.fn)
        if known is None:
            signature = inspect.signature(fn.fn)
            params = signature.parameters.values()
            # plain parameters (no `*`, `**`, `/` or keyword-only ones): a call giving each one
            # positionally binds them in order, as `bind` does
            plain = all(p.kind is p.POSITIONAL_OR_KEYWORD for p in params)
            known = self.inlined[fn.fn] = (
                signature,
                _scope_of(fn.fn),
                tuple(signature.parameters) if plain else None,
            )
        signature, scope, names = known
        if names is not None and not kwargs and len(args) == len(names):
            env = dict(zip(names, args))
        else:
            try:
                bound = signature.bind(*args, **kwargs)
            except TypeError as e:
                raise self.error(node, f"{fn.__qualname__}(): {e}") from None
            bound.apply_defaults()
            env = dict(bound.arguments)
        self.inline_stack.append(fn)
        self.frames.append(Frame(src, env, scope, loop_depth=self.loop_depth))
        try:
            self.visit_body(src.tree.body)
            return self.frame.return_value
        finally:
            self.frames.pop()
            self.inline_stack.pop()


# --------------------------------------------------------------------------------------------
# Small helpers


def _valid_hint(name: str) -> bool:
    return name.isidentifier() and not name[:1].isdigit()


# Calls that only move references to the values they are given (never read a tensor), so they
# may run at compile time on tensors: building a tuple/list of tensors in a static loop.
_CONTAINER_FUNCS = (tuple, list, len, zip, enumerate, reversed)
_LIST_METHODS = ("append", "extend", "insert", "pop", "reverse", "copy", "clear")


def _is_container_call(fn, args) -> bool:
    if any(fn is f for f in _CONTAINER_FUNCS):
        # over a tuple/list holding tensors; a tensor itself is not a Python sequence
        return not any(isinstance(a, (IRValue, IRScalar)) for a in args)
    owner = getattr(fn, "__self__", None)
    return isinstance(owner, list) and getattr(fn, "__name__", "") in _LIST_METHODS


def _iterable(value) -> bool:
    if isinstance(value, (str, bytes)):
        return False
    try:
        iter(value)
    except TypeError:
        return False
    return True


def _message(e: Exception) -> str:
    if isinstance(e, LegatoError):
        return str(e)
    return f"{type(e).__name__}: {e}" if not isinstance(e, (ValueError, TypeError)) else str(e)


# --------------------------------------------------------------------------------------------
# Entry points


def emit_kernel(
    src: FunctionSource, params: list, constexprs: dict, ctx: CompileContext
) -> ModuleOp:
    """The `builtin.module` holding the `legato.kernel` of `src` (raises CompileError)."""
    return CodeGenerator(src, params, constexprs, ctx).generate()


# Set on the module `generate` returns: every op in it passed its verifier as it was built.
_FRONTEND_VERIFIED = "_legato_frontend_verified"


def frontend_verified(module: ModuleOp) -> bool:
    """Whether `module` is the frontend's output, every op of which was verified as it was
    built (the compiler then need not verify it again; a module changed afterwards must not be
    passed as one: the mark cannot see the change)."""
    return getattr(module, _FRONTEND_VERIFIED, False)


def print_module(module: ModuleOp, debuginfo: bool = True) -> str:
    """Textual IR; with `debuginfo`, every op carries its `loc("file":line:col)`."""
    out = io.StringIO()
    Printer(stream=out, print_debuginfo=debuginfo).print_op(module)
    return out.getvalue() + "\n"
