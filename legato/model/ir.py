"""The ComputeModel travels with the IR as the module attribute `legato.model`.

The compiler attaches it before the first pass, so every pass (and `legato-opt` on a written-out
`.mlir` file) reads the same chip parameters.
"""

from __future__ import annotations

from dataclasses import fields

from xdsl.dialects.builtin import (
    BoolAttr,
    DictionaryAttr,
    FloatAttr,
    IntegerAttr,
    ModuleOp,
    StringAttr,
    f64,
    i64,
)
from xdsl.ir import Attribute

from legato.model.compute_model import ComputeModel
from legato.model.targets import target_model, target_names

MODEL_ATTR = "legato.model"


def model_to_attr(model: ComputeModel) -> DictionaryAttr:
    entries: dict[str, Attribute] = {}
    for name, value in model.params().items():
        if isinstance(value, bool):
            entries[name] = BoolAttr.from_bool(value)
        elif isinstance(value, int):
            entries[name] = IntegerAttr(value, i64)
        elif isinstance(value, float):
            entries[name] = FloatAttr(value, f64)
        else:
            entries[name] = StringAttr(str(value))
    return DictionaryAttr(entries)


def model_from_attr(attr: DictionaryAttr) -> ComputeModel:
    kwargs = {}
    known = {f.name: f for f in fields(ComputeModel) if f.name != "extra"}
    for name, value in attr.data.items():
        if name not in known:
            raise ValueError(f"legato.model: unknown parameter '{name}'")
        if isinstance(value, IntegerAttr):
            v = value.value.data
            kwargs[name] = bool(v) if known[name].type in ("bool", bool) else v
        elif isinstance(value, FloatAttr):
            kwargs[name] = value.value.data
        elif isinstance(value, StringAttr):
            kwargs[name] = value.data
        else:
            raise ValueError(f"legato.model: parameter '{name}' has unsupported value {value}")
    missing = [n for n in ("name", "generation", "num_cores") if n not in kwargs]
    if missing:
        raise ValueError(f"legato.model lacks {', '.join(missing)}")
    return ComputeModel(**kwargs)


def attach_model(module: ModuleOp, model: ComputeModel) -> None:
    module.attributes[MODEL_ATTR] = model_to_attr(model)


def model_of(module: ModuleOp, target: str | None = None) -> ComputeModel:
    """The model attached to `module`; else the named target (`legato.model.targets`; default
    `bertha`, EVT0)."""
    attr = module.attributes.get(MODEL_ATTR)
    if isinstance(attr, DictionaryAttr):
        return model_from_attr(attr)
    model = target_model(target or "bertha")
    if model is None:
        raise ValueError(f"unknown target '{target}'; expected one of {', '.join(target_names())}")
    return model
