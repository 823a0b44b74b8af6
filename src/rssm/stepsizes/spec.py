"""Step-size specs: `from_spec`, the one parser of what ``stepsize=`` may be (the API, the
CLI and the experiments), and `as_stepsize`, its older, narrower form."""

from __future__ import annotations

import inspect
import math
import numbers
from typing import Any

import numpy as np

from rssm._validation import InvalidType
from rssm.stepsizes.adaptive import AdaptiveGeometric, Backtracking
from rssm.stepsizes.auto import Auto
from rssm.stepsizes.base import StepSize, _CallableStep
from rssm.stepsizes.blockrule import BlockRule
from rssm.stepsizes.polyak import Polyak, PolyakBest, PolyakLevel
from rssm.stepsizes.schedules import Constant, Geometric, InverseSqrt, PaperSchedule

#: Spec name -> rule class. A name matches case-insensitively and with or without
#: underscores, and the class name (what `StepSize.describe` writes) matches too.
RULES: dict[str, type[StepSize]] = {
    "auto": Auto,
    "paper": PaperSchedule,
    "geometric": Geometric,
    "constant": Constant,
    "inverse_sqrt": InverseSqrt,
    "polyak": Polyak,
    "polyak_level": PolyakLevel,
    "polyak_best": PolyakBest,
    "adaptive_geometric": AdaptiveGeometric,
    "backtracking": Backtracking,
    "block_rule": BlockRule,
}

#: Other spellings accepted (the CLI's ``invsqrt``).
_ALIASES = {"invsqrt": "inverse_sqrt"}


def _key(name: str) -> str:
    return name.strip().lower().replace("_", "").replace("-", "")


def _lookup() -> dict[str, str]:
    table = {}
    for name, cls in RULES.items():
        table[_key(name)] = name
        table[_key(cls.__name__)] = name
    for alias, name in _ALIASES.items():
        table[_key(alias)] = name
    return table


def _allowed() -> str:
    return ", ".join(RULES)


def rule_parameters(name: str) -> list[str]:
    """The parameters rule ``name`` (a `RULES` key) takes, in order."""
    sig = inspect.signature(RULES[name].__init__)
    return [p for p in sig.parameters if p != "self"]


def _value(text: str) -> Any:
    """A parameter value of a string spec: int, float, None, True/False, else the text."""
    t = text.strip()
    low = t.lower()
    if low == "none":
        return None
    if low in ("true", "false"):
        return low == "true"
    for conv in (int, float):
        try:
            return conv(t)
        except ValueError:
            pass
    return t


def _parse_string(spec: str) -> tuple[str, dict]:
    name, sep, rest = spec.partition(":")
    params: dict[str, Any] = {}
    if sep and rest.strip():
        for item in rest.split(","):
            key, eq, val = item.partition("=")
            if not eq or not key.strip() or "=" in val:
                raise ValueError(
                    f"step-size spec {spec!r}: parameters must be written name=value, "
                    f"separated by commas (e.g. 'geometric:mu0=0.1,beta=0.9'), got {item!r}"
                )
            if key.strip() in params:
                raise ValueError(
                    f"step-size spec {spec!r}: parameter {key.strip()!r} is given twice; "
                    "give each parameter once"
                )
            params[key.strip()] = _value(val)
    return name, params


def _build(name_in: Any, params: dict, base: StepSize | None) -> StepSize:
    if not isinstance(name_in, str):
        raise TypeError(
            f"step-size spec: 'rule' must be a name (one of {_allowed()}), got {name_in!r}"
        )
    name = _lookup().get(_key(name_in))
    if name is None and name_in == "callable":
        raise ValueError("step-size rule 'callable': the record of a function step size "
                         "(Result.stepsize of stepsize=f) names it but cannot rebuild it; "
                         "pass the function itself")
    if name is None:
        raise ValueError(f"unknown step-size rule {name_in!r}; allowed: {_allowed()}")
    cls = RULES[name]
    allowed = rule_parameters(name)
    unknown = [k for k in params if k not in allowed]
    if unknown:
        takes = ", ".join(allowed) if allowed else "no parameters"
        raise ValueError(
            f"step-size rule {name!r} takes {takes}; got unknown parameter(s) "
            f"{', '.join(map(repr, unknown))}"
        )
    kwargs = dict(params)
    if base is not None and type(base) is cls:
        for k, v in base.describe().items():
            if k in allowed and k not in kwargs:
                kwargs[k] = v
    sig = inspect.signature(cls.__init__)
    for k in allowed:
        # a required parameter (a number in every rule) given as text that is no number
        # is named before a missing one ("geometric:mu0=abc" said "needs beta")
        if (isinstance(params.get(k), str)
                and sig.parameters[k].default is inspect.Parameter.empty):
            raise InvalidType(k, f"step-size rule {name!r}: {k} must be a real number, "
                              f"got {params[k]!r} (str)")
    missing = [k for k in allowed if k not in kwargs
               and sig.parameters[k].default is inspect.Parameter.empty]
    if missing:
        raise ValueError(
            f"step-size rule {name!r} needs {', '.join(missing)} (parameters: "
            f"{', '.join(allowed)})"
        )
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as exc:
        msg = f"step-size rule {name!r}: {exc}"
        arg = getattr(exc, "argument", None)    # rssm._validation's errors name it
        raise (type(exc)(arg, msg) if arg is not None else type(exc)(msg)) from None


