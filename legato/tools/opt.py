"""`legato-opt`: the mlir-opt-like driver of Legato.

xDSL's own `xdsl-opt` (dialects builtin, func, arith, scf, ...; `-p` pipelines with options,
`--split-input-file`, `--verify-diagnostics`, `--print-op-generic`, `-t <target>`) plus Legato's
dialects (`legato.dialects.get_all_dialects`), passes and targets
(`legato.transforms.registry`). Errors in the input are reported as diagnostics with their
location and a non-zero exit status, never as a Python traceback.

Before any pass the input is verified op by op (errors located at the op's `loc(...)` or where
it was parsed) and for SSA dominance (`check_dominance`: xDSL's parser accepts a forward
reference in a block, which the lowerings cannot handle). `--verify-diagnostics` has MLIR's
semantics (`LegatoOptMain._run_verifying_diagnostics`): `// expected-error @+1 {{text}}` (also
`@-N`, `@above`, `@below`, or on the line itself) must match a produced error, and every error
must be expected; a mismatch exits 1.
"""

from __future__ import annotations

import dataclasses
import re
import sys
from collections.abc import Sequence
from io import BytesIO, StringIO

from xdsl.dialects.builtin import FileLineColLoc, IntAttr, ModuleOp, StringAttr
from xdsl.ir import Block, BlockArgument, Operation, OpResult
from xdsl.parser import Parser
from xdsl.utils.exceptions import (
    ArgSpecParseError,
    DiagnosticException,
    ParseError,
    PassFailedException,
    VerifyException,
)
from xdsl.xdsl_opt_main import xDSLOptMain

from legato.errors import LegatoError
from legato.transforms import registry
from legato.transforms.diagnostics import verify_error_op


def _harden_xdsl_lexer() -> None:
    """xDSL's string-literal regex nests quantifiers (`(?:[^"...]+|...)*`): on an unterminated
    string that runs to the end of a long line it backtracks exponentially, so legato-opt hung
    on a truncated attribute like `{buffer = "xfer1   } : !core.buf<...>`. The same language with
    one character per repetition matches in linear time."""
    import re

    from xdsl.utils.mlir_lexer import MLIRLexer

    MLIRLexer._unescaped_characters_regex = re.compile(
        r'"(?:[^"\\\n\v\f]|\\(?:["nt\\]|[0-9A-Fa-f]{2}))*"'
    )


_harden_xdsl_lexer()


