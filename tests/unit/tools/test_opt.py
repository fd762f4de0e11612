"""`legato-opt` on malformed input: a diagnostic with a location, exit status 1 (2 for a usage
error), never a Python traceback."""

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from opt_helpers import run_opt
from xdsl.passes import ModulePass

from legato.transforms import registry

ROOT = Path(__file__).resolve().parents[3]
KERNEL = """\
legato.kernel @k(%a : !legato.tensor<[4], f32, shared_dram>) {
  legato.on core(0) {
    %x = legato.receive %a queue 0 memory sram : !legato.tensor<[4], f32, shared_dram> -> !legato.tensor<[4], f32, sram>
    %e = legato.exp %x : !legato.tensor<[4], f32, sram>
    legato.yield
  }
  legato.return
}
"""


@pytest.fixture
def write(tmp_path):
    def write(text, name="in.mlir"):
        path = tmp_path / name
        path.write_bytes(text if isinstance(text, bytes) else text.encode())
        return path

    return write


def refused(status, out, err, status_expected=1):
    assert status == status_expected, (status, out, err)
    assert "Traceback" not in out + err
    return err


def test_valid_input_still_works(write):
    status, out, err = run_opt(write(KERNEL))
    assert status == 0 and err == "" and "legato.exp" in out


@pytest.mark.parametrize(
    "text, expected",
    [
        # garbage
        (b"\x00\xff garbage {{{", ["in.mlir:1:2: error: the input is not UTF-8 text (byte 0xff)"]),
        ("}}} %% garbage", ["in.mlir:1:1"]),
        # truncated IR, at several places
        (KERNEL[: KERNEL.index("%e")], ["in.mlir:4:5", "in block definition"]),
        (KERNEL[: KERNEL.index("[4], f32, sram>") + 5], ["in.mlir:3:"]),
        (KERNEL[:-2], ["in.mlir:8:1", "in block definition"]),
        # an unterminated string running to the end of a long line (xDSL's lexer used to hang)
        (
            'builtin.module attributes {a = "' + "x" * 80 + " } : !core.buf<[4], f32, sram>\n",
            ["in.mlir:1:32", "End of file reached before closing string literal"],
        ),
        # unknown op, unknown type, unknown memory space
        (
            KERNEL.replace("legato.exp", "legato.frobnicate"),
            ["in.mlir:4:28", "Operation legato.frobnicate is not registered"],
        ),
        (
            KERNEL.replace("!legato.tensor<[4], f32, sram>", "!legato.tensr<[4], f32, sram>"),
            ["in.mlir:3:"],
        ),
        (KERNEL.replace("memory sram", "memory hbm"), ["in.mlir:3:", "hbm"]),
        # type errors: one value used with two types; an op whose verifier refuses the types
        (
            "func.func @f(%a : index, %b : i32) -> index {\n  %0 = arith.addi %a, %b : index\n"
            "  func.return %0 : index\n}\n",
            [
                "in.mlir:2:23",
                "operand is used with type index, but has been previously used or "
                "defined with type i32",
            ],
        ),
        (
            KERNEL.replace("[4], f32, sram", "[8], f32, sram"),
            [
                "in.mlir:3:5: error: legato.receive: result !legato.tensor<[8], f32, sram> must have the "
                "shape and element type of %like"
            ],
        ),
    ],
)
def test_malformed_input(write, text, expected):
    err = refused(*run_opt(write(text)))
    for fragment in expected:
        assert fragment in err


def test_errors_in_split_input_chunks_name_the_right_line(write):
    text = KERNEL + "\n// -----\n\n" + KERNEL.replace("legato.exp", "legato.nope")
    err = refused(*run_opt(write(text), "--split-input-file"))
    assert "in.mlir:15:22" in err and "legato.nope is not registered" in err


@pytest.mark.parametrize(
    "argv, status, expected",
    [
        (["-p", "no-such-pass"], 1, "Unrecognized passes: ['no-such-pass']"),
        (
            ["-p", "convert-legato-to-core{bogus=1}"],
            1,
            'Provided arguments ["bogus"] not found in expected arguments ["target"]',
        ),
        (["-p", "convert-legato-to-core{"], 1, "Expected argument name here"),
        (["-p", "convert-legato-to-core{target=no-such-chip}"], 1, "no-such-chip"),
        (
            ["-t", "no-such-target"],
            2,
            "legato-opt: error: argument -t/--target: invalid choice: 'no-such-target'",
        ),
        (["--no-such-flag"], 2, "legato-opt: error: unrecognized arguments: --no-such-flag"),
    ],
)
def test_invalid_passes_targets_and_options(write, argv, status, expected):
    path = write(KERNEL)
    err = refused(*run_opt(path, *argv), status_expected=status)
    assert expected in err


