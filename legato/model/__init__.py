from legato.model.compute_model import ComputeModel, default_model

__all__ = ["ComputeModel", "default_model"]
