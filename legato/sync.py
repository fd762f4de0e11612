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


barrier = _op("barrier", "barrier(): every core of an all_cores region waits for the others")
signal = _op("signal", "signal(ctx, semaphore=0): increment a semaphore of another context")
wait = _op("wait", "wait(semaphore=0, count=1): block until the semaphore reaches count")

__all__ = ["barrier", "signal", "wait"]
