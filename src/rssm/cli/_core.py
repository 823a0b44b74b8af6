"""The two places where the command line leans on the core's serialization.

`stepsize_from_spec` turns a step-size spec into a rule and `result_to_dict` turns a
`rssm.Result` into plain JSON values. Everything in `rssm.cli` goes through these two
functions, so that when the core provides ``rssm.stepsizes.from_spec`` and
``Result.to_dict()`` (issue 20, item 2: one spec parser, one Result writer), each body
becomes one line.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = ["stepsize_from_spec", "result_to_dict", "json_value"]


def stepsize_from_spec(spec: Any):
    """A step-size rule from ``spec``: ``"auto"``, a `rssm.stepsizes.StepSize` (as is), or
    a dict ``{"rule": "paper" | "geometric" | "constant" | "invsqrt", <parameters>}``
    (``paper``: delta, a, rho; ``geometric``: mu0, beta; ``constant``, ``invsqrt``: c).

    To become ``return rssm.stepsizes.from_spec(spec)``.
    """
    from rssm.stepsizes import (
        Constant,
        Geometric,
        InverseSqrt,
        PaperSchedule,
        StepSize,
        make_auto,
    )

    if isinstance(spec, StepSize):
        return spec
    if spec == "auto":
        return make_auto()
    params = {k: v for k, v in spec.items() if k != "rule"}
    rule = spec["rule"]
    if rule == "paper":
        return PaperSchedule(params["delta"], params.get("a"), params.get("rho"))
    if rule == "geometric":
        return Geometric(params["mu0"], params["beta"])
    if rule == "constant":
        return Constant(params["c"])
    if rule == "invsqrt":
        return InverseSqrt(params["c"])
    raise ValueError(f"step-size rule must be auto, paper, geometric, constant or invsqrt, "
                     f"got {rule!r}")


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