def test_missing_input_file(tmp_path):
    err = refused(*run_opt(tmp_path / "nope.mlir"))
    assert err.startswith("legato-opt: error:") and "nope.mlir" in err


def test_pass_errors_are_located(write):
    # convert-legato-to-core refuses a receive no request_load feeds: the error names the line
    # and column where the receive was parsed (ops without a `loc` get that location)
    path = write(KERNEL)
    err = refused(*run_opt(path, "-p", "convert-legato-to-core"))
    assert err.splitlines()[0] == (
        f"{path}:3:5: error: this receive on core(0) sram queue 0 has no matching request_load "
        "(0 sent, 1 received); it would wait forever"
    )
    assert err.splitlines()[1].strip().startswith("%x = legato.receive %a")  # the source line


@dataclass(frozen=True)
class ExplodingPass(ModulePass):
    """A pass with a bug: a KeyError while it looks at the legato.exp op."""

    name = "explode"

    def apply(self, ctx, op):
        for inner in op.walk():
            if inner.name == "legato.exp":
                self._look(inner)

    def _look(self, op):
        return {}[op.name]


def test_a_pass_that_raises_is_an_internal_error_with_a_location(write, monkeypatch):
    passes = registry.get_all_passes()
    monkeypatch.setattr(
        registry, "get_all_passes", lambda: {**passes, "explode": lambda: ExplodingPass}
    )
    err = refused(*run_opt(write(KERNEL), "-p", "explode"))
    assert err.splitlines()[0].endswith(
        "in.mlir:4:5: error: internal error in pass 'explode': KeyError: 'legato.exp'"
    )
    assert "this is a bug in Legato" in err
    # with a loc(...) on the op, that location is named instead
    located = KERNEL.replace(
        "!legato.tensor<[4], f32, sram>\n    legato.yield",
        '!legato.tensor<[4], f32, sram> loc("k.py":7:9)\n    legato.yield',
    )
    err = refused(*run_opt(write(located), "-p", "explode"))
    assert err.startswith("k.py:7:9: error: internal error in pass 'explode'")


