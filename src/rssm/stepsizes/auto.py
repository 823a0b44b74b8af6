"""The default rule, `Auto` (what ``stepsize="auto"`` and ``stepsize=None`` mean)."""

from __future__ import annotations

import collections
import math

from rssm._validation import as_int, as_positive_float
from rssm.stepsizes._common import (  # FIRST_SEARCH_FACTOR: kept importable from here
    FIRST_SEARCH_FACTOR,  # noqa: F401
    GradMean,
    check_t0,
    first_search,
    grad_sq,
    max_gamma,
    max_step_length,
)
from rssm.stepsizes.base import StepSize, StepStall
from rssm.stepsizes.blockrule import ESCAPE_LENGTH, BlockRule
from rssm.stepsizes.context import StepContext

_SCALES = ("gap", "length")
#: (grow, shrink) of the success rule when not given: on the factor kappa of the gap rule
#: (RSM) and on the length itself (RSSM, l <= 4). They settle where the fraction of
#: failed steps is log(grow) / (log(grow) + log(1 / shrink)): 0.21 and 0.34.
_DEFAULTS = {"gap": (1.15, 0.6), "length": (1.3, 0.6)}
#: RSSM's grow factor from `MANY_BLOCKS` blocks on (a failed-step fraction of 0.40): with
#: more blocks a pair's step moves fewer columns and fails more often at the right
#: length. Measured on DPCP, ODL, l1 Procrustes and from_functions, 5 seeds each,
#: iterations to error 1e-10 (docs/stepsizes.md, "the RSSM rule"): at l = 5, 1.4 / 0.6
#: reached it on 18 of 20 instances, 1.3 / 0.6 on 11, the previous 1.5 / 0.5 on 9; at
#: l = 3 and 4, 1.3 / 0.6 on 20 and 19 of 20, and mostly faster than 1.5 / 0.5 (18 and 18 of 20).
MANY_GROW = 1.4
MANY_BLOCKS = 5



#: The factor per epoch by which RSM's D_k (the decrease of the best cost over the last
#: ``window`` epochs) falls at most, and falls exactly while the window holds no new best
#: cost: a window in which the best cost barely moved (a few failed steps in a row) made
#: D_k, and with it the step, collapse 10-fold below the gap it stands for, and the run
#: then crawled until D_k recovered. 0.6 per epoch is about the fastest decay of the best
#: grid schedules of docs/stepsizes.md (0.5-0.7 per epoch on DPCP, ODL and l1 Procrustes).
#: Measured with RSM (docs/stepsizes.md, "The floor under D_k"): within 1.5x of the best
#: grid point on 10 of 15 instances (7 without the floor; with 0.4, 0.5, 0.7: 8, 11, 6);
#: from 75 cold and 60 warm starts of five problems it converges on 71 and 60 (no floor:
#: 70 and 59; 0.5: 70 and 59) in a median 64 and 50.5 iterations (no floor: 79 and 62);
#: `python -m benchmarks.drop_floor`. Once D_k fell by it in windows without a new best
#: cost too (before, D_k was held there), 0.45, 0.5, 0.55 and 0.65 were measured again
#: with `START_DECAY` on: 0.6 stays the best (docs/stepsizes.md, "A window without a
#: new best cost").
DROP_FLOOR = 0.6

#: RSM on f invariant under X -> XQ (``StepContext.rotation_sq`` 0 at the start) from a
#: start the first search finds close (it rejects the longest step): until D_k exists,
#: the length is multiplied by this every iteration instead of following the success
#: rule (which grew the step while the iterates closed in on DPCP's solution). Measured
#: (docs/stepsizes.md, "RSM: a close start on a problem that ignores rotations"): on the
#: paper's DPCP within 1.5x of the best grid point on 5 of 5 seeds (1 without it). It
#: was opt-in while D_k was held in windows without a new best cost: on DPCP with noisy
#: inliers a lucky early drop then kept the steps long for hundreds of iterations (up to
#: 902); with D_k falling there the nine noisy instances take 97-132 iterations (97-172
#: before both changes), so it is on by default (``start_decay=None`` turns it off; on a
#: smooth f that ignores rotations, from a warm start, it is faster on 4 and slower on 4
#: of 8 instances, 5 % fewer iterations in sum; `python -m benchmarks.drop_floor --stall`).
START_DECAY = 0.5
#: Below this share of ``rotation_sq / grad_sq`` f counts as invariant under X -> XQ.
ROTATION_ZERO = 1e-6

