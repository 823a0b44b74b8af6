"""Plain schedules: gamma_k from k and the run's settings alone (`PaperSchedule`,
`Geometric`, `Constant`, `InverseSqrt`).

Paper labels (``eq-...``, ``alg-...``) are those of the LaTeX source of A. Y.-M. Cheung,
J. Wang, M.-C. Yue, A. M.-C. So, "Randomized Submanifold Subgradient Method for
Optimization over Stiefel Manifolds", arXiv:2409.01770; here ``sect-exp`` = Section 5
(table: docs/paper-map.md).
"""

from __future__ import annotations

import math

import numpy as np

from rssm._validation import as_positive_float, check_bool
from rssm.stepsizes.base import StepSize
from rssm.stepsizes.context import StepContext

#: Largest exponent parameter ``a`` PaperSchedule accepts; the paper uses 2 and 4, and
#: binom(l, 2)^(a - 1) leaves float64 for a of a few hundred already at l = 10.
_MAX_A = 100.0
_LOG_MAX = math.log(np.finfo(np.float64).max)


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
        """Delta_k for iteration k.

        Parameters
        ----------
        k : int
            The iteration, >= 0.
        ctx : StepContext
            The run's context; ``method`` and ``n_blocks`` (l) are read.

        Returns
        -------
        float
            Delta * binom(l, 2)^(a rho^k - 1) for RSSM with ``a`` and ``rho`` given, else
            Delta.

        Raises
        ------
        ValueError
            When Delta_k overflows float64.
        """
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
    restart : bool
        Start the schedule again, from ``mu0`` with beta <- sqrt(beta), each time the
        solver loop finds the steps frozen (``StepContext.escapes``: the iterates settled
        where the subgradients do not cancel; with ``tol=0`` there is no such check). A
        decay that is too fast for the problem freezes X short of a stationary point; a
        slower one from the start reaches it (default False: the plain schedule). What
        sparse PCA's default rule uses (`rssm.problems.SparsePCA.default_stepsize`).
    """

    def __init__(self, mu0: float, beta: float, restart: bool = False):
        self.mu0 = as_positive_float(mu0, "mu0")
        self.beta = as_positive_float(beta, "beta", upper=1.0)
        check_bool(restart, "restart")
        self.restart = bool(restart)
        self.reset()

    def reset(self) -> None:
        self._beta = self.beta
        self._k0 = 0
        self._escapes = 0

    def __call__(self, k: int, ctx: StepContext) -> float:
        if self.restart and ctx.escapes != self._escapes:
            self._escapes = ctx.escapes
            self._beta = math.sqrt(self._beta)
            self._k0 = k
        return self.mu0 * self._beta ** ((k - self._k0) / ctx.epoch)

    def describe(self) -> dict:
        out = {"rule": "Geometric", "mu0": self.mu0, "beta": self.beta}
        if self.restart:
            out["restart"] = True
        return out


class Constant(StepSize):
    """gamma_k = c.

    Parameters
    ----------
    c : float
        The step size, > 0.
    """

    def __init__(self, c: float):
        self.c = as_positive_float(c, "c")

    def __call__(self, k: int, ctx: StepContext) -> float:
        return self.c


class InverseSqrt(StepSize):
    """gamma_k = c / sqrt(k + 1).

    Parameters
    ----------
    c : float
        The first step size gamma_0, > 0.
    """

    def __init__(self, c: float):
        self.c = as_positive_float(c, "c")

    def __call__(self, k: int, ctx: StepContext) -> float:
        return self.c / math.sqrt(k + 1.0)
