"""Run `legato-opt` in-process (fast) and capture its status and output."""

import contextlib
import io
import signal

from legato.tools.opt import main


def run_opt(*argv, timeout: int = 20) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of `legato-opt ARGV`; a hang fails after `timeout` s."""
    out, err = io.StringIO(), io.StringIO()

    def hang(*_):
        raise TimeoutError(f"legato-opt {' '.join(map(str, argv))} did not finish in {timeout} s")

    old = signal.signal(signal.SIGALRM, hang)
    signal.alarm(timeout)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                status = main([str(a) for a in argv])
            except SystemExit as e:
                status = e.code
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    return status, out.getvalue(), err.getvalue()
