"""Polyak's step: with a known optimal value (`Polyak`) and with a level estimated from
the costs seen (`PolyakLevel`, `PolyakBest`).

Paper labels (``eq-...``, ``lem-...``) are those of the LaTeX source of A. Y.-M. Cheung,
J. Wang, M.-C. Yue, A. M.-C. So, "Randomized Submanifold Subgradient Method for
Optimization over Stiefel Manifolds", arXiv:2409.01770 (table: docs/paper-map.md).
"""

from __future__ import annotations

import math

import numpy as np

from rssm._validation import as_positive_float
from rssm.stepsizes._common import GradMean, _Adaptive, capped, check_t0, grad_sq
from rssm.stepsizes.base import StepSize, StepStall
from rssm.stepsizes.context import StepContext


class Polyak(StepSize):
    """Polyak's step with a known optimal value f*: gamma_k = (f(X_k) - f*) / g_k^2.

    RSM: g_k^2 = ||grad f(X_k)||^2, the classical rule. RSSM: g_k^2 estimates the squared
    norm of the *full* Riemannian subgradient, which by eq. ``eq-cindepNorm2`` of Lemma
    ``lem-cindep`` is the expectation of the squared A_X^{-1}-norm of the lifted partial
    one; `StepContext.grad_sq` is that A_X^{-1}-norm for the drawn pair, and the rule
    averages it over the last binom(l, 2) iterations (``estimate="mean"``, the default) or
    uses the drawn pair's alone (``estimate="pair"``). See docs/stepsizes.md for the
    derivation and where it fails.

    Parameters
    ----------
    f_star : float
        The optimal value (a zero-residual fit, or a ground truth in an experiment).
    scale : float
        Multiplier in (0, 2); 1 is Polyak's rule.
    estimate : {"mean", "pair"}
        How RSSM estimates ||grad f(X_k)||^2 (ignored by RSM).

    Raises
    ------
    StepStall
        Once f(X_k) <= f* (the run ends with ``stalled``).
    """

    def __init__(self, f_star: float, scale: float = 1.0, estimate: str = "mean"):
        if isinstance(f_star, bool) or not isinstance(f_star, (int, float, np.integer,
                                                                np.floating)):
            raise TypeError(f"f_star must be a real number, got {type(f_star).__name__}")
        if not math.isfinite(float(f_star)):
            raise ValueError(f"f_star must be finite, got {f_star}")
        self.f_star = float(f_star)
        self.scale = as_positive_float(scale, "scale", upper=2.0, upper_inclusive=False)
        if estimate not in ("mean", "pair"):
            raise ValueError(f"estimate must be 'mean' or 'pair', got {estimate!r}")
        self.estimate = estimate
        self.reset()

    def reset(self) -> None:
        self._mean = GradMean()

    def __call__(self, k: int, ctx: StepContext) -> float:
        gap = ctx.cost - self.f_star
        g2 = self._mean(ctx) if self.estimate == "mean" else grad_sq(ctx)
        if not gap > 0:
            raise StepStall(
                f"Polyak: f(X_{k}) - f_star = {gap:.3g} <= 0: X is optimal to rounding "
                "(or f_star is too large)"
            )
        return capped(self.scale * gap / g2, ctx)


class PolyakLevel(_Adaptive):
    """Polyak's step towards a target level that adapts (Nedic and Bertsekas, 2001):
    gamma_k = (f(X_k) - (f_rec - delta)) / g_k^2, f_rec the best cost at the last
    level change, g_k^2 the averaged estimate of ||grad f(X_k)||^2 of `Polyak`.

    When f drops by delta / 2 below f_rec the level moves down (f_rec <- f_best) and
    delta grows by ``grow``; when ``patience`` epochs of binom(l, 2) pairs (one iteration
    for RSM) pass without that, delta halves. The first delta makes the first step
    ``t0`` long: delta_0 = t0 g_0.

    Parameters
    ----------
    t0 : float, optional
        Length of the first step on St(n, p); default sqrt(p).
    grow : float
        Factor >= 1 on delta after a level is reached.
    patience : float
        Pair epochs without a level reached before delta halves.
    """

    def __init__(self, t0: float | None = None, grow: float = 1.5, patience: float = 2.0):
        self.t0 = check_t0(t0)
        self.grow = as_positive_float(grow, "grow")
        if self.grow < 1:
            raise ValueError(f"grow must be >= 1, got {grow}")
        self.patience = as_positive_float(patience, "patience")
        self.reset()

    def __call__(self, k: int, ctx: StepContext) -> float:
        f, g2 = self._observe(ctx)
        margin = self._first_margin(ctx, g2)
        if margin is not None:
            self._delta = margin
            self._f_rec = f
            self._since = 0
        elif self._f_best <= self._f_rec - 0.5 * self._delta:
            self._f_rec = self._f_best
            self._delta *= self.grow
            self._since = 0
        elif self._since >= self.patience * ctx.n_pairs:
            self._f_rec = self._f_best
            self._delta *= 0.5
            self._since = 0
        self._since += 1
        return capped((f - self._f_rec + self._delta) / g2, ctx)


class PolyakBest(_Adaptive):
    """Polyak's step towards the best cost so far less a vanishing margin (the f_best
    rule of Manopt.jl's subgradient method): gamma_k = (f(X_k) - f_best + delta_k) / g_k^2,
    delta_k = delta_0 / (1 + k / epoch), delta_0 = t0 g_0 (so the first step is t0 long).

    Parameters
    ----------
    t0 : float, optional
        Length of the first step on St(n, p); default sqrt(p).
    """

    def __init__(self, t0: float | None = None):
        self.t0 = check_t0(t0)
        self.reset()

    def __call__(self, k: int, ctx: StepContext) -> float:
        f, g2 = self._observe(ctx)
        margin = self._first_margin(ctx, g2)
        if margin is not None:
            self._delta0 = margin
        delta = self._delta0 / (1.0 + k / ctx.epoch)
        return capped((f - self._f_best + delta) / g2, ctx)
