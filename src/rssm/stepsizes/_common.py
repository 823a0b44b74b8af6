"""What the adaptive rules share: the windowed mean of the ||grad f||^2 estimates, the
cap on a step's length, the first length, and the best cost seen.

Every adaptive rule reads f(X_k) and the norm of the step's direction from the
`StepContext` and uses them only through scale-free ratios: gap / ||g||^2, where both the
gap (a difference of costs) and ||g|| scale with f. Multiplying f by c > 0 then
multiplies every direction by c and every gamma by 1/c, so the iterates do not change (to
rounding). Their only constants are lengths on the manifold.

Paper labels (``eq-...``, ``lem-...``) are those of the LaTeX source of A. Y.-M. Cheung,
J. Wang, M.-C. Yue, A. M.-C. So, "Randomized Submanifold Subgradient Method for
Optimization over Stiefel Manifolds", arXiv:2409.01770; here ``lem-projsubmfdblk`` =
Lemma 3.2 (table: docs/paper-map.md).
"""

from __future__ import annotations

import collections
import math

from rssm._validation import as_positive_float
from rssm.stepsizes.base import StepSize, StepStall
from rssm.stepsizes.context import StepContext


def grad_sq(ctx: StepContext) -> float:
    """``ctx.grad_sq``, checked: finite and > 0, else `StepStall`."""
    g2 = ctx.grad_sq
    if not (math.isfinite(g2) and g2 > 0):
        raise StepStall(f"the step direction has squared norm {g2!r}; no step size helps")
    return g2


class GradMean:
    """Mean of the last w unbiased estimates ``ctx.grad_sq`` of ||grad f||^2 (w =
    binom(l, 2) for RSSM, so one window sees every pair once on average; w = 1 for RSM).

    The mean is recomputed from the window with `math.fsum` (the correctly rounded sum),
    never kept as a running total: a running total that once held 1 and later only values
    near 1e-21 is rounding noise of order 1e-17. At most binom(l, 2) terms (45 at l = 10):
    a few microseconds per iteration.
    """

    def __init__(self) -> None:
        self.buf: collections.deque[float] = collections.deque()

    def __call__(self, ctx: StepContext) -> float:
        g2 = grad_sq(ctx)
        buf = self.buf
        buf.append(g2)
        while len(buf) > max(1, ctx.n_pairs):
            buf.popleft()
        if len(buf) == 1:
            return g2
        return math.fsum(buf) / len(buf)


def max_step_length(ctx: StepContext) -> float:
    """The longest step an adaptive rule proposes: 2 sqrt(|C|), the diameter of
    St(n, |C|) in the Frobenius norm, |C| the number of columns a step moves (p for RSM;
    for RSSM one length for every pair, |C| = min(p, 2 ceil(p / l)), a pair of the uniform
    partition's largest blocks: where blocks differ in size a pair of more columns gets a
    cap below its diameter, one of fewer a cap above it, which the loop's `max_step`
    shortens; docs/stepsizes.md, "Two guards").

    Two columns of unit norm are at most 2 apart, so no step that moves |C| columns can
    usefully be longer. This is not the bound of the paper's analysis: Lemma
    ``lem-projsubmfdblk`` (Lemma 3.2) makes a submanifold block (St(n, p) itself for RSM)
    1-proximally smooth, so the projection of X_C - gamma P(G_C) is the unique nearest
    point when gamma ||P(G_C)||_F < 1, which the paper's gamma_k < 1/L guarantees. Longer
    steps are still well defined here (the polar factor of X_C - gamma P(G_C) exists for
    every gamma, the direction being tangent), and measured on ODL from a Haar start the
    fastest geometric schedules take steps of length 10-100 in their first iterations:
    capped at 1 none of those with beta <= 0.8 converged, capped at sqrt(|C|) or at the
    diameter they did in the same number of iterations (docs/stepsizes.md).

    Parameters
    ----------
    ctx : StepContext
        The step's context; its ``shape``, ``method`` and ``n_blocks`` are read.

    Returns
    -------
    float
        The cap, 2 sqrt(c) with c the number of columns a step moves (see above); 2 when
        ``ctx.shape`` is unknown.
    """
    shape = ctx.shape
    if shape is None:
        return 2.0
    p = int(shape[1])
    c = p if ctx.method != "rssm" else min(p, 2 * math.ceil(p / max(ctx.n_blocks, 1)))
    return 2.0 * math.sqrt(c)