class LegatoOptMain(xDSLOptMain):
    """xDSLOptMain with Legato's dialects, passes and targets registered."""

    version_format = "legato-opt (xdsl {xdsl_version})"

    def __init__(
        self,
        description: str = "Legato modular optimizer driver",
        args: Sequence[str] | None = None,
    ):
        super().__init__(description=description, args=args)
        # `-t bin -o FILE`: the binary target writes FILE itself (bytes, not text).
        if self.args.output_file and self.args.target.split("{")[0] == "bin":
            if "{" not in self.args.target:
                self.args.target = f'bin{{path="{self.args.output_file}"}}'
            self.args.output_file = None

    def register_all_dialects(self):
        super().register_all_dialects()
        for name, factory in registry.get_all_dialects().items():
            if name not in self.ctx.registered_dialect_names:
                self.ctx.register_dialect(name, factory)

    def register_all_passes(self):
        super().register_all_passes()
        for name, factory in registry.get_all_passes().items():
            self.register_pass(name, factory)

    def register_all_targets(self):
        super().register_all_targets()
        for name, factory in registry.get_all_targets().items():
            self.available_targets[name] = factory

    def register_all_arguments(self, arg_parser):
        arg_parser.prog = "legato-opt"  # usage errors say `legato-opt: error: ...` (status 2)
        super().register_all_arguments(arg_parser)

    # What runs now, for the message of an unexpected exception ("pass 'x'", "target 'asm'").
    stage: str = "parsing"

    def parse_chunk(self, chunk, file_extension, offset=0):
        self.stage = "parsing"
        frontend = self.args.frontend or file_extension
        if frontend != "mlir":
            return super().parse_chunk(chunk, file_extension, offset)
        data = chunk.read()
        try:
            text = data.decode() if isinstance(data, bytes) else data
        except UnicodeDecodeError as e:
            before = data[: e.start]
            line = before.count(b"\n") + 1 + offset
            col = e.start - (before.rfind(b"\n") + 1) + 1
            raise LegatoError(
                f"{self.get_input_name()}:{line}:{col}: error: the input is not "
                f"UTF-8 text (byte 0x{data[e.start]:02x})"
            ) from None
        # an error about no op in particular (the chunk holds no kernel) is located at the
        # chunk's first line that is not blank, as mlir-opt locates an implicit module
        lead = len(text) - len(text.lstrip("\n\r\t "))
        self.chunk_location = (
            f"{self.get_input_name()}:{offset + 1 + text.count(chr(10), 0, lead)}:1"
        )
        parser = _LocatingParser(self.ctx, text, self.get_input_name(), offset)
        module = parser.parse_module(not self.args.no_implicit_module)
        _PARSED_AT.clear()
        _PARSED_AT.update(parser.positions)
        # An op without a `loc(...)` gets where it was parsed, as in mlir-opt: the lowerings
        # carry an op's location to the ops they make of it, so a pass's error about one of
        # those still names the input line.
        for op, (line, col) in parser.line_cols.items():
            if not isinstance(op.location, FileLineColLoc):
                op.location = FileLineColLoc(
                    StringAttr(self.get_input_name()), IntAttr(line), IntAttr(col)
                )
        return module

    def apply_passes(self, prog: ModuleOp):
        # Verify first ourselves so that an error names the source location of the failing op
        # (the frontend puts `loc("k.py":12:8)` on every op); the pipeline verifies again.
        self.stage = "verification"
        if not self.args.disable_verify:
            verify_with_locations(prog)
        pipeline = self.pipeline
        callback = pipeline.callback
        if callback is not None:
            callback(None, prog, pipeline.passes[0] if pipeline.passes else None)
        for i, p in enumerate(pipeline.passes):
            self.stage = f"pass '{p.name}'"
            p.apply(self.ctx, prog)
            if callback is not None:
                self.stage = f"verification after pass '{p.name}'"
                nxt = pipeline.passes[i + 1] if i + 1 < len(pipeline.passes) else None
                try:
                    callback(p, prog, nxt)  # xDSL's: verifies, prints between passes
                except DiagnosticException as e:
                    raise late_verify_error(prog, e, p.name) from None

    def output_resulting_program(self, prog: ModuleOp) -> str:
        self.stage = f"target '{self.args.target}'"
        return super().output_resulting_program(prog)

    def run(self):
        if not self.args.verify_diagnostics:
            return super().run()
        self._run_verifying_diagnostics()

    def _run_verifying_diagnostics(self) -> None:
        """`--verify-diagnostics` with MLIR's semantics: every error must be announced by an
        `// expected-error {{text}}` on its line (`@+N` / `@-N` relative, `@above` / `@below`
        the nearest line above/below that is not itself an `expected-` line), every announced
        error must be produced (text: a substring of the message), or legato-opt fails with one
        `file:line: error: ...` per mismatch. Each chunk of `--split-input-file` is checked on
        its own; the output of the chunks without errors is printed."""
        chunks, file_extension = self.prepare_input()
        output = self.prepare_output()
        problems: list[str] = []
        name = self.get_input_name()
        printed = False
        try:
            for chunk, offset in chunks:
                data = chunk.read()
                chunk.close()
                text = data.decode(errors="replace") if isinstance(data, bytes) else data
                expected = expectations(text, offset)
                got = None
                out = None
                try:
                    again = BytesIO(data) if isinstance(data, bytes) else StringIO(data)
                    module = self.parse_chunk(again, file_extension, offset)
                    if module is not None:
                        self.apply_passes(module)
                        out = self.output_resulting_program(module)
                except ParseError as e:
                    e.span = dataclasses.replace(e.span, line_offset=offset)
                    got = str(e)
                except (DiagnosticException, PassFailedException, LegatoError) as e:
                    got = "\n".join([located_message(e, self), *getattr(e, "__notes__", ())])
                if out is not None:
                    if printed:
                        output.write("// -----\n")
                    output.write(out)
                    printed = True
                problems += match_diagnostics(name, expected, got)
        finally:
            if output is not sys.stdout:
                output.close()
        if problems:
            raise DiagnosticsMismatch("\n".join(problems))


