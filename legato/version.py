"""The package version (one place: the public `legato.__version__`, the ELF notes and the JIT
cache key read it)."""

__version__ = "0.1.0"