#: Factor of the first step's backtracking search (`first_search`). A quarter rather than
#: a half: from the diameter to DPCP's first length (about 0.15 of it, from the spectral
#: start) takes 5 trials instead of 8, each as costly as half an RSM iteration, and
#: reached 1e-8 in 38, 42, 46 RSM iterations against 55, 42, 55 (paper DPCP, seeds 0-2);
#: ODL and l1 Procrustes, which accept their first trial or two, did not change (the
#: table of docs/stepsizes.md was measured with this factor).
FIRST_SEARCH_FACTOR = 0.25


def first_search(ctx: StepContext, f: float, g: float, t: float, c: float,
                 trials: int) -> float:
    """The first step's Armijo search (trials at k = 0 only), shared by `Auto` and
    `BlockRule`: gamma from the length ``t`` over ``g`` (capped), divided by
    `FIRST_SEARCH_FACTOR` until f(X_trial) <= f - c gamma ||P(G_C)||^2, at most
    ``trials`` times; returns the accepted length gamma g."""
    gamma = capped(t / g, ctx)
    d2 = ctx.direction_norm**2
    for _ in range(trials):
        if ctx.trial(gamma) <= f - c * gamma * d2:
            break
        gamma *= FIRST_SEARCH_FACTOR
    return gamma * g


def max_gamma(ctx: StepContext) -> float:
    """The largest gamma whose step is at most `max_step_length` long (inf when the
    direction is 0 or unknown).

    Parameters
    ----------
    ctx : StepContext
        The step's context; ``direction_norm`` (the Frobenius norm of the step's
        direction) and what `max_step_length` reads.

    Returns
    -------
    float
        ``max_step_length(ctx) / ctx.direction_norm``, or inf when that norm is 0 or not
        finite.
    """
    d = ctx.direction_norm
    if not (math.isfinite(d) and d > 0):
        return math.inf
    return max_step_length(ctx) / d


def capped(gamma: float, ctx: StepContext) -> float:
    """min(gamma, `max_gamma`): no adaptive rule proposes a longer step."""
    return min(gamma, max_gamma(ctx))


def first_length(t0: float | None, ctx: StepContext) -> float:
    """The first step's length: ``t0``, or sqrt(p) = ||X||_F when None (a step as long as
    the iterate itself: the scale of St(n, p), which needs no knowledge of f)."""
    if t0 is not None:
        return t0
    p = ctx.shape[1] if ctx.shape is not None else 1
    return math.sqrt(p)


def check_t0(value) -> float | None:
    """``t0`` checked: None or a number > 0."""
    return None if value is None else as_positive_float(value, "t0")


class _Adaptive(StepSize):
    """Shared state of the tuning-free rules: f_best and the averaged ||grad f||^2."""

    def reset(self) -> None:
        self._mean = GradMean()
        self._f_best = math.inf
        self._started = False

    def _observe(self, ctx: StepContext) -> tuple[float, float]:
        f = ctx.cost
        if not math.isfinite(f):
            raise StepStall(f"f(X_{ctx.iteration}) = {f} is not finite")
        self._f_best = min(self._f_best, f)
        return f, self._mean(ctx)

    def _first_margin(self, ctx: StepContext, g2: float) -> float | None:
        """At the first call t0 g_0 (a Polyak margin whose step is t0 long, t0 from
        `first_length`); None afterwards."""
        if self._started:
            return None
        self._started = True
        return first_length(self.t0, ctx) * math.sqrt(g2)
