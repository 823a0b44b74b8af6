"""Step-size rules as small callables ``rule(k, context) -> gamma_k``.

``context`` is a `StepContext` telling the rule which method runs and with how many
blocks, so one rule object serves RSM and RSSM (the paper scales Delta_k with binom(l, 2)
for RSSM only).

Paper labels (``eq-...``, ``alg-...``) are those of the LaTeX source of A. Y.-M. Cheung,
J. Wang, M.-C. Yue, A. M.-C. So, "Randomized Submanifold Subgradient Method for
Optimization over Stiefel Manifolds", arXiv:2409.01770; here ``sect-exp`` = Section 5
(table: docs/paper-map.md).
"""

from __future__ import annotations

import abc
import math
from dataclasses import dataclass

import numpy as np

from rssm._validation import as_positive_float

#: Largest exponent parameter ``a`` PaperSchedule accepts; the paper uses 2 and 4, and
#: binom(l, 2)^(a - 1) leaves float64 for a of a few hundred already at l = 10.
_MAX_A = 100.0
_LOG_MAX = math.log(np.finfo(np.float64).max)

__all__ = ["StepContext", "StepSize", "PaperSchedule", "Geometric", "Constant", "InverseSqrt"]


@dataclass(frozen=True)
class StepContext:
    """What a step-size rule may depend on besides the iteration counter.

    Attributes
    ----------
    method : str
        ``"rssm"`` or ``"rsm"``.
    n_blocks : int
        Number of blocks l (1 for RSM, which updates all columns at once).
    """

    method: str
    n_blocks: int

    @property
    def epoch(self) -> float:
        """Iterations per epoch: l/2 for RSSM (each step moves ~2/l of the columns), 1 for RSM."""
        return self.n_blocks / 2.0 if self.method == "rssm" else 1.0


class StepSize(abc.ABC):
    """Base class: subclasses implement ``__call__(k, ctx)`` returning gamma_k > 0."""

    @abc.abstractmethod
    def __call__(self, k: int, ctx: StepContext) -> float:
        """gamma_k."""

    def describe(self) -> dict:
        """Parameters as a plain dict (for result files)."""
        params = {k: v for k, v in vars(self).items() if not k.startswith("_")}
        return {"rule": type(self).__name__, **params}

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.describe().items() if k != "rule")
        return f"{type(self).__name__}({args})"


class PaperSchedule(StepSize):
    """The schedule of Section ``sect-exp``: gamma_k = Delta_k / (sqrt(k+2) log(k+2)).

    For RSSM with ``a`` and ``rho`` given, Delta_k = Delta * binom(l, 2)^(a rho^k - 1),
    which starts large (Delta binom(l,2)^(a-1)) and decays to Delta / binom(l, 2). For RSM,
    or when ``a`` is None, Delta_k = Delta.

    Parameters
    ----------
    delta : float
        Delta > 0.
    a, rho : float, optional
        Exponent parameters; ``rho`` in (0, 1]. Both or neither.

    Notes
    -----
    Paper values: DPCP Delta=0.9, a=2, rho=0.991 (`PaperSchedule.dpcp`); ODL Delta=1e-3,
    a=4, rho=0.995 (`PaperSchedule.odl`).
    """

    def __init__(self, delta: float, a: float | None = None, rho: float | None = None):
        self.delta = as_positive_float(delta, "delta")
        if (a is None) != (rho is None):
            raise ValueError("PaperSchedule needs both a and rho, or neither")
        self.a = None if a is None else as_positive_float(a, "a", allow_zero=True, upper=_MAX_A)
        self.rho = None if rho is None else as_positive_float(rho, "rho", upper=1.0)

    @classmethod
    def dpcp(cls) -> PaperSchedule:
        """Paper's DPCP schedule (Section 5.1): Delta=0.9, a=2, rho=0.991."""
        return cls(0.9, 2.0, 0.991)

    @classmethod
    def odl(cls) -> PaperSchedule:
        """Paper's ODL schedule (Section 5.2): Delta=1e-3, a=4, rho=0.995."""
        return cls(1e-3, 4.0, 0.995)

    def delta_k(self, k: int, ctx: StepContext) -> float:
        """Delta_k for iteration k."""
        if ctx.method != "rssm" or self.a is None:
            return self.delta
        pairs = ctx.n_blocks * (ctx.n_blocks - 1) / 2.0
        log_delta = math.log(self.delta) + (self.a * self.rho**k - 1.0) * math.log(pairs)
        if log_delta > _LOG_MAX:
            raise ValueError(
                f"stepsize {self!r}: Delta_{k} = delta * binom(l, 2)^(a rho^k - 1) overflows "
                f"float64 at l={ctx.n_blocks}; choose a smaller delta or a (the paper uses a=2, 4)"
            )
        return math.exp(log_delta)

    def __call__(self, k: int, ctx: StepContext) -> float:
        return self.delta_k(k, ctx) / (math.sqrt(k + 2.0) * math.log(k + 2.0))


class Geometric(StepSize):
    """gamma_k = mu0 * beta^(k / epoch), an epoch being l/2 RSSM iterations or 1 RSM iteration.

    Parameters
    ----------
    mu0 : float
        Initial step, > 0.
    beta : float
        Decay factor per epoch, in (0, 1].
    """

    def __init__(self, mu0: float, beta: float):
        self.mu0 = as_positive_float(mu0, "mu0")
        self.beta = as_positive_float(beta, "beta", upper=1.0)

    def __call__(self, k: int, ctx: StepContext) -> float:
        return self.mu0 * self.beta ** (k / ctx.epoch)


class Constant(StepSize):
    """gamma_k = c."""

    def __init__(self, c: float):
        self.c = as_positive_float(c, "c")

    def __call__(self, k: int, ctx: StepContext) -> float:
        return self.c


class InverseSqrt(StepSize):
    """gamma_k = c / sqrt(k + 1)."""

    def __init__(self, c: float):
        self.c = as_positive_float(c, "c")

    def __call__(self, k: int, ctx: StepContext) -> float:
        return self.c / math.sqrt(k + 1.0)


def as_stepsize(value, name: str = "stepsize") -> StepSize:
    """Accept a `StepSize`, a callable ``(k, ctx) -> float``, or a positive number (constant)."""
    if isinstance(value, StepSize):
        return value
    if isinstance(value, bool):
        raise TypeError(
            f"{name} must be a StepSize, a callable (k, ctx) -> float, or a positive number"
        )
    if isinstance(value, (int, float)):
        return Constant(value)
    if callable(value):
        return _CallableStep(value)
    raise TypeError(
        f"{name} must be a StepSize, a callable (k, ctx) -> float, or a positive number, "
        f"got {type(value).__name__}"
    )


class _CallableStep(StepSize):
    def __init__(self, fn):
        self._fn = fn

    def __call__(self, k: int, ctx: StepContext) -> float:
        return self._fn(k, ctx)

    def describe(self) -> dict:
        return {"rule": getattr(self._fn, "__name__", "callable")}
