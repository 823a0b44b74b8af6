"""The default rule, `Auto` (what ``stepsize="auto"`` and ``stepsize=None`` mean)."""

from __future__ import annotations

import math

from rssm._validation import as_positive_float
from rssm.stepsizes._common import _Adaptive, capped, check_t0, first_length
from rssm.stepsizes.base import StepSize
from rssm.stepsizes.context import StepContext


class Auto(_Adaptive):
    """The default rule (``stepsize="auto"`` or None): a step length that grows after a
    step that decreased f and shrinks after one that did not. No problem constant, no f*.

    gamma_k = t_k / g_k, g_k^2 the averaged unbiased estimate of ||grad f(X_k)||^2 of
    `Polyak` (for RSM, t_k is the length of the step). The first length comes from an
    Armijo backtracking search from sqrt(p) = ||X||_F, halving until
    f(X_trial) <= f(X_0) - c gamma ||P(G_C)||^2 (a trial costs a retraction and a cache
    update). Afterwards no trial is made: f(X_{k+1}), which the rule reads anyway, says
    whether step k decreased f, and t_{k+1} = ``grow`` t_k if it did, ``shrink`` t_k if
    not. The length thus settles where a fraction
    log(grow) / (log(grow) + log(1 / shrink)) of the steps fail to decrease f, and decays
    geometrically at the rate the problem allows (the success rule of evolution
    strategies). RSM uses grow = 1.2 (about one step in five fails); RSSM, whose test sees
    the decrease of one random block pair and is noisier, grow = 1.5 (about one in three).
    Every quantity is a ratio of costs or of norms, so scaling f leaves the iterates
    unchanged. docs/stepsizes.md compares it with the other candidates.

    Parameters
    ----------
    t0 : float, optional
        Start of the first search, a length on St(n, p); default sqrt(p).
    grow : float, optional
        Factor >= 1 on the length after a step that decreased f; default 1.2 for RSM,
        1.5 for RSSM.
    shrink : float
        Factor in (0, 1) on the length after a step that did not.
    c : float
        Armijo constant of the first search, in (0, 1).
    patience : int
        The first search stops after this many halvings (the length is then
        sqrt(p) / 2^patience), and after this many failures in a row the length is held
        until a step decreases f again: where no length decreases f (the subgradient is
        not a descent direction, e.g. at exact zeros of an l1 term), shrinking further
        would only stall the run.
    """

    def __init__(self, t0: float | None = None, grow: float | None = None,
                 shrink: float = 0.5, c: float = 1e-4, patience: int = 8):
        if not isinstance(patience, int) or patience < 1:
            raise ValueError(f"patience must be an int >= 1, got {patience!r}")
        self.patience = patience
        self.t0 = check_t0(t0)
        self.grow = None if grow is None else as_positive_float(grow, "grow")
        if self.grow is not None and self.grow < 1:
            raise ValueError(f"grow must be >= 1, got {grow}")
        self.shrink = as_positive_float(shrink, "shrink", upper=1.0, upper_inclusive=False)
        self.c = as_positive_float(c, "c", upper=1.0, upper_inclusive=False)
        self.reset()

    def reset(self) -> None:
        super().reset()
        self._t = math.nan
        self._f_prev = math.nan
        self._fails = 0

    def __call__(self, k: int, ctx: StepContext) -> float:
        f, g2 = self._observe(ctx)
        g = math.sqrt(g2)
        if not self._started:
            self._started = True
            gamma = first_length(self.t0, ctx) / g
            d2 = ctx.direction_norm**2
            for _ in range(self.patience):
                gamma = capped(gamma, ctx)
                if ctx.trial(gamma) <= f - self.c * gamma * d2:
                    break
                gamma *= 0.5
            self._t = gamma * g
        else:
            grow = self.grow or (1.5 if ctx.method == "rssm" else 1.2)
            if f < self._f_prev:
                self._t *= grow
                self._fails = 0
            else:
                self._fails += 1
                # Shrink on a failure, but not forever: after `patience` failures in a row
                # no length helps (the subgradient is not a descent direction, as at the
                # exact zeros of an l1 term), so hold the length until f decreases again.
                if self._fails <= self.patience:
                    self._t *= self.shrink
            gamma = self._t / g
        gamma = capped(gamma, ctx)
        self._t = gamma * g
        self._f_prev = f
        return gamma


def make_auto() -> StepSize:
    """A fresh `Auto` rule (what ``stepsize="auto"`` and ``stepsize=None`` mean)."""
    return Auto()
