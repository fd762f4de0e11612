"""The built-in op library: ATen ops implemented as Legato functions, with their resolvers.

`aten` is imported by `legato.torch.registry.load_libraries()`; third-party libraries register
the same way through the `legato-library` entry point group.
"""