class DiagnosticsMismatch(LegatoError):
    """`--verify-diagnostics`: the errors produced differ from those the input announces."""


_EXPECTED = re.compile(
    r"//\s*expected-(error|warning|note|remark)\s*(?:@([+-]\d+|above|below))?\s*\{\{(.*?)\}\}"
)
_AT_LINE = re.compile(r"^[^\s:]*:(\d+):(\d+)(?::|$)")


@dataclasses.dataclass
class Expectation:
    kind: str
    line: int  # 1-based, in the whole input
    text: str
    written_at: int


def expectations(text: str, offset: int = 0) -> list[Expectation]:
    """The `// expected-KIND @WHERE {{TEXT}}` annotations of a chunk starting `offset` lines
    into the input."""
    lines = text.split("\n")
    out = []
    for n, line in enumerate(lines):
        for m in _EXPECTED.finditer(line):
            kind, where, body = m.groups()
            target = n
            if where in ("above", "below"):
                step = -1 if where == "above" else 1
                target = n + step
                while 0 <= target < len(lines) and "expected-" in lines[target]:
                    target += step
            elif where:
                target = n + int(where)
            out.append(Expectation(kind, target + 1 + offset, body, n + 1 + offset))
    return out


def _diagnostic_line(message: str) -> int | None:
    """The line of the `file:line:col` a diagnostic starts with (or xDSL's parse error, whose
    first line is `file:line:col`)."""
    lines = message.strip().splitlines()
    m = _AT_LINE.match(lines[0]) if lines else None
    return int(m.group(1)) if m else None


def _summary(message: str) -> str:
    """A diagnostic on one line: its first line, or for xDSL's parse errors (a bare
    `file:line:col`, the source line, a caret, the message) the location and the message."""
    lines = [x for x in message.strip().splitlines() if x.strip()]
    if not lines:
        return "(empty message)"
    m = _AT_LINE.match(lines[0])
    if m and m.end() == len(lines[0].rstrip()) and len(lines) > 1:
        return f"{lines[0].rstrip()}: {lines[-1].strip()}"
    return lines[0]


def match_diagnostics(name: str, expected: list[Expectation], got: str | None) -> list[str]:
    """The mismatches between the expected diagnostics of a chunk and the one it produced."""
    problems = []
    matched = False
    line = _diagnostic_line(got) if got is not None else None
    for e in expected:
        if (
            got is not None
            and not matched
            and e.kind == "error"
            and line == e.line
            and e.text in got
        ):
            matched = True
            continue
        problems.append(
            f'{name}:{e.written_at}: error: expected {e.kind} "{e.text}" on line {e.line} '
            "was not produced" + (f" (the input produced: {_summary(got)})" if got else "")
        )
    if got is not None and not matched:
        where = f"{name}:{line}" if line is not None else name
        problems.append(f"{where}: error: unexpected error: {_summary(got)}")
    return problems


# op -> "file:line:col" where legato-opt parsed it (for ops without a `loc(...)` of their own).
_PARSED_AT: dict[Operation, str] = {}


class _ParsedOpVerifyError(VerifyException):
    """A verifier error raised while an op was parsed, located at the op."""


