"""What the machine model raises. A `Trap` is a fault of the running instruction: the emulator
turns it into an `EmulatorFault` naming the module, program and PC; the interpreters into an
`InterpError` at the IR op. Its `cause` is the emulator's wording; the fields let another
front end word it its own way."""

from __future__ import annotations


class Trap(Exception):
    """The running instruction faulted for `cause` (at `address`, when one is involved)."""

    def __init__(self, cause: str, address: int | None = None):
        super().__init__(cause)
        self.cause, self.address = cause, address


class AccessFault(Trap):
    """An access of `nbytes` at `address` outside memory: outside every region (`region` is
    None), running past the end of `region`, or of a negative size."""

    def __init__(self, cause: str, address: int, nbytes: int, region=None):
        super().__init__(cause, address)
        self.nbytes, self.region = nbytes, region


class MapError(Exception):
    """A region could not be mapped: it overlaps `existing`, or shared DRAM is exhausted
    (`existing` is None)."""

    def __init__(self, message: str, name: str, base: int, existing=None):
        super().__init__(message)
        self.name, self.base, self.existing = name, base, existing
