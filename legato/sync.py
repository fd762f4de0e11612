"""`legato.sync`: synchronization between execution contexts (barriers, semaphores).

Like `legato.tensor`, these names only have a meaning inside a `@legato.compile` kernel.
"""

from __future__ import annotations

from legato.errors import LegatoError


def _op(name: str, doc: str):
    def stub(*args, **kwargs):
        raise LegatoError(
            f"legato.sync.{name} only exists inside a @legato.compile kernel; "
            "it cannot be called from Python"
        )

    stub.__name__ = name
    stub.__qualname__ = name
    stub.__module__ = __name__
    stub.__doc__ = doc
    stub._legato_op = f"sync.{name}"
    return stub


barrier = _op(
    "barrier",
    "barrier(): every core of a `with device.get_all_cores():` region waits until all cores "
    "arrived (each core's earlier memcpys have completed)",
)
signal = _op(
    "signal",
    "signal(target, sem=0, count=1): add `count` to semaphore `sem` of context `target` "
    "(device.get_top() or device.get_core(i)), after this context's earlier memcpys completed",
)
wait = _op(
    "wait",
    "wait(sem=0, count=1): block until semaphore `sem` of the running context (top or one "
    "core) reaches `count`, then subtract `count`",
)

__all__ = ["barrier", "signal", "wait"]