class _LocatingParser(Parser):
    """xDSL's parser, remembering where in the input each operation starts."""

    def __init__(self, ctx, text: str, name: str, line_offset: int = 0):
        super().__init__(ctx, text, name)
        self._text = text
        self._name = name
        self._line_offset = line_offset
        self.positions: dict[Operation, str] = {}
        self.line_cols: dict[Operation, tuple[int, int]] = {}

    def parse_optional_operation(self) -> Operation | None:
        start = self._current_token.span.start
        try:
            op = super().parse_optional_operation()
        except _ParsedOpVerifyError:
            raise
        except VerifyException as e:
            # A check an op's custom parser makes (xDSL's `scf.for` checks its terminator):
            # located at the op being parsed, not at the whole input.
            line = self._text.count("\n", 0, start) + 1 + self._line_offset
            col = start - (self._text.rfind("\n", 0, start) + 1) + 1
            raise _ParsedOpVerifyError(f"{self._name}:{line}:{col}: error: {e}") from None
        if op is not None:
            line = self._text.count("\n", 0, start) + 1 + self._line_offset
            col = start - (self._text.rfind("\n", 0, start) + 1) + 1
            self.positions[op] = f"{self._name}:{line}:{col}"
            self.line_cols[op] = (line, col)
        return op


class DominanceError(DiagnosticException):
    """A value used where its definition does not dominate the use."""


def _value_name(v) -> str:
    return f"%{v.name_hint}" if v.name_hint else f"operand of type {v.type}"


def check_dominance(module: Operation) -> None:
    """Raise DominanceError (located at the use) for an operand whose definition does not
    dominate its use: an op result used before the op, inside the op's own regions, or outside
    the region that defines it; a block argument used outside its block. xDSL's verifier does not
    check this, and a use before its definition reached the backend lowering as a KeyError.
    Regions of several blocks (a CFG, which Legato's dialects do not use) are not checked."""
    index: dict[Block, dict[Operation, int]] = {}

    def position(block: Block, op: Operation) -> int:
        if block not in index:
            index[block] = {o: i for i, o in enumerate(block.ops)}
        return index[block][op]

    for use in module.walk():
        for k, v in enumerate(use.operands):
            if isinstance(v, OpResult):
                d = v.op
                block = d.parent_block()
                if block is None or (block.parent is not None and len(block.parent.blocks) > 1):
                    continue
                a = use
                while a is not None and a.parent_block() is not block:
                    a = a.parent_op()
                if a is d:
                    why = f"is used inside the regions of {d.name}, which defines it"
                elif a is None:
                    why = f"is defined by {d.name} in a region that does not enclose the use"
                elif position(block, a) < position(block, d):
                    why = f"is used before its definition by {d.name}"
                else:
                    continue
                at = source_location(d)
                raise DominanceError(
                    f"{source_location(use) or '<unknown>'}: error: {use.name}: operand {k} "
                    f"({_value_name(v)}) {why}" + (f" (defined at {at})" if at else "")
                )
            if isinstance(v, BlockArgument):
                a = use
                while a is not None and a.parent_block() is not v.block:
                    a = a.parent_op()
                if a is None:
                    raise DominanceError(
                        f"{source_location(use) or '<unknown>'}: error: {use.name}: operand {k} "
                        f"({_value_name(v)}) is an argument of a block that does not enclose the use"
                    )


def verify_with_locations(module: Operation) -> None:
    """Verify `module` innermost op first; an error of an op with a file location (its own or
    its nearest ancestor's) is re-raised as `file:line:col: error: message` followed by xDSL's
    annotated IR. Then check SSA dominance (`check_dominance`)."""
    _verify_ops(module)
    check_dominance(module)


def _verify_ops(module: Operation, after: str | None = None) -> None:
    """Verify `module` op by op, innermost first; the first failure is raised as a diagnostic
    located at its op (`located_verify_error`)."""
    for op in module.walk(region_first=True):
        try:
            op.verify(verify_nested_ops=False)
        except DiagnosticException as e:
            raise located_verify_error(op, e, after) from None


