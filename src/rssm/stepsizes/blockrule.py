"""Auto's rule for RSSM: a decay whose unit is read from the structure of f.

A geometric schedule gamma_k = mu0 beta^k is fast when beta matches how quickly the
iterates converge, and for RSSM that speed has a unit that depends on the problem
(docs/stepsizes.md, "The unit of the decay"). The best tuned schedules decay by about
0.5 per *epoch* (l/2 iterations) on DPCP, for every number of blocks, and by about
0.5-0.8 per *sweep* of all binom(l, 2) block pairs on ODL, l1 Procrustes and the other
problems measured. What tells the two apart is where the Riemannian subgradient lies
(eq. ``eq-scaling-coordrep``): a step on the pair (i, j) changes X^T X_perp-parts and the
diagonal blocks of X^T grad f of its two blocks, which every block sees once an epoch,
and the off-diagonal block (i, j) (a rotation between the two blocks), which only that
pair can make, once per sweep. When f(XQ) = f(X) for every orthogonal Q (DPCP, any
function of span(X)), X^T grad f = 0 and only the first kind exists; otherwise the
rotations between blocks set the pace. `rssm.stepsizes.StepContext.cross_sq` is the
unbiased estimate of their part of ||grad f||^2, free from the step's own products.

So, at the first iteration, `BlockRule` reads the share ``cross_sq / grad_sq`` (and, in
the per-epoch branch, at every later one: a share above the threshold there means the
first was 0 by accident, and the rule goes on per sweep from its current length):

* **0 (below 1e-6): a decay per epoch, steered by the cosine** of successive partial
  subgradients on a block (Kesten's test). The first length comes from Auto's Armijo
  search; every epoch log t_k moves by the mean cosine m of the epoch and log beta by
  0.2 m (beta starts at 0.7 per epoch): subgradients that agree (m > 0) mean the steps
  are too short to cross the kink, subgradients that reverse (m < 0) that they overshoot
  (then log t_k moves by m / 2 while the subgradients keep at least 0.3 of their first
  norm, as near a sharp minimizer: `NEG_GAIN`, `SHARP`).
  If f rises above its starting value after the first 2 epochs, or above its least
  value once the subgradients have vanished (mean estimate below `VANISH` g_0; cosine
  control gone unstable: near a blunt or smooth minimizer, as DPCP's on real data or
  -trace(X^T A X)'s, the subgradients vanish instead of cancelling and a target cosine
  of 0 keeps the steps long), the rule marks itself `unstable`, and `Auto` hands over to
  its success rule (``scale="length"``) from the current length.
* **Otherwise: a decay of 0.7 per sweep, restarted when it froze.** Auto's Armijo search
  runs first. If it accepts the longest step (a random start), the first length is 3
  times that step (`max_step_length`; the steps stay at that cap until the decay has
  brought the virtual length below it, which is what the best schedules on ODL's and l1
  Procrustes' random starts do); if it accepts a shorter one (a start close to a
  solution), that length. The first time f(X_k) rises above f(X_0) while the steps are
  held at the cap (before any restart), the virtual length drops to the cap: those
  steps are too long for this f (l1 Procrustes; on the paper's ODL and the sparse
  basis f falls during the plateau, and it runs its course). With at most 3 blocks
  (`FAST_BLOCKS`) the decay after that cut is 0.6 per sweep (`FAST_DECAY`), the 0.7
  decay's length kept beside it, until the freeze test below first reads above 0.8: then
  the rule goes on at 0.7 per sweep from that length, or from its length at the first
  of a run of readings above 0.6 before it (`FAST_WATCH`; no gate on f: a frozen fast
  decay still creeps down to where it froze). Otherwise beta = 0.7 per sweep; every 2
  epochs the cancel ratio of the last 3 subgradients of each pair (the quantity of the
  convergence test,
  `rssm.solvers.certificate.least_norm`) is read, and above 0.8 (the subgradients no
  longer cancel: the steps froze before X converged) the length starts again at the
  first length with a slower decay, beta <- sqrt(beta), unless f is below every f read
  where the test fired before since the start (subgradients that agree while f falls
  are a descent on its way: the test fired 12 iterations into l1 Procrustes l = 3 seed
  5 and slowed its decay for the rest of the run).
  Once the mean of the last binom(l, 2) estimates of ||grad f||^2 falls below
  (`SWEEP_VANISH` g_0)^2 (the subgradients vanish: a smooth cost, where a decay of gamma
  stalls the run), the rule marks itself `unstable` and `Auto` hands over to its success
  rule, as from the per-epoch branch.
  It also starts again, from 0.1 ||X||_F (`ESCAPE_LENGTH`) with beta <- beta^0.75
  (`ESCAPE_SLOWING`), when the solver loop reports an escape (``StepContext.escapes``):
  a check that found the iterates stuck, a verdict it refuted or iterates settled to
  ``tol`` where no bundle of the convergence test cancels (docs/convergence.md, "A run
  that settles where no bundle cancels"), or steps settled to 1e-2 ||X||_F where the
  full bundle does not cancel ("A freeze found early").

In both branches gamma_k = t_k / g_0, g_0^2 the first estimate of ||grad f||^2: a
schedule of lengths over the *running* estimate decays 10 times more on ODL, whose
subgradient norm grows 10-fold on the way to the dictionary (docs/stepsizes.md, "Why
the scale matters on ODL"). Every quantity is a ratio, so multiplying f by c > 0 leaves
the iterates unchanged (to rounding).

Measured against the best of a 54-point geometric grid on the same instance, RSSM with
l = 3 and 5, five seeds each (`python -m benchmarks.step_signals --seeds 5
--candidates "block rule" "auto before BlockRule" --cells ...`): within 1.5x on 25
of the 30 DPCP, ODL and l1 Procrustes instances (the success rule that was Auto's RSSM
rule before: 3), and on 39 of 50 with from_functions and the planted sparse basis
(before: 6), reaching 1e-10 within the budget on 50 of 50 (docs/stepsizes.md, "A
plateau that raises f"); with the half cut on overshooting steps, DPCP l = 3 on 5 of 5
(26 of 30; `python -m benchmarks.stepsizes --problems dpcp ...`, docs/stepsizes.md,
"Kept: cosine control cutting less where the subgradients keep their norm"); with the
faster decay after the plateau cut, l1 Procrustes l = 3 on 5 of 5 (29 of 30; on 11 of
seeds 1-12 against 6: `python -m benchmarks.fast_cut`, docs/stepsizes.md, "Kept: a
faster decay after the plateau cut, with few blocks"); with the solver loop's early ask
of the full bundle, which finds a freeze once the steps settle to 1e-2 ||X||_F instead
of at ``tol`` and so restarts the rule sooner, ODL l = 5 on 5 of 5 (30 of 30;
docs/convergence.md, "A freeze found early").
"""

