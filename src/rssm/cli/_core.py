"""The two places where the command line leans on the core's serialization:
`stepsize_from_spec` is `rssm.stepsizes.from_spec` (the one step-size parser) and
`result_to_dict` is `rssm.Result.to_dict` (the one Result writer)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = ["stepsize_from_spec", "result_to_dict", "json_value"]


def stepsize_from_spec(spec: Any):
    """A step-size rule from ``spec`` (`rssm.stepsizes.from_spec`, the one parser)."""
    from rssm.stepsizes import from_spec

    return from_spec(spec)


def json_value(value: Any) -> Any:
    """NaN becomes None, NumPy scalars and arrays become Python values."""
    if isinstance(value, np.ndarray):
        return [json_value(v) for v in value.tolist()]
    if isinstance(value, (list, tuple)):
        return [json_value(v) for v in value]
    if isinstance(value, dict):
        return {k: json_value(v) for k, v in value.items()}
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def result_to_dict(res) -> dict[str, Any]:
    """The run's settings and summary as flat JSON values (`rssm.Result.to_dict`; x and
    the trace are written apart)."""
    return res.to_dict()