def test_the_installed_command_never_prints_a_traceback(write):
    # one real subprocess: the console entry point behaves like main()
    path = write(KERNEL.replace("legato.exp", "legato.frobnicate"))
    r = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "legato-opt"), str(path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert "in.mlir:4:28" in r.stderr


# ---- SSA dominance and --verify-diagnostics (issue 17, item 7) -------------------------------

USE_BEFORE_DEF = """\
core.kernel @k args [#core.arg<0, [4], f32, shared_dram, read>] {
  core.program @core0 on core(0) {
    %c1 = arith.constant 1 : index
    %j = arith.addi %k, %c1 : index
    %k = arith.constant 4 : index
    core.end
  }
}
"""


@pytest.mark.parametrize("pipeline", [[], ["-p", "core-plan-memory,convert-core-to-backend"]])
def test_use_before_def_is_located_and_never_reaches_the_lowering(tmp_path, pipeline):
    src = tmp_path / "ubd.mlir"
    src.write_text(USE_BEFORE_DEF)
    status, out, err = run_opt(src, *pipeline)
    assert status == 1 and not out
    assert err.startswith(
        f"{src}:4:5: error: arith.addi: operand 0 (%k) is used before its definition by "
        f"arith.constant (defined at {src}:5:5)"
    ), err
    assert "internal error" not in err and "KeyError" not in err


def test_verify_diagnostics_passes_only_when_every_error_is_announced(tmp_path):
    src = tmp_path / "d.mlir"
    announced = USE_BEFORE_DEF.replace(
        "    %j =",
        "    // expected-error @+1 {{operand 0 (%k) is used before its definition}}\n    %j =",
    )
    src.write_text(announced)
    assert run_opt(src, "--verify-diagnostics")[0] == 0
    src.write_text(USE_BEFORE_DEF)  # unannounced
    status, _, err = run_opt(src, "--verify-diagnostics")
    assert status == 1 and f"{src}:4: error: unexpected error: {src}:4:5: error: arith.addi" in err
    src.write_text(announced.replace("%j = arith.addi %k", "%j = arith.addi %c1"))  # none made
    status, _, err = run_opt(src, "--verify-diagnostics")
    assert status == 1
    assert err.strip() == (
        f'{src}:4: error: expected error "operand 0 (%k) is used before its definition" on line 5 '
        "was not produced"
    )


def test_expectation_designators():
    from legato.tools.opt import expectations

    text = "\n".join(
        [
            "a",  # 1
            "// expected-error @below {{one}}",  # 2 -> 4 (skips the designator on 3)
            "// expected-error @above {{two}}",  # 3 -> 1 (skips the designator on 2)
            "b",  # 4
            "// expected-warning @-2 {{four}}",  # 5 -> 3
            "// expected-error@+1 {{five}}",  # 6 -> 7
            "c // expected-error {{six}}",  # 7 -> 7
        ]
    )
    got = [(e.kind, e.line, e.text) for e in expectations(text, offset=10)]
    assert got == [
        ("error", 14, "one"),
        ("error", 11, "two"),
        ("warning", 13, "four"),
        ("error", 17, "five"),
        ("error", 17, "six"),
    ]


UNPLANNED = """\
builtin.module {
  core.kernel @k args [] {
    core.program @core0 on core(0) {
      %0 = core.alloc sram : !core.buf<[16], f32, sram>
      core.end
    }
  }
}
"""


@pytest.mark.parametrize("argv", [["-p", "convert-core-to-backend"], ["-t", "asm"]])
def test_errors_about_ops_without_a_loc_name_their_input_line(tmp_path, argv):
    # These printed only the file name (issue 17 item 7: diagnostics without a location).
    path = tmp_path / "u.mlir"
    path.write_text(UNPLANNED)
    status, _, err = run_opt(path, *argv)
    assert status == 1
    assert err.startswith(f"{path}:4:7: error: core.alloc has no offset: run core-plan-memory"), err


# ---- verifier errors: located, never a dump of the module (issue 17, item 7) ----------------


@dataclass(frozen=True)
class BreakingPass(ModulePass):
    """A pass with a bug: it leaves the `legato.on` region without its `legato.yield`."""

    name = "break-yield"

    def apply(self, ctx, op):
        for inner in list(op.walk()):
            if inner.name == "legato.yield":
                inner.detach()
                inner.erase()


def test_a_verifier_failure_after_a_pass_is_located_and_names_the_pass(write, monkeypatch):
    passes = registry.get_all_passes()
    monkeypatch.setattr(
        registry, "get_all_passes", lambda: {**passes, "break-yield": lambda: BreakingPass}
    )
    path = write(KERNEL)
    err = refused(*run_opt(path, "-p", "break-yield"))
    lines = err.strip().splitlines()
    # located at the `legato.on` (line 2) whose region lost its terminator
    assert lines[0].startswith(f"{path}:2:3: error: "), err
    assert "the IR pass 'break-yield' produced does not" in err and "bug in Legato" in err
    assert lines[-1].startswith("note: see current operation: legato.on core(0)")
    assert len(lines) == 3 and "builtin.module" not in err and "legato.kernel" not in err


def test_an_input_verifier_error_shows_the_op_not_the_module(write):
    path = write(
        KERNEL.replace(
            "legato.on core(0)", "legato.on core(0) {\n    legato.return\n  }\n  legato.on core(0)"
        )
    )
    err = refused(*run_opt(path))
    lines = err.strip().splitlines()
    assert lines[0] == f"{path}:3:5: error: 'legato.return' expects parent op 'legato.kernel'"
    assert lines[1:] == ["note: see current operation: legato.return"], err


def test_a_check_made_while_parsing_an_op_is_located_at_it(write):
    # xDSL's scf.for parser checks its terminator (the mutant moved `core.end` into the loop)
    path = write(
        "core.kernel @k args [] {\n"
        "  core.program @core0 on core(0) {\n"
        "    %c0 = arith.constant 0 : index\n"
        "    %c1 = arith.constant 1 : index\n"
        "    scf.for %i = %c0 to %c1 step %c1 {\n"
        "      core.end\n"
        "    }\n"
        "  }\n"
        "}\n"
    )
    err = refused(*run_opt(path))
    assert err.strip() == (
        f"{path}:5:5: error: 'scf.for' terminates with operation core.end instead of scf.yield"
    )


def test_an_error_about_no_op_is_located_at_its_chunk(write):
    # `-t asm` of a chunk without a kernel: at the chunk's first line (as mlir-opt locates the
    # implicit module), not just the file
    chunk = "// expected-error {{the module holds no legato.kernel}}\nfunc.func @f() {\n  func.return\n}\n"
    path = write(chunk + "// -----\n" + chunk)
    status, _, err = run_opt(path, "--split-input-file", "--verify-diagnostics", "-t", "asm")
    assert status == 0, err
    err = refused(*run_opt(write(chunk.split("\n", 1)[1]), "-t", "asm"))
    assert err.startswith(f"{path}:1:1: error: the module holds no legato.kernel"), err