from __future__ import annotations

import collections
import math

import numpy as np

from rssm._validation import as_int, as_positive_float, check_bool
from rssm.stepsizes._common import first_search, grad_sq, max_gamma, max_step_length
from rssm.stepsizes.base import StepSize, StepStall
from rssm.stepsizes.context import StepContext

__all__ = ["BlockRule", "SHARE_ZERO", "SWEEP_DECAY", "block_cosines"]

#: Below this share of ``cross_sq / grad_sq`` the first estimate counts as "no rotations
#: between blocks" (DPCP's is 0 up to rounding; ODL's 0.8 at l = 5, l1 Procrustes' 0.2,
#: the planted sparse basis' 0.03).
SHARE_ZERO = 1e-6
#: The decay per sweep of the branch for f with rotations between blocks. Measured over
#: ODL, l1 Procrustes, from_functions and the planted sparse basis, l = 3 and 5, seeds
#: 1-5 (docs/stepsizes.md): within 1.5x of the best grid point on 27 of 40 instances with
#: 0.7, 24 with 0.6, 21 with 0.65 (not monotone: each value fails other instances).
SWEEP_DECAY = 0.7
#: The first length and every restart of that branch, in units of `max_step_length`.
PLATEAU = 3.0
#: Cancel ratio above which that branch restarts (read every `CHECK_EPOCHS` epochs).
FROZEN = 0.8
CHECK_EPOCHS = 2.0
#: Subgradients per block pair in the cancel ratio.
BUNDLE = 3
#: Cosine control: the first decay per epoch, the gain on log beta, the largest beta.
BETA0 = 0.7
BETA_GAIN = 0.2
BETA_MAX = 2.0
#: Cosine control on overshooting steps: an epoch's mean cosine m < 0 cuts the length by
#: exp(NEG_GAIN m) instead of exp(m) while the mean of the last binom(l, 2) estimates of
#: ||grad f||^2 is at least (SHARP g_0)^2 (`BlockRule._sharp`). Measured (docs/stepsizes.md,
#: "Kept: cosine control cutting less where the subgradients keep their norm"): DPCP, seeds
#: 6-45, iterations to 1e-10 9 % fewer at l = 3 (27 seeds faster, 11 slower) and 7 % at
#: l = 5 (29, 11); without the gate 34 of the 510 rotation-invariant calls took more than
#: 1.5x the iterations, with it 14 (a control that moves only the path: 12).
NEG_GAIN = 0.5
SHARP = 0.3
#: Epochs after which f above its start hands the per-epoch branch over to the success
#: rule (before: the controller's first adjustments; the paper's DPCP, seed 3, l = 3,
#: rose 9e-4 above its start at iteration 2 and converged in 64 iterations).
GRACE_EPOCHS = 2.0
#: A smooth or blunt minimizer in the per-epoch branch: once the mean of the last
#: binom(l, 2) estimates of ||grad f||^2 has fallen below (VANISH g_0)^2 (the subgradients
#: vanish instead of cancelling; remembered from then on), f rising above the least f read
#: after the grace period by more than RISE times the progress f_0 - f_best also counts as
#: unstable. Measured (RSSM, default calls; docs/stepsizes.md, "A smooth minimizer"): the
#: paper's DPCP never falls below 0.058 g_0 (sharp: the subgradients keep their norm); on
#: -trace(X^T A X) cosine control held the steps at the edge of stability and f bounced by
#: up to 0.44 of its progress after the gradient had vanished (9 of 27 calls ended on their
#: budget, which ones depending on the scale of f through rounding; all 27 converge now);
#: over 510 calls on rotation-invariant costs 16 more converge, none fewer, 7 take more
#: than 1.5x the iterations; a rise of 1e-3 or 1e-4 gains the same and slows 8 or 13
#: (``python -m benchmarks.rotation_invariant --rise 1e-4 1e-3 1e-2``).
VANISH = 1e-3
RISE = 1e-2
#: The per-sweep branch hands over to `Auto`'s success rule once that mean has fallen
#: below (SWEEP_VANISH g_0)^2: a smooth cost whose gradient vanishes (least squares with
#: f* = 0), where a decay of gamma stalls the run. Measured (docs/stepsizes.md, "Smooth
#: costs whose least value is 0, with RSSM"): on 60 default RSSM calls of ODL, l1
#: Procrustes, the planted sparse basis and an l1 fit (l = 2, 3, 5, seeds 1-5) the mean
#: never fell below 0.83 g_0, so their paths are unchanged; on 14 least-squares
#: Procrustes calls 0 converged before, 12 with 0.1, 11 with 1e-2, 10 with 1e-3. 0.1 handed
#: over on an l1 fit plus a least-squares term (a review: 5 of 6 runs ended 2-7 orders of
#: magnitude worse), whose l1 subgradients keep a tenth of g_0 or less; with 1e-2 those
#: runs are as before.
SWEEP_VANISH = 1e-2
#: The length, relative to ||X||_F, the per-sweep branch starts again from after a check
#: of the loop moved X to a lower point (``StepContext.escapes``): the first length of the
#: zigzag check that found it (`rssm.solvers.certificate.ZIGZAG_FIRST`), not the plateau
#: of a random start.
ESCAPE_LENGTH = 0.1
#: After an escape the decay slows to beta <- beta^ESCAPE_SLOWING (after the rule's own
#: freeze test: sqrt(beta)). Measured on the paper's ODL with RSSM, l = 3, 4, 5, 6, 8,
#: seeds 1-15, default calls (docs/convergence.md, "A run that settles where no bundle
#: cancels"): 0.75 converges on 70 of 75, 0.5 and 1 (no slowing) on 67.
ESCAPE_SLOWING = 0.75
#: After the plateau cut, with at most FAST_BLOCKS blocks: a decay of FAST_DECAY per sweep
#: instead of `sweep_decay`, the slower decay's length kept beside it; the first reading of
#: the freeze test above `frozen` (no gate on f) returns the rule to the slower decay at
#: that length (or an earlier one: FAST_WATCH). Measured (docs/stepsizes.md, "Kept: a
#: faster decay after the plateau cut, with few blocks"): l1 Procrustes l = 3, seeds
#: 1-12, within 1.5x of the best grid point on 11 against 6; at l = 4 and 5 the faster
#: decay ends runs on their budget.
FAST_DECAY = 0.6
FAST_BLOCKS = 3
#: In the faster decay, the first reading of the freeze test above FAST_WATCH (and each
#: after a reading at or below it) notes the slower decay's length: the fall-back returns
#: to the length of that first reading of the run of high readings, not to the one the
#: slower decay has reached by then. A freeze near the solution (error 6e-8: l1
#: Procrustes 100 x 8 x 4, seed 0, x0 seed 1, l = 3) reads 0.6-0.8 for 45 iterations
#: before it reads above 0.8; falling back to the later length, the run took 391
#: iterations and ended at error 3e-8, with this one 267 and error 1e-12 (the 0.7 decay
#: alone: 243); the benchmark's seeds are unchanged (``python -m benchmarks.fast_cut
#: --calls``, docs/stepsizes.md).
FAST_WATCH = 0.6
#: Armijo search of the first step (`rssm.stepsizes._common.first_search`, as Auto's).
_C = 1e-4
_TRIALS = 8


