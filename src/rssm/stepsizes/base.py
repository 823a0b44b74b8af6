"""The step-size protocol: `StepSize` (a rule ``rule(k, ctx) -> gamma_k``) and
`StepStall` (raised by a rule that cannot go on)."""

from __future__ import annotations

import abc

from rssm.stepsizes.context import StepContext


class StepStall(ArithmeticError):
    """Raised by a step-size rule that cannot make progress from the current point (e.g.
    `Polyak` when f(X) <= f_star): the run ends with `rssm.stopping.StopReason.STALLED` and
    the exception's text as its message, at any iteration, the first included."""



class StepSize(abc.ABC):
    """Base class: subclasses implement ``__call__(k, ctx)`` returning gamma_k > 0.

    A rule with memory (the adaptive ones) clears it in `reset`, which the solver loop
    calls once before the first iteration, so one rule object can serve several runs.
    """

    @abc.abstractmethod
    def __call__(self, k: int, ctx: StepContext) -> float:
        """gamma_k."""

    def reset(self) -> None:
        """Forget what earlier runs taught the rule (no-op for plain schedules)."""
        return None

    def describe(self) -> dict:
        """Parameters as a plain dict (for result files)."""
        params = {k: v for k, v in vars(self).items() if not k.startswith("_")}
        return {"rule": type(self).__name__, **params}

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.describe().items() if k != "rule")
        return f"{type(self).__name__}({args})"


class _CallableStep(StepSize):
    def __init__(self, fn):
        self._fn = fn

    def __call__(self, k: int, ctx: StepContext) -> float:
        return self._fn(k, ctx)

    def describe(self) -> dict:
        # "callable" with the function's name beside it: a user's def geometric(k, ctx)
        # was recorded as {"rule": "geometric"}, the built-in's name without its parameters
        fn = self._fn
        out = {"rule": "callable"}
        inner = getattr(fn, "func", None)          # functools.partial: the function and
        if inner is not None and callable(inner):  # the arguments it was given
            out["function"] = _qualified(inner)
            if getattr(fn, "args", ()):
                out["args"] = repr(fn.args)
            if getattr(fn, "keywords", None):
                out["keywords"] = repr(fn.keywords)
        else:
            out["function"] = _qualified(fn)
        return out


def _qualified(fn) -> str:
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None)
    if name is None:
        return type(fn).__name__
    module = getattr(fn, "__module__", None)
    return f"{module}.{name}" if module else name