def located_verify_error(
    op: Operation, e: DiagnosticException, after: str | None = None
) -> DiagnosticException:
    """`file:line:col: error: message` for a verifier error `e` raised verifying `op` (or the
    op the error names: a kernel-wide check's `e.op`), with one note showing the op (its
    first line, as mlir-opt's `see current operation`), never xDSL's dump of the whole module.
    `after`: the pass whose output failed (the input verified)."""
    at = getattr(e, "op", None) or op
    text = str(e).strip() or "verification failed"
    if text.startswith(_ISOLATED):  # xDSL's message prints the whole offending op
        at, text = _isolated_use(e, at)
    where = source_location(at) or _first_nested_location(at) or "<unknown>"
    head, _, rest = text.partition("\n")
    if rest.count("\n") >= 4:  # an op printed into the message: its first line is enough
        rest = ""
    located = type(e)(f"{where}: error: {head}" + (f"\n{rest}" if rest else ""))
    if after is not None:
        located.add_note(
            f"note: the input verified, but the IR pass '{after}' produced does not: a bug in "
            "Legato (or a check the input's verifier lacks); please report it"
        )
    located.add_note(f"note: see current operation: {_op_line(at)}")
    return located


_ISOLATED = "Operation using value defined out of its IsolatedFromAbove parent"


def _isolated_use(e: BaseException, isolated: Operation) -> tuple[Operation, str]:
    """The op that uses a value from outside the isolated-from-above op `isolated` (xDSL's
    trait check holds it in `child_op`, the value in `operand`), and what to say about it."""
    user = value = None
    tb = e.__traceback__
    while tb is not None:
        local = tb.tb_frame.f_locals
        if isinstance(local.get("child_op"), Operation):
            user, value = local["child_op"], local.get("operand")
        tb = tb.tb_next
    if user is None:
        return isolated, f"{_ISOLATED} {isolated.name}"
    what = _value_name(value) if value is not None else "a value"
    return user, (
        f"{user.name} uses {what}, which is defined outside the {isolated.name} it is in "
        f"({isolated.name} is isolated from above: nothing inside it may use a value from "
        "outside it)"
    )


def late_verify_error(module: Operation, e: DiagnosticException, after: str) -> Exception:
    """The located diagnostic of a verifier error `e` that `module.verify()` raised after pass
    `after` (`located_verify_error` at `diagnostics.verify_error_op`)."""
    op, err = verify_error_op(module, e)
    return located_verify_error(op, err, after)


def _op_line(op: Operation) -> str:
    """The first line of `op` as printed (up to its first region), at most 200 characters."""
    try:
        lines = str(op).strip().splitlines()
    except Exception:  # noqa: BLE001 - printing a half-rewritten op may fail
        return op.name
    text = lines[0].strip() if lines else op.name
    return text if len(text) <= 200 else text[:197] + "..."


def _first_nested_location(op: Operation) -> str | None:
    """The location of the first op inside `op` that has one (for an error of an op that has
    none itself, such as the implicit module's `Redefinition of symbol`)."""
    for inner in op.walk():
        if inner is not op:
            where = source_location(inner)
            if where is not None:
                return where
    return None


def _operation_of(e: BaseException) -> Operation | None:
    """The op an exception is about: its `op` (a pass's `error_at`), else the innermost
    traceback frame's `op` local."""
    op = getattr(e, "op", None)
    if isinstance(op, Operation):
        return op
    found = None
    tb = e.__traceback__
    while tb is not None:
        local = tb.tb_frame.f_locals.get("op")
        if isinstance(local, Operation):
            found = local
        tb = tb.tb_next
    return found


def located_message(e: BaseException, tool) -> str:
    """`str(e)`, prefixed with `file:line:col: ` of the op it is about when its text does not
    start with a location (else with the input's name: every diagnostic says where)."""
    text = str(e)
    first = text.lstrip().splitlines()[0] if text.strip() else ""
    if _AT_LINE.match(first):
        return text
    op = _operation_of(e)
    where = (source_location(op) or _first_nested_location(op)) if op is not None else None
    body = text.removeprefix("error: ")
    return f"{where or _chunk_location(tool)}: error: {body}"