def _check_callable(fn: Any) -> None:
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):  # some builtins have no signature: call them as is
        return
    try:
        sig.bind(0, None)
    except TypeError:
        raise TypeError(
            f"stepsize must be called as stepsize(k, ctx) (iteration k and a "
            f"rssm.stepsizes.StepContext), but {getattr(fn, '__name__', 'it')}"
            f"{sig} does not accept two positional arguments"
        ) from None


def from_spec(spec: Any, *, base: StepSize | None = None) -> StepSize:
    """The step-size rule a spec stands for.

    Parameters
    ----------
    spec : StepSize, real number, callable, str or dict
        * a `StepSize`: returned as is;
        * a real number c > 0 (NumPy scalars included, bool not): ``Constant(c)``;
        * a callable ``(k, ctx) -> gamma_k``: wrapped as a `StepSize`;
        * ``"auto"``: a fresh `Auto`, the default rule;
        * a dict ``{"rule": "geometric", "mu0": 0.1, "beta": 0.9}``: the rule of that
          name (`RULES`: auto, paper, geometric, constant, inverse_sqrt, polyak,
          polyak_level, polyak_best, adaptive_geometric, backtracking, block_rule; case and
          underscores do not matter, and class names such as ``"Geometric"`` work too)
          with those parameters. `StepSize.describe` writes this form, so
          ``from_spec(rule.describe())`` rebuilds ``rule``;
        * the same as a string, ``"geometric:mu0=0.1,beta=0.9"`` (values are read as
          int, float, None, True/False, or else kept as text).
    base : StepSize, optional
        Parameters a name or dict spec leaves out are taken from ``base`` when it is a
        rule of the same class (the CLI fills ``--stepsize paper`` from the problem's
        reference schedule this way).

    Returns
    -------
    StepSize

    Raises
    ------
    TypeError
        For a spec of another kind (None included).
    ValueError
        For an unknown rule or parameter, a missing parameter or a bad value; the
        message names what is allowed.
    """
    if isinstance(spec, StepSize):
        return spec
    if isinstance(spec, (bool, np.bool_)):
        raise TypeError(f"stepsize must not be a bool, got {spec!r}; {_KINDS}")
    if isinstance(spec, (numbers.Real, np.integer, np.floating)):
        value = float(spec)
        if not (math.isfinite(value) and value > 0):
            raise ValueError(f"a constant step size must be a finite number > 0, got {spec!r}")
        return Constant(value)
    if isinstance(spec, str):
        name, params = _parse_string(spec)
        return _build(name, params, base)
    if isinstance(spec, dict):
        if "rule" not in spec:
            raise ValueError(
                f"a step-size dict needs a 'rule' key (one of {_allowed()}), got keys "
                f"{sorted(map(str, spec))}"
            )
        params = {k: v for k, v in spec.items() if k != "rule"}
        return _build(spec["rule"], params, base)
    if isinstance(spec, type) and issubclass(spec, StepSize):
        raise TypeError(f"stepsize must be a rule, not its class: pass {spec.__name__}(...), "
                        f"got the class {spec.__name__}")
    if callable(spec):
        _check_callable(spec)
        return _CallableStep(spec)
    raise TypeError(f"stepsize must be {_KINDS}, got {type(spec).__name__}")


_KINDS = ("a StepSize, a number > 0, a callable (k, ctx) -> float, 'auto', a rule name "
          "such as 'geometric:mu0=0.1,beta=0.9' or a dict {'rule': ..., ...}")


def as_stepsize(value, name: str = "stepsize") -> StepSize:
    """`from_spec` for an argument called ``name`` (a custom problem's ``stepsize=``, the
    PyTorch optimizer's ``lr``): the same specs as ``rssm.minimize(stepsize=...)``
    accepts (NumPy scalars and spec strings included; they were refused here), with
    messages that name the argument (``Problem.from_functions(stepsize=-1)`` said "c must
    be > 0").

    Parameters
    ----------
    value : StepSize, float, callable, str or dict
        A step-size spec, as `from_spec` takes it: a `StepSize`, a number > 0, a
        callable ``(k, ctx) -> float``, ``"auto"``, a rule string such as
        ``"geometric:mu0=0.1,beta=0.9"``, or a dict ``{"rule": ..., ...}``.
    name : str
        The argument's name, used in error messages.

    Returns
    -------
    StepSize
        The rule the spec stands for.

    Raises
    ------
    TypeError, ValueError
        When ``value`` is not a valid spec; the message names ``name``.
    """
    try:
        return from_spec(value)
    except (TypeError, ValueError) as exc:
        text = str(exc)
        if text.startswith("stepsize"):
            text = name + text[len("stepsize"):]
        elif not text.startswith(name):
            text = f"{name}: {text}"
        raise type(exc)(text) from None