#: RSM after the solver loop found its steps frozen (``StepContext.escapes``: the iterates
#: settled to ``tol`` where the subgradients do not cancel): the gap rule's steps fell
#: faster than the distance to a stationary point, so the rule gives way to a plain
#: geometric decay of the length, t_k = ESCAPE_LENGTH ||X||_F ESCAPE_DECAY^j (j the
#: iterations since; `rssm.stepsizes.blockrule.ESCAPE_LENGTH`, the zigzag check's first
#: length), and each later freeze starts it again with the decay's time constant doubled
#: (beta <- sqrt(beta)): a geometric decay converges on a sharp problem once beta is above
#: a threshold set by the problem's conditioning, which the doublings reach. Measured on
#: ODL with noisy samples (Y = X* S + noise, 1 % and 10 %, n = 20, 40, seeds 1-3), where
#: no default run converged in 3000 iterations before: all 12 converge, in a median of
#: 426 iterations (beta 0.95: 644; restarting the gap rule with slower factors instead:
#: 1087); docs/stepsizes.md, "RSM: a run whose steps froze".
ESCAPE_DECAY = 0.9

class Auto(StepSize):
    """The default rule (``stepsize="auto"`` or None): no problem constant, no f*.

    gamma_k = t_k / g_k, g_k^2 the mean of the unbiased estimates `StepContext.grad_sq` of
    ||grad f(X_k)||^2 over the last binom(l, 2) iterations (RSM: ||grad f(X_k)||^2
    itself), so t_k is the length of an RSM step, and for RSSM the length the full Polyak
    analysis speaks of (docs/stepsizes.md). What sets t_k:

    * **First step**: an Armijo search from the longest step allowed,
      `rssm.stepsizes.max_step_length` (the diameter of the columns the step moves),
      dividing by 4 until f(X_trial) <= f(X_0) - c gamma ||P(G_C)||^2, at most ``patience``
      times. A trial costs a retraction and a cost evaluation, at k = 0 only.
    * **RSM** (``scale="gap"``): t_k = kappa_k (f(X_k) - f_best + D_k) / g_k, Polyak's
      step with the unknown gap f(X_k) - f* replaced by the gap to the best cost so far
      plus D_k, the decrease of the best cost over the last ``window`` epochs, falling
      by no more than a factor ``drop_floor`` per epoch, and by that factor while the
      window holds no new best cost. On a sharp problem that converges linearly, D_k is
      a fixed multiple of the true gap, so the factor kappa_k that corrects it settles, while t_k
      shrinks as fast as f converges (a length rule that must learn the decay lags behind
      it). kappa_k follows the success rule: times ``grow`` (1.15) after a step that
      decreased f, times ``shrink`` (0.6) after one that did not. Until D_k exists
      (a window's decrease of the best cost), the success rule acts on t_k itself;
      on f invariant under X -> XQ from a close start the length halves every
      iteration instead (``start_decay``).
      Once the solver loop finds the steps frozen (``StepContext.escapes``: the iterates
      settled where the subgradients do not cancel), a geometric decay of the length
      from `ESCAPE_LENGTH` ||X||_F by `ESCAPE_DECAY` per iteration replaces it, its
      time constant doubled at each later freeze.
    * **RSSM** (``scale=None``, the default): `rssm.stepsizes.BlockRule`, a geometric
      decay whose unit (an epoch, or a sweep of all block pairs) is read from the share
      of the first gradient estimate that lies in rotations between blocks
      (`StepContext.cross_sq`), steered by the cosine of successive subgradients
      (per epoch) or restarted when the steps froze (per sweep); within 1.5x of the
      best tuned geometric schedule on 25 of 30 paper instances where the success rule
      below was on 3 (docs/stepsizes.md, "Auto for RSSM: the unit of the decay").
    * **RSSM with** ``scale="length"`` (the RSSM rule before): the success rule on t_k
      itself (grow 1.3 for l <= 4 blocks, 1.4 from 5 on; shrink 0.6).
    * **Hold**: after ``patience`` failures in a row, the factor is held until a step
      decreases f again. Where no length decreases f (the subgradient is not a descent
      direction, as at the exact zeros of an l1 term), shrinking further only stalls the
      run.
    * **Cap**: no step is longer than `rssm.stepsizes.max_step_length`.

    Every quantity is a ratio of costs or of norms, so multiplying f by c > 0 leaves the
    iterates unchanged (to rounding).

    Parameters
    ----------
    t0 : float, optional
        Start of the first search, a length on St(n, p); default the diameter
        2 sqrt(|C|) of the columns a step moves (a longer one is capped there). RSSM's
        `BlockRule` starts its search there too.
    grow : float, optional
        Factor >= 1 after a step that decreased f; default 1.15 on kappa (scale "gap"),
        1.3 on the length (scale "length"; 1.4 with `MANY_BLOCKS` = 5 blocks or more).
        RSSM with the default scale: only after `BlockRule` hands over (`handed_over`).
    shrink : float, optional
        Factor in (0, 1) after a step that did not; default 0.6 (RSSM: as ``grow``).
    c : float
        Armijo constant of the first search, in (0, 1) (RSSM's too).
    patience : int
        Trials of the first search (RSSM's too), and failures in a row before the
        factor is held.
    window : float
        Epochs (l/2 RSSM iterations, one RSM iteration) over which D_k is measured.
    scale : {"gap", "length"}, optional
        What the success rule scales: None (default) is "gap" for RSM and
        `rssm.stepsizes.BlockRule` for RSSM; "length" is the success rule on the length
        (RSSM's rule before `BlockRule`).
    drop_floor : float
        Least factor per epoch by which D_k may fall (and the factor by which it falls
        while the window holds no new best cost), in (0, 1]; default `DROP_FLOOR` (0.6).
        1 holds D_k at its largest value; a small value lets it follow the window.
    start_decay : float or None
        RSM on f invariant under X -> XQ from a start the first search finds close: the
        factor in (0, 1) applied to the length every iteration until D_k exists; default
        `START_DECAY` (0.5: 43-45 iterations on the paper's DPCP instead of 48-51).
        None keeps the success rule there.
    """

    def __init__(self, t0: float | None = None, grow: float | None = None,
                 shrink: float | None = None, c: float = 1e-4, patience: int = 8,
                 window: float = 4.0, scale: str | None = None,
                 drop_floor: float = DROP_FLOOR, start_decay: float | None = START_DECAY):
        self.patience = as_int(patience, "patience", minimum=1)
        self.t0 = check_t0(t0)
        self.grow = None if grow is None else as_positive_float(grow, "grow")
        if self.grow is not None and self.grow < 1:
            raise ValueError(f"grow must be >= 1, got {grow}")
        self.shrink = None if shrink is None else as_positive_float(
            shrink, "shrink", upper=1.0, upper_inclusive=False)
        self.c = as_positive_float(c, "c", upper=1.0, upper_inclusive=False)
        self.window = as_positive_float(window, "window")
        self.drop_floor = as_positive_float(drop_floor, "drop_floor", upper=1.0)
        self.start_decay = (None if start_decay is None else as_positive_float(
            start_decay, "start_decay", upper=1.0, upper_inclusive=False))
        if scale is not None and scale not in _SCALES:
            raise ValueError(f"scale must be None, 'gap' or 'length', got {scale!r}")
        self.scale = scale
        self.reset()

    def reset(self) -> None:
        self._mean = GradMean()
        self._started = False
        self._t = math.nan
        self._f_prev = math.nan
        self._f_best = math.inf
        self._fails = 0
        self._kappa: float | None = None
        self._best_hist: collections.deque[float] = collections.deque()
        self._drop = 0.0
        self._halve = False     # START_DECAY applies (RSM, invariant f, close start)
        self._block = BlockRule()
        self._block._first_args = (self.t0, self.c, self.patience)
        self._handed_over = False
        self._escapes = 0
        self._decay: float | None = None     # RSM after a freeze: the geometric decay

    @property
    def handed_over(self) -> bool:
        """RSSM: `BlockRule` went unstable (its per-epoch branch) or saw the subgradients
        vanish (its per-sweep branch) and this run goes on with the success rule on the
        length."""
        return self._handed_over

    def _first(self, ctx: StepContext, f: float, g: float) -> float:
        """t_0 from the Armijo search (trials at k = 0 only)."""
        t = max_step_length(ctx) if self.t0 is None else self.t0
        return first_search(ctx, f, g, t, self.c, self.patience)

    def _factor(self, f: float, scale: str, n_blocks: int) -> float:
        if f < self._f_prev:
            self._fails = 0
            if self.grow is not None:
                return self.grow
            if scale == "length" and n_blocks >= MANY_BLOCKS:
                return MANY_GROW
            return _DEFAULTS[scale][0]
        self._fails += 1
        # After `patience` failures in a row no length helps (the subgradient is not a
        # descent direction, as at the exact zeros of an l1 term): hold until f decreases.
        if self._fails > self.patience:
            return 1.0
        return self.shrink or _DEFAULTS[scale][1]

    def _track_best(self, ctx: StepContext) -> None:
        """D_k: the decrease of f_best over the last `window` epochs, and at least
        ``drop_floor``^(1/epoch) times D_{k-1} (0 until the best cost first decreases
        over a window)."""
        hist = self._best_hist
        hist.append(self._f_best)
        span = max(1, math.ceil(self.window * ctx.epoch))
        while len(hist) > span + 1:
            hist.popleft()
        if len(hist) == span + 1:
            # A window without a new best cost lets D_k fall by the floor too: held
            # instead, a D_k measured on a lucky early drop kept the steps at its scale
            # for hundreds of iterations (docs/stepsizes.md, "A window without a new
            # best cost").
            self._drop = max(hist[0] - self._f_best,
                             self._drop * self.drop_floor ** (1.0 / ctx.epoch))

    def _escape(self, ctx: StepContext) -> None:
        """The solver loop found the steps frozen: a geometric decay of the length from
        `ESCAPE_LENGTH` ||X||_F, by `ESCAPE_DECAY` per iteration the first time and by
        the square root of the last decay after each later freeze."""
        self._escapes = ctx.escapes
        self._decay = ESCAPE_DECAY if self._decay is None else math.sqrt(self._decay)
        p = ctx.shape[1] if ctx.shape is not None else 1
        self._t = ESCAPE_LENGTH * math.sqrt(p)

    def _first_step(self, ctx: StepContext, f: float, g: float, scale: str) -> None:
        """t_0 (the first search) and whether `start_decay` applies."""
        self._started = True
        self._t = self._first(ctx, f, g)
        if scale == "gap" and self.start_decay is not None:
            rot = ctx.rotation_sq
            invariant = math.isfinite(rot) and rot <= ROTATION_ZERO * g * g
            close = self._t < (1.0 - 1e-12) * max_step_length(ctx)
            self._halve = invariant and close

    def _next(self, ctx: StepContext, f: float, g: float, scale: str) -> None:
        """t_k from t_{k-1}: the success rule on kappa (the gap rule) or on the length."""
        factor = self._factor(f, scale, ctx.n_blocks or 1)
        gap = f - self._f_best + self._drop
        if scale == "gap" and self._drop > 0:
            if self._kappa is None:
                self._kappa = self._t * g / gap
            self._kappa *= factor
            self._t = self._kappa * gap / g
        else:
            self._t *= self.start_decay if self._halve and scale == "gap" else factor

    def __call__(self, k: int, ctx: StepContext) -> float:
        rssm_length = False
        if ctx.method == "rssm" and self.scale is None:
            if not self._handed_over:
                gamma = self._block(k, ctx)
                if not self._block.unstable:
                    return gamma
                # BlockRule's per-epoch branch went unstable (f above its start): go on
                # with the success rule on the length, from BlockRule's length.
                self._handed_over = True
                self._started = True
                self._t = self._block.length / self._block.g0 * math.sqrt(grad_sq(ctx))
            rssm_length = True
        f = ctx.cost
        if not math.isfinite(f):
            raise StepStall(f"f(X_{k}) = {f} is not finite")
        g = math.sqrt(self._mean(ctx))
        self._f_best = min(self._f_best, f)
        scale = "length" if rssm_length else (
            self.scale or ("length" if ctx.method == "rssm" else "gap"))
        if scale == "gap" and self._started and ctx.escapes != self._escapes:
            self._escape(ctx)
        elif self._decay is not None:
            self._t *= self._decay
        else:
            if scale == "gap":
                self._track_best(ctx)
            if not self._started:
                self._first_step(ctx, f, g, scale)
            else:
                self._next(ctx, f, g, scale)
        t_max = max_gamma(ctx) * g
        if self._t > t_max:
            self._t = t_max
            if self._kappa is not None:
                self._kappa = self._t * g / (f - self._f_best + self._drop)
        self._f_prev = f
        return self._t / g


def make_auto() -> StepSize:
    """A fresh `Auto` rule (what ``stepsize="auto"`` and ``stepsize=None`` mean)."""
    return Auto()
