"""The options of `torch.compile(backend="legato", options={...})`."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, fields
from pathlib import Path

from legato.errors import LegatoError
from legato.jit.session import OutputType, session
from legato.model.targets import target_names


@dataclass(frozen=True)
class Options:
    device: str = "bertha"  # "legato.device": a target name (legato.model.targets)
    # "legato.strict": fail fast (raise) where Legato would otherwise run something eagerly
    # because it cannot: a kernel that fails to compile or to run, an unbounded dynamic dim
    strict: bool = False
    # "legato.max_dynamic_dim": the bound assumed for a dynamic dim torch left unbounded
    # (torch.compile's automatic dynamic shapes); a call above it runs that partition eagerly.
    # None: no assumption, such dims follow `unbounded_dims`.
    max_dynamic_dim: int | None = 1024
    unbounded_dims: str = "extern"  # "legato.unbounded_dims": "extern" | "error"
    on_kernel_error: str = "extern"  # "legato.on_kernel_error": "extern" | "raise"
    output_type: str | None = None  # "legato.output_type": MLIR/CORE_IR/BACKEND_IR/ASM/BINARY
    output_path: str | None = None  # "legato.output_path": where output_type writes
    log_summary: bool = True  # "legato.log_summary": log the placement summary (INFO)
    min_ops: int = 1  # "legato.min_ops": smallest partition (compute nodes) made a kernel
    # "legato.fuse_chains": consecutive chip-scale kernels of a partition run as the phases of
    # one kernel while they fit one core's on-chip memory (False: one kernel per chip-scale node)
    fuse_chains: bool = True
    # "legato.fuse_pieces": in a chain, the row-local work computing a prefill projection's x
    # (a residual add + RMSNorm) runs as that projection's prologue on the row pieces each core
    # reads (False: a row phase of its own, x through shared DRAM and a barrier)
    fuse_pieces: bool = True

    @staticmethod
    def parse(options: dict | None) -> Options:
        options = dict(options or {})
        known = {f.name for f in fields(Options)}
        kwargs = {}
        for key, value in options.items():
            name = key[len("legato.") :] if key.startswith("legato.") else None
            if name not in known:
                raise LegatoError(
                    f"unknown torch.compile option {key!r} for backend 'legato'; known options: "
                    + ", ".join(f"legato.{n}" for n in sorted(known))
                )
            kwargs[name] = value
        if kwargs.get("strict"):
            # strict: every "cannot" raises, unless the user chose otherwise for one of them
            kwargs.setdefault("on_kernel_error", "raise")
            kwargs.setdefault("unbounded_dims", "error")
        opts = Options(**kwargs)
        if opts.device not in target_names():
            raise LegatoError(
                f"legato.device {opts.device!r} is not a Legato device; expected one of "
                + ", ".join(target_names())
            )
        if opts.max_dynamic_dim is not None and (
            isinstance(opts.max_dynamic_dim, bool)
            or not isinstance(opts.max_dynamic_dim, int)
            or opts.max_dynamic_dim < 1
        ):
            raise LegatoError(
                f"legato.max_dynamic_dim must be a positive int or None, got "
                f"{opts.max_dynamic_dim!r}"
            )
        if opts.unbounded_dims not in ("error", "extern"):
            raise LegatoError("legato.unbounded_dims must be 'error' or 'extern'")
        if opts.on_kernel_error not in ("raise", "extern"):
            raise LegatoError("legato.on_kernel_error must be 'raise' or 'extern'")
        if opts.output_type is not None:
            try:
                OutputType[str(opts.output_type).upper()]
            except KeyError:
                raise LegatoError(
                    f"legato.output_type {opts.output_type!r}; expected one of "
                    + ", ".join(t.name for t in OutputType)
                ) from None
        return opts

    def session(self):
        """The `legato.session` the kernels of this graph run in."""
        if self.output_type is None:
            return contextlib.nullcontext()
        return session(str(self.output_type).upper(), Path(self.output_path or "."))
