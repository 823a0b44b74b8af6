"""Tuning-free rules that set a step *length* and adapt it: `AdaptiveGeometric` (shrink
when progress stalls) and `Backtracking` (Armijo trials on every iteration).

Paper labels (``eq-...``, ``lem-...``) are those of the LaTeX source of A. Y.-M. Cheung,
J. Wang, M.-C. Yue, A. M.-C. So, "Randomized Submanifold Subgradient Method for
Optimization over Stiefel Manifolds", arXiv:2409.01770 (table: docs/paper-map.md).
"""

from __future__ import annotations

import math

from rssm._validation import as_int, as_positive_float
from rssm.stepsizes._common import _Adaptive, capped, check_t0, first_length
from rssm.stepsizes.context import StepContext


class AdaptiveGeometric(_Adaptive):
    """Normalized steps whose length shrinks when progress stalls: gamma_k = t_k / g_k
    (g_k^2 the averaged estimate of ||grad f(X_k)||^2 of `Polyak`; for RSM a step of
    length t_k).

    t starts at ``t0``. Every ``window`` epochs (an epoch being l/2 RSSM iterations or
    one RSM iteration) the rule compares the best cost with that at the previous check:
    if it did not decrease, the iterates circle at the current length and t is multiplied
    by ``shrink`` (a restart of the geometric decay from a shorter step); if it decreased,
    t is multiplied by ``grow``. The rate of decay is thus set by the observed progress,
    not by a problem constant.

    Parameters
    ----------
    t0 : float, optional
        First step length on St(n, p); default sqrt(p).
    shrink : float
        Factor in (0, 1) applied to t on stagnation.
    window : float
        Epochs between progress checks.
    grow : float
        Factor applied to t after progress (1: never grows).
    """

    def __init__(self, t0: float | None = None, shrink: float = 0.5, window: float = 1.0,
                 grow: float = 1.0):
        self.t0 = check_t0(t0)
        self.shrink = as_positive_float(shrink, "shrink", upper=1.0, upper_inclusive=False)
        self.window = as_positive_float(window, "window")
        self.grow = as_positive_float(grow, "grow")
        self.reset()

    def _floor_length(self, k: int, ctx: StepContext, f: float) -> float:
        if not self._started:
            self._started = True
            self._t = first_length(self.t0, ctx)
            self._f_check = f
            self._next = self.window * ctx.epoch
        elif k >= self._next:
            if not self._f_best < self._f_check:
                self._t *= self.shrink
            else:
                self._t *= self.grow
            self._f_check = self._f_best
            self._next = k + self.window * ctx.epoch
        return self._t

    def __call__(self, k: int, ctx: StepContext) -> float:
        f, g2 = self._observe(ctx)
        return capped(self._floor_length(k, ctx, f) / math.sqrt(g2), ctx)


class Backtracking(_Adaptive):
    """Armijo backtracking on the drawn block: try gamma = ``grow`` times the last accepted
    step and halve it until f(X_trial) <= f(X_k) - ``c`` gamma ||P(G_C)||^2, at most
    ``max_trials`` times (the last trial is then taken). A trial costs one retraction
    and one cache update (`StepContext.trial`). The first trial step is ``t0`` long.

    On nonsmooth problems the sufficient-decrease test can fail for every gamma (the
    negative subgradient need not be a descent direction), and the steps then shrink
    towards 0: that is how Pymanopt's Armijo search stalls on ODL. `Auto` adds a floor.

    Parameters
    ----------
    t0 : float, optional
        Length of the first trial step on St(n, p), > 0; default sqrt(p).
    c : float
        Sufficient-decrease constant of the Armijo test, in (0, 1).
    grow : float
        Factor > 0 applied to the previous iteration's step to give the first trial of
        the next.
    max_trials : int
        Most step sizes tried per iteration, >= 1 (the last is taken without the test).
    """

    def __init__(self, t0: float | None = None, c: float = 1e-4, grow: float = 2.0,
                 max_trials: int = 30):
        self.t0 = check_t0(t0)
        self.c = as_positive_float(c, "c", upper=1.0, upper_inclusive=False)
        self.grow = as_positive_float(grow, "grow")
        self.max_trials = as_int(max_trials, "max_trials", minimum=1)
        self.reset()

    def reset(self) -> None:
        super().reset()
        self._gamma: float | None = None

    def __call__(self, k: int, ctx: StepContext) -> float:
        f = ctx.cost
        d2 = ctx.direction_norm**2
        if self._gamma is None:
            gamma = first_length(self.t0, ctx) / ctx.direction_norm
        else:
            gamma = self._gamma * self.grow
        gamma = capped(gamma, ctx)
        for _ in range(self.max_trials - 1):
            if ctx.trial(gamma) <= f - self.c * gamma * d2:
                break
            gamma *= 0.5
        self._gamma = gamma
        return gamma