def _chunk_location(tool) -> str:
    """`file:line:1` of the input chunk being processed (the whole input's first line when it
    is not split), else the input's name (an error before any input was read)."""
    return getattr(tool, "chunk_location", None) or _input_name(tool)


def source_location(op: Operation | None) -> str | None:
    """`file:line:col` of `op` or of its nearest ancestor with a file location: its own
    `loc("file":line:col)`, else where legato-opt parsed it."""
    while op is not None:
        loc = op.location
        if isinstance(loc, FileLineColLoc):
            return f"{loc.filename.data}:{loc.line.data}:{loc.column.data}"
        if op in _PARSED_AT:
            return _PARSED_AT[op]
        op = op.parent_op()
    return None


def main(args: Sequence[str] | None = None) -> int:
    """Run legato-opt; returns (and exits with) the status: 0 on success, 1 on an error in the
    input, the pipeline or a pass (a diagnostic on stderr, never a traceback), 2 on a usage
    error (unknown option or target name: argparse's message)."""
    tool = None
    try:
        tool = LegatoOptMain(args=args)
        tool.run()
    except DiagnosticsMismatch as e:
        sys.stdout.flush()
        print(str(e), file=sys.stderr)
        sys.exit(1)
    except (
        ParseError,
        DiagnosticException,
        PassFailedException,
        LegatoError,
        ArgSpecParseError,
    ) as e:
        sys.stdout.flush()
        # a pass's error about an op without a `loc`: located where legato-opt parsed it
        text = str(e) if isinstance(e, ParseError) else located_message(e, tool)
        print(text, file=sys.stderr)
        for note in getattr(e, "__notes__", ()):
            print(note, file=sys.stderr)
        sys.exit(1)
    except OSError as e:
        sys.stdout.flush()
        print(f"legato-opt: error: {e}", file=sys.stderr)
        sys.exit(1)
    except ValueError as e:  # an op a target cannot emit (a register not allocated, ...)
        sys.stdout.flush()
        op = _operation_of(e)
        print(
            located_message(e, tool) if op is not None else f"legato-opt: error: {e}",
            file=sys.stderr,
        )
        sys.exit(1)
    except RecursionError:
        sys.stdout.flush()
        print(f"{_input_name(tool)}: error: input nested too deeply", file=sys.stderr)
        sys.exit(1)
    except Exception as e:  # noqa: BLE001 - a bug in a pass, target or parser hook
        sys.stdout.flush()
        print(internal_error_message(e, tool), file=sys.stderr)
        sys.exit(1)
    return 0


def _input_name(tool: LegatoOptMain | None) -> str:
    name = getattr(getattr(tool, "args", None), "input_file", None)
    return name or "<stdin>"


def internal_error_message(e: BaseException, tool: LegatoOptMain | None) -> str:
    """`LOC: error: internal error in STAGE: Type: message` for an exception no diagnostic
    covers. LOC is the source location of the op the failing code was working on (the
    innermost traceback frame with an `op` local), else the input file."""
    last_op = None
    tb = e.__traceback__
    while tb is not None:
        op = tb.tb_frame.f_locals.get("op")
        if isinstance(op, Operation):
            last_op = op
        tb = tb.tb_next
    where = source_location(last_op) if last_op is not None else None
    stage = tool.stage if tool is not None else "startup"
    text = (
        f"{where or _input_name(tool)}: error: internal error in {stage}: {type(e).__name__}: {e}"
    )
    if where is None and last_op is not None:
        try:
            text += "\n  at: " + str(last_op).splitlines()[0][:200]
        except Exception:  # noqa: BLE001 - printing a half-rewritten op may fail too
            text += f"\n  at: an op {last_op.name}"
    return text + "\nnote: this is a bug in Legato, not in the input; please report it"


if __name__ == "__main__":
    main()