def block_cosines(direction: np.ndarray, blocks: dict, prev: dict) -> list[float]:
    """Kesten's test per block: the cosine between each block's part of ``direction``
    (``blocks`` maps a block to its positions among the direction's columns) and the
    last one seen on that block (``prev``, updated in place with copies); blocks seen
    for the first time, or whose part is 0, give none.

    Parameters
    ----------
    direction : numpy.ndarray, shape (n, |C|)
        The step's direction (`StepContext.direction`).
    blocks : dict
        Block number -> its positions among the columns of ``direction`` (an index or
        boolean mask).
    prev : dict
        Block number -> the last part of a direction seen on that block; updated in
        place.

    Returns
    -------
    list of float
        The cosines, one per block with a previous part of the same shape and a nonzero
        product of norms.
    """
    out = []
    for b, pos in blocks.items():
        v = direction[:, pos]
        last = prev.get(b)
        if last is not None and last.shape == v.shape:
            den = float(np.linalg.norm(v) * np.linalg.norm(last))
            if den > 0:
                out.append(float(np.vdot(v, last)) / den)
        prev[b] = np.array(v)
    return out


class BlockRule(StepSize):
    """RSSM's default step (what `Auto` does for RSSM): see the module docstring.

    With RSM (one block, no rotations between blocks) it is the per-epoch branch, an
    epoch being one iteration; `Auto`'s RSM rule is the default there.

    Parameters
    ----------
    sweep_decay : float
        beta per sweep of the branch for f with rotations between blocks, in (0, 1).
    share_zero : float
        Threshold on ``cross_sq / grad_sq`` at the first iteration, >= 0.
    search : bool
        Start the per-sweep branch with Auto's Armijo search (default): a first step
        accepted at the cap (a random start) starts the plateau at 3 times the cap, a
        shorter one (a start close to a solution) is kept and the start with it. False:
        always the plateau (from warm starts of ODL, l = 5, seeds 1-3: 3 of 9 runs then
        end at errors 1e-5 to 3e-5; with the search all 9 end at 1e-10 or below).
    frozen : float
        Cancel ratio in (0, 1] above which the per-sweep branch restarts (default
        `FROZEN`, 0.8).
    fast_decay : float
        beta per sweep after the plateau cut, in (0, 1) (default `FAST_DECAY`, 0.6),
        until the freeze test first reads above ``frozen``; then ``sweep_decay``.
    fast_blocks : int
        The most blocks for which the plateau cut turns to ``fast_decay`` (default
        `FAST_BLOCKS`, 3); 0 keeps ``sweep_decay`` throughout.
    """

    def __init__(self, sweep_decay: float = SWEEP_DECAY, share_zero: float = SHARE_ZERO,
                 search: bool = True, frozen: float = FROZEN,
                 fast_decay: float = FAST_DECAY, fast_blocks: int = FAST_BLOCKS):
        # ("no", "0", 2 read as True; in a spec: search=false)
        self.search = check_bool(search, "search")
        self.frozen = as_positive_float(frozen, "frozen", upper=1.0)
        self.sweep_decay = as_positive_float(sweep_decay, "sweep_decay", upper=1.0,
                                             upper_inclusive=False)
        self.share_zero = as_positive_float(share_zero, "share_zero", allow_zero=True)
        self.fast_decay = as_positive_float(fast_decay, "fast_decay", upper=1.0,
                                            upper_inclusive=False)
        self.fast_blocks = as_int(fast_blocks, "fast_blocks", minimum=0)
        # the first search's start (None: the cap), Armijo constant and trials; `Auto`
        # sets its own t0, c and patience here (they did nothing for RSSM)
        self._first_args: tuple[float | None, float, int] = (None, _C, _TRIALS)
        self.reset()

    def reset(self) -> None:
        self._branch: str | None = None       # "epoch" or "sweep" once chosen
        self._share = math.nan
        self._restarts = 0
        self._escapes = 0
        self._f_check = math.inf              # least f read where the freeze test fired
        self._g0 = math.nan
        self._t = self._t0 = math.nan
        self._f0 = math.nan
        self._plateau_cut = False             # the plateau ended on f above f_0
        self._fast = False                    # the faster decay after the cut is on
        self._fell_back = False               # ... and the freeze test ended it
        self._suspect_t = math.nan
        self._slow_t = math.nan               # the slower decay's length beside it
        self._slow_beta = math.nan
        self._unstable = False
        self._f_best = math.inf               # least f read after the grace period
        self._vanished = False                # the mean estimate fell below VANISH g_0
        self._swept = False                   # the first iteration chose the sweep branch
        self._g2: collections.deque = collections.deque()
        self._beta = math.nan                 # per epoch
        self._since = 0
        self._prev: dict[int, np.ndarray] = {}
        self._cos: list[float] = []
        self._bundles: dict[tuple, collections.deque] = {}
        self._block_of: np.ndarray | None = None
        self._positions: dict[tuple, dict] = {}      # per block pair: blocks -> positions

    # -- what the branches read ----------------------------------------------------------
    def _blocks(self, ctx: StepContext) -> dict[int, np.ndarray]:
        """Positions within the direction of each block it moves."""
        part = ctx.partition
        p = ctx.shape[1] if ctx.shape is not None else ctx.direction.shape[1]
        if self._block_of is None:
            self._block_of = np.zeros(p, dtype=np.intp)
            if part is not None:
                for b, cols in enumerate(part.blocks):
                    self._block_of[cols] = b
        pos = self._positions.get(ctx.pair)
        if pos is None:
            cols = ctx.columns if ctx.columns is not None else slice(None)
            bid = self._block_of[np.arange(p)[cols]]
            pos = self._positions[ctx.pair] = {int(b): bid == b for b in np.unique(bid)}
        return pos

    def _cosines(self, ctx: StepContext) -> None:
        if ctx.direction is not None:
            self._cos += block_cosines(ctx.direction, self._blocks(ctx), self._prev)

    def _cancel(self, n_pairs: int) -> float:
        """The cancel ratio over all pairs; NaN until each holds `BUNDLE` subgradients."""
        # (imported here: rssm.solvers imports the step sizes)
        from rssm.solvers.certificate import cancel_ratio

        return cancel_ratio(self._bundles.values(), n_pairs, BUNDLE)

    # -- the first iteration --------------------------------------------------------------
    def _search(self, ctx: StepContext, f: float) -> float:
        """Auto's first search: t from the cap, divided by 4 until Armijo holds."""
        t0, c, trials = self._first_args
        cap = max_step_length(ctx)
        return first_search(ctx, f, self._g0, cap if t0 is None else min(t0, cap), c, trials)

    def _start(self, ctx: StepContext) -> None:
        g2 = grad_sq(ctx)
        self._g0 = math.sqrt(g2)
        cross = ctx.cross_sq if math.isfinite(ctx.cross_sq) else 0.0
        self._share = cross / g2
        f = ctx.cost
        if not math.isfinite(f):
            raise StepStall(f"f(X_0) = {f} is not finite")
        self._f0 = f
        if self._share <= self.share_zero:
            self._branch = "epoch"
            self._beta = BETA0
            self._t = self._search(ctx, f)
        else:
            self._branch = "sweep"
            self._swept = True
            self._beta = self.sweep_decay ** (ctx.epoch / ctx.n_pairs)
            cap = max_step_length(ctx)
            t = self._search(ctx, f) if self.search else cap
            # A first step accepted at the cap (a random start) starts the plateau; a
            # shorter one (a start close to a solution) is kept, and so is the start.
            self._t0 = PLATEAU * cap if t >= (1.0 - 1e-12) * cap else t
            self._t = self._t0

    # -- the rule -------------------------------------------------------------------------
    def __call__(self, k: int, ctx: StepContext) -> float:
        if self._branch is None:
            self._start(ctx)
            self._observe(ctx)
            return self._gamma(ctx)
        if (self._branch == "epoch" and not self._unstable
                and k >= GRACE_EPOCHS * ctx.epoch and self._bounces(ctx)):
            # Cosine control went unstable: f is back above its start, or above its
            # least value once the subgradients have vanished. It aims at orthogonal
            # successive subgradients, which near a smooth or blunt minimizer (DPCP on
            # real data, -trace(X^T A X): the subgradients vanish instead of cancelling)
            # keeps the steps at a fixed fraction of the curvature's scale and lets f
            # bounce. `Auto` reads `unstable` and hands over to its success rule from
            # `length` (as it was before this iteration); alone, the rule goes on.
            self._unstable = True
            return self._gamma(ctx)
        if (self._branch == "sweep" and self._swept and not self._unstable and self._g2
                and len(self._g2) == ctx.n_pairs and self._mean_grad_below(SWEEP_VANISH)):
            # The subgradients vanished: a smooth or blunt minimizer, where a decay of
            # gamma stalls the run (its steps sum to a finite length; least squares with
            # f* = 0 ended its budget at errors 6e-4 to 0.1). `Auto` hands over to its
            # success rule, as for the per-epoch branch. On the sharp problems measured
            # the mean estimate never fell below 0.83 g_0 (docs/stepsizes.md). Only where
            # the first iteration chose this branch: a per-epoch run moved here by a share
            # of rounding once its gradient had vanished (noisy DPCP) is no smooth cost
            # of this branch, and its own test had read the vanishing already.
            self._unstable = True
            return self._gamma(ctx)
        if self._branch == "epoch" and self._rotates(ctx):
            # The first share was 0 by accident (a start where X^T grad f happened to
            # vanish), not because f ignores rotations: go on per sweep from here.
            self._branch = "sweep"
            self._share = ctx.cross_sq / ctx.grad_sq
            self._beta = self.sweep_decay ** (ctx.epoch / ctx.n_pairs)
            self._t0 = self._t
            self._since = 0
        if ctx.escapes != self._escapes:
            # A check of the loop moved X to a lower point the steps had not reached (a
            # refuted verdict, or iterates settled where no bundle cancels): in the
            # per-sweep branch the decay froze too early; start again, more slowly.
            self._escapes = ctx.escapes
            self._end_fast()
            if self._branch == "sweep":
                p = ctx.shape[1] if ctx.shape is not None else 1
                self._restart(min(self._t0, ESCAPE_LENGTH * math.sqrt(p)))
        self._observe(ctx)
        self._since += 1
        if self._branch == "epoch":
            if self._since >= ctx.epoch:
                if self._cos:
                    m = float(np.mean(self._cos))
                    # steps that overshoot (m < 0) while the subgradients keep their norm
                    # (a sharp minimizer's) cut the length half as hard
                    gain = NEG_GAIN if m < 0 and self._sharp() else 1.0
                    self._t *= self._beta ** (self._since / ctx.epoch) * math.exp(gain * m)
                    self._beta = min(BETA_MAX, self._beta * math.exp(BETA_GAIN * m))
                    self._since = 0
                    self._cos = []
        else:
            self._t *= self._beta ** (1.0 / ctx.epoch)
            if self._fast:
                self._slow_t *= self._slow_beta ** (1.0 / ctx.epoch)
            # Not with cyclic pairs: each pair then meets the others' moves in the same
            # order every sweep, so its last subgradients agree while the run converges
            # (l1 Procrustes, l = 5: the test fired up to 65 times in 2500 iterations and
            # held the steps at the cap or slowed the decay to nothing; 4 of 5 instances
            # ended on their budget at errors 9e-5 to 2, all 5 converge without it). The
            # loop's escapes (a freeze caught at tol) still restart the decay.
            if self._since >= CHECK_EPOCHS * ctx.epoch and ctx.selection != "cyclic":
                c = self._cancel(ctx.n_pairs)
                if math.isfinite(c):
                    self._since = 0
                    if self._fast:
                        if c > FAST_WATCH:
                            if math.isnan(self._suspect_t):
                                self._suspect_t = self._slow_t
                        else:
                            self._suspect_t = math.nan
                    if c > self.frozen and self._fast:
                        # the faster decay froze: back to the slower one, at its length
                        self._t = (self._slow_t if math.isnan(self._suspect_t)
                                   else self._suspect_t)
                        self._fell_back = True
                        self._end_fast()
                        self._forget_readings()
                    elif c > self.frozen and not self._falling(ctx):
                        self._restart()
            gamma = self._gamma(ctx)
            if (not self._plateau_cut and self._restarts == 0 and self._escapes == 0
                    and self._t > max_gamma(ctx) * self._g0 and ctx.cost > self._f0):
                # The plateau holds the steps at the cap because on ODL's random starts
                # those steps keep f falling; where they have taken f above its start
                # (l1 Procrustes: f swings around f_0 for the plateau's 9 iterations at
                # l = 3), the decay starts from the cap instead
                self._plateau_cut = True
                self._t = max_gamma(ctx) * self._g0
                if ctx.n_blocks <= self.fast_blocks and ctx.selection != "cyclic":
                    self._fast = True
                    self._slow_t, self._slow_beta = self._t, self._beta
                    self._beta = self.fast_decay ** (ctx.epoch / ctx.n_pairs)
            return gamma
        return self._gamma(ctx)

    def _bounces(self, ctx: StepContext) -> bool:
        """The per-epoch branch after the grace period: f(X_k) above f_0, or above the
        least f read since by more than `RISE` (f_0 - f_best) once the mean of the last
        binom(l, 2) estimates of ||grad f||^2 has been below (`VANISH` g_0)^2."""
        f = ctx.cost
        if f > self._f0:
            return True
        best = self._f_best
        self._f_best = min(best, f)
        g2 = self._g2
        if not self._vanished and len(g2) == ctx.n_pairs:
            self._vanished = self._mean_grad_below(VANISH)
        return self._vanished and f > best + RISE * (self._f0 - best)

    def _sharp(self) -> bool:
        """The mean of the last binom(l, 2) estimates of ||grad f||^2 is at least
        (`SHARP` g_0)^2: the subgradients keep their norm, as near a sharp minimizer."""
        return not self._g2 or not self._mean_grad_below(SHARP)

    def _mean_grad_below(self, level: float) -> bool:
        """The mean of the kept estimates of ||grad f||^2 is below (level g_0)^2 (summed
        exactly; read by the hand-over and by the half cut)."""
        g2 = self._g2
        return math.fsum(g2) < len(g2) * (level * self._g0) ** 2

    def _falling(self, ctx: StepContext) -> bool:
        """Subgradients that agree while f still falls are a descent on its way, not a
        freeze: f now (one cost evaluation, read only when the freeze test fires) is
        below every f read there since the last start."""
        f = ctx.cost
        falling = f < self._f_check
        self._f_check = min(f, self._f_check)
        return falling

    def _end_fast(self) -> None:
        """The faster decay after the plateau cut ends: the slower beta is back."""
        if self._fast:
            self._fast = False
            self._beta = self._slow_beta

    def _restart(self, length: float | None = None) -> None:
        """The per-sweep branch starts again: from the first length with beta <-
        sqrt(beta) (its own freeze test), or after an escape from ``length`` with beta <-
        beta^`ESCAPE_SLOWING`."""
        self._restarts += 1
        self._beta = (math.sqrt(self._beta) if length is None
                      else self._beta ** ESCAPE_SLOWING)
        self._forget_readings()
        self._t = self._t0 if length is None else length

    def _forget_readings(self) -> None:
        """A new decay (a restart or the fall-back) starts the freeze test afresh: no
        bundles, no reading of f at the test."""
        self._bundles = {}
        self._since = 0
        self._f_check = math.inf

    def _rotates(self, ctx: StepContext) -> bool:
        """This iteration's estimate has a share of rotations between blocks above
        ``share_zero`` (never for RSM, whose cross_sq is 0)."""
        g2, cross = ctx.grad_sq, ctx.cross_sq
        return (math.isfinite(g2) and g2 > 0 and math.isfinite(cross)
                and cross > self.share_zero * g2)

    def _observe(self, ctx: StepContext) -> None:
        if math.isfinite(ctx.grad_sq):
            self._g2.append(ctx.grad_sq)
            while len(self._g2) > ctx.n_pairs:
                self._g2.popleft()
        if self._branch == "epoch":
            self._cosines(ctx)
        elif ctx.direction is not None:
            q = self._bundles.get(ctx.pair)
            if q is None:
                q = self._bundles[ctx.pair] = collections.deque(maxlen=BUNDLE)
            q.append(np.array(ctx.direction).ravel())

    def _gamma(self, ctx: StepContext) -> float:
        cap = max_gamma(ctx) * self._g0
        if self._branch == "epoch":
            self._t = min(self._t, cap)       # the length itself never exceeds the cap
            return self._t / self._g0
        # The sweep branch keeps its virtual length (above the cap while the plateau
        # lasts); only the step is capped.
        return min(self._t, cap) / self._g0

    @property
    def branch(self) -> str | None:
        """"epoch" or "sweep" once the first iteration chose; None before."""
        return self._branch

    @property
    def share(self) -> float:
        """The share ``cross_sq / grad_sq`` the first iteration read (NaN before)."""
        return self._share

    @property
    def plateau_cut(self) -> bool:
        """The per-sweep branch's plateau ended early: f rose above f_0 while its steps
        were held at the cap, and the decay went on from the cap."""
        return self._plateau_cut

    @property
    def fast_phase(self) -> bool:
        """The faster decay after the plateau cut (``fast_decay``, with at most
        ``fast_blocks`` blocks) is on now."""
        return self._fast

    @property
    def fell_back(self) -> bool:
        """The freeze test ended the faster decay after the plateau cut: the rule went on
        at `sweep_decay` from the length that decay had reached."""
        return self._fell_back

    @property
    def unstable(self) -> bool:
        """The per-epoch branch saw f above its start after `GRACE_EPOCHS` epochs (or
        above its least value once the subgradients vanished), or the per-sweep branch saw
        the subgradients vanish (`SWEEP_VANISH`); `Auto` then hands over to its success
        rule."""
        return self._unstable

    @property
    def length(self) -> float:
        """The current length t_k (gamma_k = t_k / `g0`)."""
        return self._t

    @property
    def g0(self) -> float:
        """The first estimate of ||grad f|| (NaN before the first iteration)."""
        return self._g0

    @property
    def restarts(self) -> int:
        """Restarts of the per-sweep branch so far."""
        return self._restarts
