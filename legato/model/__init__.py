"""Target models: `ComputeModel` (every chip parameter), the Bertha generations (`bertha`) and the
one registry of target names (`targets`). `legato.get_model()` is `legato.context.get_model`."""

from legato.model.compute_model import ComputeModel, default_model

__all__ = ["ComputeModel", "default_model"]
