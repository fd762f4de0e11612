from legato.model.compute_model import ComputeModel, default_model


def get_model() -> ComputeModel:
    """The target model of the kernel being compiled; `default_model()` outside a compilation.

    This is `legato.get_model()`: annotations evaluated at `def` time see the default model, and
    inside a kernel the frontend evaluates it statically to the kernel's target.
    """
    from legato.context import get_model as _get_model

    return _get_model()


__all__ = ["ComputeModel", "default_model", "get_model"]
