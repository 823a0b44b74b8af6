"""Signals a step rule could read besides f, and the RSSM rules built on them (issue 18,
item 5; docs/stepsizes.md, "Rules that read the subgradients").

    python -m benchmarks.step_signals --signals            # what the signals look like
    python -m benchmarks.step_signals [--seeds 3] [--candidates NAME ...] [--cells ...]
    python -m benchmarks.step_signals --polyak-level [--seeds 3] [--cells ...]
    python -m benchmarks.step_signals --scale [--seeds 3] [--cells ...]
    python -m benchmarks.step_signals --per-sweep          # from the grid CSV, no runs

Auto's RSSM rule reads only whether f decreased. Two other signals are free, from the
subgradients the solver computes anyway (`rssm.stepsizes.StepContext.direction`):

* **cosine**: the cosine between the (partial) Riemannian subgradient on a block and the
  last one on the same block (Kesten's test): near +1 when the steps are too short to
  cross the kink (successive subgradients agree), negative when the iterates oscillate
  around it;
* **cancel ratio**: the least-norm convex combination of each block pair's last ``w``
  subgradients over their mean norm (root of the sum of squares over the pairs), the
  quantity of the convergence test (`rssm.solvers.certificate`): about 1 where a step
  decayed too early froze X, small where the subgradients cancel.

``--signals`` runs, on one instance of each of DPCP (l = 5), ODL (l = 5) and l1
Procrustes (l = 3), the best geometric grid point of `benchmarks.stepsizes` (its CSV),
the same first length with a decay too fast to converge, and Auto, and prints every
``2`` epochs the error, the fraction of failed steps and both signals.

The default mode runs the candidate rules below on RSSM (l = 3, 5) on DPCP, ODL and l1
Procrustes and prints, per instance, iterations to error 1e-10 (rejected trials counted
as half an iteration, as `benchmarks.rssm_rule` does) over the best grid point's:

* ``cosine``: the length decays geometrically, and every epoch the log length moves by
  eta (m - target) and log beta by eta2 (m - target), m the mean cosine of the epoch
  (a proportional-integral control of the cosine; beta starts at 0.7, at most 2);
* ``cosine+failures``: the same with a (0.2 - q) added to the error, q the fraction of
  failed steps over the window;
* ``certificate restart``: a geometric decay (beta = 0.5 per epoch) from Auto's Armijo
  search; when the cancel ratio exceeds 0.8 (a freeze), a new Armijo search and a slower
  decay (beta <- beta^(2/3));
* ``certificate restart from the cap``: the same with the first length and every restart
  at the longest step allowed (`rssm.stepsizes.max_step_length`), beta = 0.6 at first
  and beta <- sqrt(beta) at a restart;
* ``certificate restart, fixed scale``: as the last, with a first length (and restarts)
  at 3 times the cap, kept as a virtual length that the steps meet once it has decayed
  below the cap, and gamma = t / g_0 with g_0 fixed at the first estimate (see
  ``--scale``);
* ``certificate restart, fixed scale, per sweep``: the same with beta = 0.6 per sweep of
  all binom(l, 2) block pairs (0.77 per epoch at l = 3, 0.88 at l = 5; see
  ``--per-sweep``);
* ``cosine, fixed scale``: ``cosine`` with gamma = t / g_0, as the last two (does the
  scale explain why cosine control freezes on ODL?);
* ``switch by the first search``: Auto's first Armijo search decides. Where it accepts a
  length below an eighth of the cap (the start is close to a solution: DPCP's spectral
  start), ``cosine, fixed scale`` goes on; where it accepts a longer one (ODL's and l1
  Procrustes' random starts), ``certificate restart, fixed scale, per sweep``; the
  ``0.7 per sweep`` variant decays by 0.7 per sweep in that branch;
* ``switch by structure``: the same two branches, chosen by what the problem is instead
  of where it starts: the share of the first gradient estimate that lies in the
  off-diagonal blocks of X^T grad f (``StepContext.cross_sq / grad_sq``). It is 0 when
  f(XQ) = f(X) for all orthogonal Q (DPCP: the blocks converge side by side, the best
  decay is per epoch) and large when f needs rotations between blocks (ODL: 0.8 at
  l = 5, l1 Procrustes: 0.2; only the drawn pair can make them, once per sweep):
  cosine control below 1e-6, else the certificate restart per sweep;
* ``auto``: the default rule, for the warm starts (``--warm``);
* ``cosine then auto``: ``cosine`` until the cancel ratio exceeds 0.6, then Auto's rule;
* ``batched success``: Auto's success rule with its factors applied once every 2
  epochs (a constant length within the batch).

``--polyak-level`` asks whether a better estimate of f* could be the answer:
`rssm.stepsizes.Polyak` (gamma = kappa (f(X_k) - f*) / g^2, g^2 the averaged estimate of
||grad f||^2), kappa = 1 and 0.5, with f* *given*: the least cost of the instance's best
grid run (which ends below error 1e-10). It prints iterations to 1e-8 and 1e-10 over the best grid
point's (its iterations to 1e-8 counted on the same run). A level estimate can only do
worse than the level itself.

``--scale`` runs each instance's best grid point three ways: as the grid ran it (gamma_k
= mu0 beta^(k/epoch), mu0 = t / ||grad f(X_0)||), as a length t beta^(k/epoch) over Auto's
running estimate g_k of ||grad f(X_k)|| (gamma_k = t_k / g_k, what Auto and the
candidates do), and as that length over the first estimate g_0 only.

``--shares`` prints, for every problem, the shares of ||grad f||^2 in the off-diagonal
blocks of X^T grad f (rotations between blocks, what `StepContext.cross_sq` estimates),
in its diagonal blocks and in its X_perp part, at the start and at the solution.

``--default-calls`` runs the default RSSM call (`BlockRule`) beside the success rule it
replaced, with the default tolerance and budget, and prints how each run ends.

``--warm [NOISE ...]`` runs the candidates from warm starts (a default solution moved by
noise of these relative sizes, default 1e-3 1e-2 1e-1) and prints how the runs end.

``--per-sweep`` reads the grid CSV only: each instance's best decay per epoch, and the
same as a decay per *sweep* of all block pairs (binom(l, 2) iterations; one for RSM).

Iteration counts do not depend on the machine's load; no timing is taken here.
"""

from __future__ import annotations

import argparse
import collections
import math
import os
import sys

import numpy as np

from rssm.blocks import Partition, epoch_iterations, pair_count
from rssm.solvers.certificate import cancel_ratio
from rssm.stepsizes import Auto, BlockRule, Geometric, Polyak, StepSize
from rssm.stepsizes._common import GradMean, max_gamma, max_step_length
from rssm.stepsizes.base import StepStall
from rssm.stepsizes.blockrule import block_cosines

CELLS = tuple(f"{p}:rssm-l{ell}" for p in ("dpcp", "odl", "l1_procrustes") for ell in (3, 5))
SIGNAL_CASES = (("dpcp", "rssm-l5", 1), ("odl", "rssm-l5", 1), ("l1_procrustes", "rssm-l3", 1))


class Signals:
    """The cosine and cancel-ratio trackers, fed one direction per iteration."""

    def __init__(self, w: int = 3):
        self.w = w
        self.reset()

    def reset(self) -> None:
        self.prev: dict = {}
        self.cosines: list[float] = []
        self.bundles: dict = {}
        self._split = None

    def _blocks(self, ctx):
        """The direction's columns split by block (uniform partition, as the benchmarks
        use): {block: positions within the direction}."""
        if ctx.method == "rsm":
            return {(): slice(None)}
        p = ctx.shape[1]
        if self._split is None:
            self._split = np.empty(p, dtype=int)       # column -> its block
            for b, cols in enumerate(Partition.uniform(p, ctx.n_blocks).blocks):
                self._split[cols] = b
        bid = self._split[np.arange(p)[ctx.columns]]
        return {int(b): bid == b for b in np.unique(bid)}

    def add(self, ctx) -> None:
        d = ctx.direction
        self.cosines += block_cosines(d, self._blocks(ctx), self.prev)
        q = self.bundles.setdefault(ctx.pair, collections.deque(maxlen=self.w))
        q.append(np.array(d).ravel())

    def take_cosine(self) -> float:
        """Mean cosine since the last call (NaN if none), and start over."""
        m = float(np.mean(self.cosines)) if self.cosines else math.nan
        self.cosines = []
        return m

    def cancel(self, n_pairs: int) -> float:
        """The cancel ratio, NaN until every pair holds w subgradients."""
        return cancel_ratio(self.bundles.values(), n_pairs, self.w)

    def clear_bundles(self) -> None:
        self.bundles = {}


class _Candidate(Auto):
    """Auto's first search, mean and cap, with `Signals` fed every iteration.

    ``fixed_scale``: gamma = t / g_0, g_0^2 the first estimate of ||grad f||^2, instead
    of Auto's running mean (see ``--scale``).
    """

    def __init__(self, w: int = 3, fixed_scale: bool = False, **kw):
        self.signals = Signals(w)
        self.fixed_scale = fixed_scale
        super().__init__(**kw)

    def reset(self) -> None:
        super().reset()
        self.signals.reset()
        self._g0 = None

    def _begin(self, k, ctx):
        f = ctx.cost
        if not math.isfinite(f):
            raise StepStall(f"f(X_{k}) = {f} is not finite")
        self.signals.add(ctx)
        g = math.sqrt(self._mean(ctx))
        if self.fixed_scale:
            self._g0 = g if self._g0 is None else self._g0
            g = self._g0
        return f, g

    def _end(self, ctx, g: float) -> float:
        self._t = min(self._t, max_gamma(ctx) * g)
        return self._t / g


class CosineControl(_Candidate):
    """``cosine`` (a = 0) and ``cosine+failures`` (a > 0) of the module docstring."""

    def __init__(self, beta=0.7, target=0.0, eta=1.0, eta2=0.2, bmax=2.0, a=0.0, p=0.2,
                 every=1.0, **kw):
        self.beta0, self.target, self.eta, self.eta2 = beta, target, eta, eta2
        self.bmax, self.a, self.p, self.every = bmax, a, p, every
        super().__init__(**kw)

    def reset(self) -> None:
        super().reset()
        self.beta = self.beta0
        self._since = self._nf = self._ns = 0
        self._fp = math.nan

    def __call__(self, k, ctx):
        f, g = self._begin(k, ctx)
        if math.isfinite(self._fp):
            self._ns += 1
            self._nf += f >= self._fp
        self._fp = f
        if not self._started:
            self._started = True
            self._t = self._first(ctx, f, g)
            return self._end(ctx, g)
        self._since += 1
        if self._since >= self.every * ctx.epoch:
            m = self.signals.take_cosine()
            if math.isfinite(m):
                q = self._nf / self._ns if self._ns else self.p
                err = (m - self.target) + self.a * (self.p - q)
                self._t *= self.beta ** (self._since / ctx.epoch) * math.exp(self.eta * err)
                self.beta = min(self.bmax, self.beta * math.exp(self.eta2 * err))
                self._since = self._nf = self._ns = 0
        return self._end(ctx, g)


class CertificateRestart(_Candidate):
    """``certificate restart`` and its two variants of the module docstring.

    ``at_cap``: the first length and every restart at the cap (times ``plateau`` when
    given: a virtual length above the cap, which the steps meet only once it has decayed
    below it); ``per_sweep``: ``beta`` is the decay per sweep of all binom(l, 2) block
    pairs instead of per epoch (per epoch beta^(l/2 / binom(l, 2)) = beta^(1/(l-1))).
    """

    def __init__(self, beta=0.5, hi=0.8, slow=2 / 3, every=2.0, at_cap=False,
                 plateau=None, per_sweep=False, **kw):
        self.beta0, self.hi, self.slow, self.every = beta, hi, slow, every
        self.at_cap, self.plateau, self.per_sweep = at_cap, plateau, per_sweep
        super().__init__(**kw)

    def _first(self, ctx, f, g):
        if not self.at_cap:
            return super()._first(ctx, f, g)
        return max_step_length(ctx) * (self.plateau or 1.0)

    def reset(self) -> None:
        super().reset()
        self.beta = self.beta0
        self._since = 0
        self.restarts = 0

    def _end(self, ctx, g: float) -> float:
        if self.plateau is None:
            return super()._end(ctx, g)
        return min(self._t, max_gamma(ctx) * g) / g      # the virtual length is kept

    def __call__(self, k, ctx):
        f, g = self._begin(k, ctx)
        if not self._started:
            self._started = True
            if self.per_sweep:
                self.beta = self.beta0 ** (ctx.epoch / ctx.n_pairs)
            self._t = self._first(ctx, f, g)
            return self._end(ctx, g)
        self._t *= self.beta ** (1.0 / ctx.epoch)
        self._since += 1
        if self._since >= self.every * ctx.epoch:
            c = self.signals.cancel(ctx.n_pairs)
            if math.isfinite(c):
                self._since = 0
                if c > self.hi:
                    self.restarts += 1
                    self.beta **= self.slow
                    self.signals.clear_bundles()
                    self._t = self._first(ctx, f, g)
        return self._end(ctx, g)


class CosineThenAuto(CosineControl):
    """``cosine then auto`` of the module docstring."""

    def __init__(self, hi=0.6, **kw):
        self.hi = hi
        super().__init__(**kw)

    def reset(self) -> None:
        super().reset()
        self.auto = Auto()
        self.switched = False
        self._sc = 0

    def __call__(self, k, ctx):
        if self.switched:
            return self.auto(k, ctx)
        gamma = super().__call__(k, ctx)
        self._sc += 1
        if self._sc >= 2 * ctx.epoch:
            self._sc = 0
            c = self.signals.cancel(ctx.n_pairs)
            self.switched = math.isfinite(c) and c > self.hi
        return gamma


class FirstSearchSwitch(StepSize):
    """``switch by the first search`` of the module docstring: cosine control (fixed
    scale) where Auto's first Armijo search accepts a length below ``frac`` of the cap (a
    start close to a solution, as DPCP's spectral one), else the certificate restart
    (fixed scale, ``beta`` per sweep, from 3 times the cap)."""

    def __init__(self, beta: float = 0.6, frac: float = 0.125):
        self.beta, self.frac = beta, frac
        self.reset()

    def reset(self) -> None:
        self.near = CosineControl(fixed_scale=True)
        self.far = CertificateRestart(beta=self.beta, slow=0.5, at_cap=True, plateau=3.0,
                                      fixed_scale=True, per_sweep=True)
        self.rule: StepSize | None = None

    def __call__(self, k, ctx):
        if self.rule is None:
            gamma = self.near(k, ctx)              # the first search (trials at k = 0)
            if self.near._t < self.frac * max_step_length(ctx):
                self.rule = self.near
                return gamma
            self.rule = self.far
        return self.rule(k, ctx)


class StructureSwitch(FirstSearchSwitch):
    """``switch by structure`` of the module docstring: the same two branches as
    `FirstSearchSwitch`, chosen by the cross-block share of the first gradient estimate,
    ``StepContext.cross_sq / grad_sq``: below ``thr`` (f invariant under X -> XQ, as
    DPCP: its blocks converge side by side, one decay per epoch) cosine control, else the
    certificate restart with a decay per sweep (rotations between blocks, which only the
    drawn pair can make: one decay per sweep of all binom(l, 2) pairs)."""

    def __init__(self, beta: float = 0.6, thr: float = 1e-6):
        self.thr = thr
        super().__init__(beta=beta)

    def __call__(self, k, ctx):
        if self.rule is None:
            share = ctx.cross_sq / ctx.grad_sq if ctx.grad_sq > 0 else 0.0
            self.share = share
            self.rule = self.near if share < self.thr else self.far
        return self.rule(k, ctx)


class BatchedSuccess(Auto):
    """``batched success`` of the module docstring."""

    def __init__(self, every=2.0, **kw):
        self.every = every
        super().__init__(scale="length", **kw)

    def reset(self) -> None:
        super().reset()
        self._acc = 1.0
        self._n = 0

    def __call__(self, k, ctx):
        f = ctx.cost
        if not math.isfinite(f):
            raise StepStall(f"f(X_{k}) = {f} is not finite")
        g = math.sqrt(self._mean(ctx))
        if not self._started:
            self._started = True
            self._t = self._first(ctx, f, g)
        else:
            self._acc *= self._factor(f, "length", ctx.n_blocks)
            self._n += 1
            if self._n >= self.every * ctx.epoch:
                self._t *= self._acc
                self._acc, self._n = 1.0, 0
        self._t = min(self._t, max_gamma(ctx) * g)
        self._f_prev = f
        return self._t / g


class PlateauSignal(BlockRule):
    """`BlockRule` with its plateau cut (f above f_0 while the steps are held at the cap:
    the decay goes on from the cap) replaced by another signal, or by none
    (``signal=None``: the rule before the cut). Candidates of 2026-11-26, scored with
    ``--candidates`` over the ten cells (log `plateau.log`):

    * ``"sweep rise"``: f at the end of a sweep (binom(l, 2) iterations) not below f at
      the end of the sweep before (f_0 for the first);
    * ``"rise fraction"``: rises f_k > f_{k-1} in at least 40 % of the plateau's
      iterations, after one sweep;
    * ``"stall"``: no new least f for a sweep while the subgradient has not grown (root
      mean of the last binom(l, 2) estimates below 1.5 g_0);
    * ``"rise"``: the kept rule, with ``fast`` the decay per sweep after the cut (at
      ``l <= max_blocks`` only).
    """

    def __init__(self, signal: str | None = None, fast: float | None = None,
                 max_blocks: int = 10**9, **kw):
        self.signal, self.fast, self.max_blocks = signal, fast, max_blocks
        super().__init__(**kw)

    def reset(self) -> None:
        super().reset()
        self._plateau_cut = True          # the built-in cut never fires
        self._ended = False
        self._f_sweep = math.nan
        self._f_prev = math.nan
        self._rises = self._seen = self._since_best = 0
        self._best = math.inf
        self._g2w: list = []

    def _fires(self, k, ctx) -> bool:
        f = ctx.cost
        if self.signal == "rise":
            return f > self._f0
        if self.signal == "sweep rise":
            if k % ctx.n_pairs:
                return False
            prev = self._f0 if math.isnan(self._f_sweep) else self._f_sweep
            self._f_sweep = f
            return f >= prev
        if self.signal == "rise fraction":
            prev = self._f0 if math.isnan(self._f_prev) else self._f_prev
            self._f_prev = f
            self._seen += 1
            self._rises += f > prev
            return self._seen >= ctx.n_pairs and self._rises >= 0.4 * self._seen
        # "stall"
        if f < self._best:
            self._best, self._since_best = f, 0
        else:
            self._since_best += 1
        self._g2w = (self._g2w + [ctx.grad_sq])[-ctx.n_pairs:]
        g = math.sqrt(sum(self._g2w) / len(self._g2w))
        return self._since_best >= ctx.n_pairs and g < 1.5 * self._g0

    def __call__(self, k, ctx):
        first = self._branch is None
        gamma = super().__call__(k, ctx)
        cap = max_gamma(ctx) * self._g0
        if (not first and self.signal is not None and self._branch == "sweep"
                and not self._ended and self._restarts == 0 and self._escapes == 0
                and self._t > cap and self._fires(k, ctx)):
            self._ended = True
            self._t = cap
            if self.fast is not None and ctx.n_blocks <= self.max_blocks:
                self._beta = self.fast ** (ctx.epoch / ctx.n_pairs)
        return gamma


class TrackingAcceleration(BlockRule):
    """`BlockRule` whose per-sweep decay speeds up once the best cost follows it.

    While a geometric decay bounds the run, the best cost falls by about beta^w over w
    sweeps. Every ``window`` sweeps the decrease of the best cost over the last window is
    compared with the window before; after ``confirm`` windows in a row whose ratio lies
    within a factor ``band`` of beta^window, beta <- max(``beta_min``, beta^``power``)
    per sweep, and with ``travel`` the length is raised so that what the decay can still
    travel, t / (1 - beta per iteration), stays the same. Off after a restart of the rule
    (a freeze it or the loop found).
    """

    def __init__(self, window: int = 3, confirm: int = 2, band: float = 2.5,
                 power: float = 1.5, beta_min: float = 0.5, travel: bool = False, **kw):
        self.window, self.confirm, self.band = window, confirm, band
        self.power, self.beta_min, self.travel = power, beta_min, travel
        super().__init__(**kw)

    def reset(self) -> None:
        super().reset()
        self._best_at: list[float] = []       # the best cost at the end of each sweep
        self._fbest = math.inf
        self._count = 0
        self._agree = 0
        self.accelerations = 0

    def _window(self, ctx, hist: list, count: int):
        """At the end of every ``window`` sweeps (``count`` iterations into the phase):
        the decreases of the best cost over the last window and the window before; else
        None. ``hist`` holds the best cost at the end of each sweep."""
        f = ctx.cost
        if math.isfinite(f):
            self._fbest = min(self._fbest, f)
        if count % ctx.n_pairs:
            return None
        w = self.window
        hist.append(self._fbest)
        if len(hist) < 2 * w + 1 or (len(hist) - 1) % w:
            return None
        return hist[-1 - w] - hist[-1], hist[-1 - 2 * w] - hist[-1 - w]

    def __call__(self, k, ctx):
        gamma = super().__call__(k, ctx)
        if self._branch != "sweep" or self._restarts:
            return gamma
        self._count += 1
        d = self._window(ctx, self._best_at, self._count)
        if d is None:
            return gamma
        d_new, d_old = d
        w = self.window
        sweep = self._beta ** (ctx.n_pairs / ctx.epoch)
        expect = sweep ** w
        agree = (d_old > 0 and d_new > 0
                 and expect / self.band <= d_new / d_old <= expect * self.band)
        self._agree = self._agree + 1 if agree else 0
        if self._agree >= self.confirm and sweep > self.beta_min * (1 + 1e-12):
            old = self._beta ** (1.0 / ctx.epoch)
            self._beta = max(self.beta_min, sweep ** self.power) ** (ctx.epoch / ctx.n_pairs)
            if self.travel:
                self._t *= (1.0 - self._beta ** (1.0 / ctx.epoch)) / (1.0 - old)
            self.accelerations += 1
            self._agree, self._count, self._best_at[:] = 0, 0, [self._fbest]
        return gamma


class SpeculativeAcceleration(TrackingAcceleration):
    """`TrackingAcceleration` that takes its speed-up back once the run stops following it.

    At an acceleration the slow decay goes on in the shadow: its length t_slow keeps
    shrinking by the slow beta per iteration. After the acceleration, at the end of each
    window of ``window`` sweeps from the second on, the decrease of the best cost over the
    window is compared with the window before: below ``beta_fast^window / band`` (the
    run no longer follows the faster decay: it froze where the slower one would not),
    the rule reverts to the slow decay from the shadow's length (what the run would have
    had without the speed-up) and does not accelerate again. ``again``: it may
    accelerate again after a revert (from the slow decay, after new confirmations).
    """

    def __init__(self, again: bool = False, **kw):
        self.again = again
        super().__init__(**kw)

    def reset(self) -> None:
        super().reset()
        self._shadow = None      # (t_slow, beta_slow per iteration) while accelerated
        self._after: list[float] = []
        self._sweeps = 0
        self.reverts = 0

    def __call__(self, k, ctx):
        accelerated = self.accelerations
        if self._shadow is not None:
            self._shadow = (self._shadow[0] * self._shadow[1] ** (1.0 / ctx.epoch),
                            self._shadow[1])
        if self._shadow is None and self.reverts and not self.again:
            return BlockRule.__call__(self, k, ctx)
        restarts = self._restarts
        if self._shadow is not None:
            gamma = BlockRule.__call__(self, k, ctx)
            if self._restarts != restarts:
                self._shadow = None        # a restart of the rule: its own decay now
                return gamma
            self._sweeps += 1
            d = self._window(ctx, self._after, self._sweeps)
            if d is None:
                return gamma
            d_new, d_old = d
            expect = (self._beta ** (ctx.n_pairs / ctx.epoch)) ** self.window
            if not (d_old > 0 and d_new >= expect / self.band * d_old):
                self._t, self._beta = self._shadow[0], self._shadow[1]
                self._shadow = None
                self.reverts += 1
                self._agree, self._count, self._best_at[:] = 0, 0, [self._fbest]
            return gamma
        t_before, beta_before = self._t, self._beta
        gamma = super().__call__(k, ctx)
        if self.accelerations != accelerated:
            # the length t_before was this iteration's before the decay of BlockRule
            self._shadow = (t_before * beta_before ** (1.0 / ctx.epoch), beta_before)
            self._after, self._sweeps = [self._fbest], 0
        return gamma


CANDIDATES = {
    "speculative": lambda: SpeculativeAcceleration(travel=True),
    "speculative, once": lambda: SpeculativeAcceleration(travel=True, beta_min=0.586),
    "speculative, 0.5 at once": lambda: SpeculativeAcceleration(
        travel=True, power=3.0, beta_min=0.5),
    "speculative, again": lambda: SpeculativeAcceleration(travel=True, again=True),
    "cosine": lambda: CosineControl(),
    "cosine+failures": lambda: CosineControl(a=2.0, eta=0.5, eta2=0.1, every=2.0),
    "certificate restart": lambda: CertificateRestart(),
    "certificate restart from the cap": lambda: CertificateRestart(beta=0.6, slow=0.5,
                                                                   at_cap=True),
    "certificate restart, fixed scale": lambda: CertificateRestart(
        beta=0.6, slow=0.5, at_cap=True, plateau=3.0, fixed_scale=True),
    "certificate restart, fixed scale, per sweep": lambda: CertificateRestart(
        beta=0.6, slow=0.5, at_cap=True, plateau=3.0, fixed_scale=True, per_sweep=True),
    "cosine, fixed scale": lambda: CosineControl(fixed_scale=True),
    "switch by the first search": lambda: FirstSearchSwitch(),
    "switch by the first search, 0.7 per sweep": lambda: FirstSearchSwitch(beta=0.7),
    "switch by structure": lambda: StructureSwitch(),
    "switch by structure, 0.65 per sweep": lambda: StructureSwitch(beta=0.65),
    "switch by structure, 0.7 per sweep": lambda: StructureSwitch(beta=0.7),
    "auto": lambda: Auto(),
    "auto before BlockRule": lambda: Auto(scale="length"),
    "block rule": lambda: BlockRule(),
    "block rule, no search": lambda: BlockRule(search=False),
    "block rule, plateau kept": lambda: PlateauSignal(),
    "plateau ends on a rise (as block rule)": lambda: PlateauSignal("rise"),
    "plateau ends on a sweep's rise": lambda: PlateauSignal("sweep rise"),
    "plateau ends on a rise fraction": lambda: PlateauSignal("rise fraction"),
    "plateau ends on a stall": lambda: PlateauSignal("stall"),
    "plateau ends on a rise, then 0.6 per sweep": lambda: PlateauSignal("rise", 0.6),
    "plateau ends on a rise, then 0.55 per sweep at l <= 3": lambda: PlateauSignal(
        "rise", 0.55, 3),
    **{f"block rule {b:g}/{c:g}": (lambda b=b, c=c: BlockRule(sweep_decay=b, frozen=c))
       for b in (0.6, 0.65, 0.7) for c in (0.4, 0.5, 0.6, 0.8)},
    "cosine then auto": lambda: CosineThenAuto(),
    "batched success": lambda: BatchedSuccess(),
    "tracking acceleration": lambda: TrackingAcceleration(),
    "tracking acceleration, travel kept": lambda: TrackingAcceleration(travel=True),
    "tracking acceleration, travel kept, once": lambda: TrackingAcceleration(
        travel=True, beta_min=0.586),
    "tracking acceleration, travel kept, once, 3 windows": lambda: TrackingAcceleration(
        travel=True, beta_min=0.586, confirm=3),
}


class Watch(StepSize):
    """Any rule, with the signals and f logged every iteration (for ``--signals``)."""

    def __init__(self, rule, w: int = 3):
        self.rule, self.signals = rule, Signals(w)
        self.reset()

    def reset(self) -> None:
        self.rule.reset()
        self.signals.reset()
        self.log: list[tuple[float, float, float]] = []

    def describe(self) -> str:
        return self.rule.describe()

    def __call__(self, k, ctx):
        f = ctx.cost
        self.signals.add(ctx)
        gamma = self.rule(k, ctx)
        cos = self.signals.take_cosine()
        self.log.append((f, cos, self.signals.cancel(ctx.n_pairs)))
        return gamma


def _windows(log, run, epoch, span=2.0, every=4):
    """Rows: iteration, error, failed fraction, mean cosine, cancel ratio per window."""
    f = np.array([r[0] for r in log])
    cos = np.array([r[1] for r in log])
    can = np.array([r[2] for r in log])
    w = max(2, int(round(span * epoch)))
    rows = []
    for i in range(0, len(f) - 1, w * every):
        j = min(i + w, len(f) - 1)
        fail = float(np.mean(f[i + 1:j + 1] >= f[i:j]))
        c = cos[i:j + 1]
        c = c[np.isfinite(c)]
        err = run["error"][min(i, len(run["error"]) - 1)]
        rows.append((i, err, fail, float(np.mean(c)) if c.size else math.nan, can[j]))
    return rows


def signals(grid_csv: str) -> None:
    from benchmarks.stepsizes import _method, _problems, best_grid_points, first_at, run_rule

    best = best_grid_points(grid_csv)
    probs = _problems()
    for name, key, seed in SIGNAL_CASES:
        build, epochs, _ = probs[name]
        prob, x0 = build(seed)
        g0 = float(np.linalg.norm(prob.riemannian_subgradient(x0)))
        t, beta, _ = best[(name, key, seed)]
        ell = _method(key)[1]
        fast = 0.5 if beta > 0.6 else 0.3
        for label, rule in ((f"best grid point t={t:g} beta={beta:g}", Geometric(t / g0, beta)),
                            (f"too fast t={t:g} beta={fast:g}", Geometric(t / g0, fast)),
                            ("auto", Auto())):
            watch = Watch(rule)
            run = run_rule(prob, x0, key, watch, epochs, seed)
            hit = first_at(run, 1e-10)
            print(f"{name} {key} seed {seed}, {label}: "
                  f"{'1e-10 at ' + str(hit[0]) if hit else 'never 1e-10'}"
                  f" (final error {run['error'][-1]:.1e})", flush=True)
            print("     k   error  failed  cosine  cancel")
            for i, err, fail, cos, can in _windows(watch.log, run, ell / 2):
                print(f"  {i:4d} {err:7.1e} {fail:7.2f} {cos:7.2f} {can:7.2f}")


def warm_start(prob, seed: int, noise: float, key: str):
    """A warm start: the default call's solution (the same method and blocks) moved by
    Gaussian noise of relative size ``noise`` and projected back (polar)."""
    import rssm
    from benchmarks.stepsizes import _method

    method, ell = _method(key)
    sol = rssm.minimize(prob, method=method, seed=seed,
                        options={"n_blocks": max(ell, 2)} if method == "rssm" else None).x
    rng = np.random.default_rng([seed, 77])
    e = rng.standard_normal(sol.shape)
    return rssm.stiefel.polar(sol + noise * np.linalg.norm(sol) / np.linalg.norm(e) * e)


def warm(names, cells, seeds, noises) -> None:
    """Each candidate from warm starts (`warm_start`): how the run ends (the default
    convergence test on) and its error."""
    import rssm
    from benchmarks.stepsizes import _method, _problems

    probs = _problems()
    for cell in cells:
        name, key = cell.split(":")
        build, epochs, _ = probs[name]
        method, ell = _method(key)
        starts = []
        for seed in seeds:
            prob, _ = build(seed)
            for noise in noises:
                starts.append((seed, noise, prob, warm_start(prob, seed, noise, key)))
        for label in names:
            ends, its = collections.Counter(), []
            for seed, _noise, prob, x0 in starts:
                res = rssm.minimize(prob, x0, method=method, stepsize=CANDIDATES[label](),
                                    seed=seed, max_iter=int(math.ceil(epochs * ell / 2)),
                                    options={"n_blocks": ell})
                ok = res.success and res.error < 1e-8
                ends["converged, error < 1e-8" if ok else f"{res.stop_reason} "
                     f"(error {res.error:.0e})"] += 1
                if ok:
                    its.append(res.n_iter)
            print(f"warm {label} {cell}: " + "; ".join(f"{v} {k}" for k, v in
                                                      sorted(ends.items()))
                  + (f"; median {int(np.median(its))} iterations" if its else ""), flush=True)


def _shares(prob, x, ell: int) -> tuple[float, float, float]:
    """Shares of ||grad f(X)||^2 in the off-diagonal blocks of X^T grad f (rotations
    between blocks), its diagonal blocks, and its X_perp part (uniform l blocks)."""
    g = prob.riemannian_subgradient(x)
    s = x.T @ g
    blocks = Partition.uniform(x.shape[1], ell).blocks
    diag = sum(float(np.sum(s[np.ix_(b, b)] ** 2)) for b in blocks)
    off = float(np.sum(s**2)) - diag
    perp = float(np.sum((g - x @ s) ** 2))
    tot = off + diag + perp
    return off / tot, diag / tot, perp / tot


def shares(ell: int = 5, seed: int = 1) -> None:
    """``--shares``: where the Riemannian subgradient lies, at the start and at the
    default call's solution (RSM), for each problem of the benchmark."""
    import rssm
    from benchmarks.stepsizes import _problems

    print(f"l = {ell}, seed {seed}: shares of ||grad f||^2 (off-diagonal blocks of "
          "X^T grad f / diagonal blocks / X_perp part)")
    for name, (build, _, _) in _problems().items():
        prob, x0 = build(seed)
        sol = rssm.minimize(prob, x0, seed=seed).x
        blocks = min(ell, prob.shape[1])
        a, b = _shares(prob, x0, blocks), _shares(prob, sol, blocks)
        print(f"{name} {prob.shape[0]} x {prob.shape[1]}: start {a[0]:.3f} {a[1]:.3f} "
              f"{a[2]:.3f}; solution {b[0]:.3f} {b[1]:.3f} {b[2]:.3f}", flush=True)


def default_calls() -> None:
    """``--default-calls``: the default RSSM call (Auto, so `BlockRule`) beside the
    success rule it replaced (``Auto(scale="length")``), the default tolerance and
    budget, from each problem's own start: stop reason, iterations, error. Seeds 1-3 at
    l = 3, 5; seeds 1-2 at l = 2, 4, 10 (where l <= p)."""
    import rssm
    from benchmarks.stepsizes import _problems

    probs = _problems()
    for blocks, seeds in (((3, 5), (1, 2, 3)), ((2, 4, 10), (1, 2))):
        for name in ("dpcp", "odl", "l1_procrustes", "from_functions", "sparse_basis"):
            build = probs[name][0]
            for ell in blocks:
                out = []
                for seed in seeds:
                    prob, x0 = build(seed)
                    if ell > prob.shape[1]:
                        continue
                    for label, rule in (("default", "auto"),
                                        ("success rule", Auto(scale="length"))):
                        r = rssm.minimize(prob, x0, method="rssm", seed=seed, stepsize=rule,
                                          options={"n_blocks": ell})
                        out.append(f"{label} seed {seed}: {r.stop_reason.value} "
                                   f"{r.n_iter} its, error {r.error:.0e}")
                if out:
                    print(f"{name} l={ell}: " + " | ".join(out), flush=True)


def compare(names, cells, seeds, grid_csv) -> None:
    from benchmarks.stepsizes import _problems, best_grid_points, first_at, run_rule

    best = {k: v[2] for k, v in best_grid_points(grid_csv).items()}
    probs = _problems()
    for label in names:
        for cell in cells:
            name, key = cell.split(":")
            build, epochs, _ = probs[name]
            ratios, its = [], []
            for seed in seeds:
                prob, x0 = build(seed)
                run = run_rule(prob, x0, key, CANDIDATES[label](), epochs, seed)
                hit = first_at(run, 1e-10)
                its.append(hit[0] if hit else None)
                grid = best.get((name, key, seed))
                ratios.append(math.nan if not grid else
                              (hit[0] + 0.5 * hit[1]) / grid if hit else math.inf)
            ok = sum(r <= 1.5 for r in ratios)
            scored = sum(not math.isnan(r) for r in ratios)
            reach = sum(i is not None for i in its)
            print(f"{label} {cell}: reach 1e-10 {reach}/{len(its)}, within 1.5x {ok}/"
                  f"{scored}, over best grid "
                  + " ".join("n/a" if math.isnan(r) else "-" if math.isinf(r) else f"{r:.2f}"
                             for r in ratios)
                  + f" its {its}", flush=True)


def polyak_level(cells, seeds, grid_csv, kappas=(1.0, 0.5)) -> None:
    from benchmarks.stepsizes import _problems, best_grid_points, first_at, run_rule

    best = best_grid_points(grid_csv)
    probs = _problems()
    for cell in cells:
        name, key = cell.split(":")
        build, epochs, _ = probs[name]
        rows = {kappa: ([], []) for kappa in kappas}
        for seed in seeds:
            prob, x0 = build(seed)
            g0 = float(np.linalg.norm(prob.riemannian_subgradient(x0)))
            t, beta, _ = best[(name, key, seed)]
            ref = run_rule(prob, x0, key, Geometric(t / g0, beta), epochs, seed)
            f_star = float(np.min(ref["cost"]))
            ref8, ref10 = first_at(ref, 1e-8), first_at(ref, 1e-10)
            for kappa in kappas:
                run = run_rule(prob, x0, key, Polyak(f_star, scale=kappa), epochs, seed)
                for out, hit, r in zip(rows[kappa], (first_at(run, 1e-8), first_at(run, 1e-10)),
                                       (ref8, ref10), strict=True):
                    out.append("-" if hit is None or r is None else f"{hit[0] / r[0]:.2f}")
        for kappa in kappas:
            r8, r10 = rows[kappa]
            print(f"Polyak, f* given, kappa={kappa:g}, {cell}: over best grid point, "
                  f"to 1e-8 {' '.join(r8)}; to 1e-10 {' '.join(r10)}", flush=True)


class LengthGeometric(StepSize):
    """gamma_k = t beta^(k/epoch) / g, g Auto's running estimate of ||grad f(X_k)|| or,
    with ``fixed``, its first value (``--scale``)."""

    def __init__(self, t: float, beta: float, fixed: bool = False):
        self.t, self.beta, self.fixed = float(t), float(beta), fixed
        self.reset()

    def reset(self) -> None:
        self._mean = GradMean()
        self._g = None

    def __call__(self, k, ctx):
        g = math.sqrt(self._mean(ctx))
        if self.fixed:
            self._g = g if self._g is None else self._g
            g = self._g
        return self.t * self.beta ** (k / ctx.epoch) / g


class GradTrace(StepSize):
    """A rule, with Auto's running estimate of ||grad f(X_k)|| recorded (``--scale``)."""

    def __init__(self, rule):
        self.rule = rule
        self.reset()

    def reset(self) -> None:
        self.rule.reset()
        self._mean = GradMean()
        self.g: list[float] = []

    def describe(self) -> str:
        return self.rule.describe()

    def __call__(self, k, ctx):
        self.g.append(math.sqrt(self._mean(ctx)))
        return self.rule(k, ctx)


def scale(cells, seeds, grid_csv) -> None:
    from benchmarks.stepsizes import _problems, best_grid_points, first_at, run_rule

    best = best_grid_points(grid_csv)
    probs = _problems()
    for cell in cells:
        name, key = cell.split(":")
        build, epochs, _ = probs[name]
        out = {"as the grid ran it": [], "over the running g_k": [], "over g_0": []}
        growth = ""
        for seed in seeds:
            prob, x0 = build(seed)
            g0 = float(np.linalg.norm(prob.riemannian_subgradient(x0)))
            t, beta, ref = best[(name, key, seed)]
            grid = GradTrace(Geometric(t / g0, beta))
            for label, rule in zip(out, (grid, LengthGeometric(t, beta),
                                         LengthGeometric(t, beta, fixed=True)), strict=True):
                hit = first_at(run_rule(prob, x0, key, rule, epochs, seed), 1e-10)
                out[label].append("-" if hit is None else f"{hit[0] / ref:.2f}")
            if not growth:
                g = np.asarray(grid.g) / g0
                growth = " ".join(f"{v:.2f}" for v in g[np.linspace(0, g.size - 1, 8)
                                                         .astype(int)])
        print(f"{cell}: " + "; ".join(f"{k} {' '.join(v)}" for k, v in out.items())
              + f"; seed {seeds[0]}, running g_k / ||grad f(X_0)|| along the best grid "
              f"point's run: {growth}", flush=True)


def sweep_decays(grid_csv: str) -> dict:
    """(problem, method) -> (betas per epoch, the same as decays per sweep) of each seed's
    best grid point. A sweep is binom(l, 2) iterations (every block pair once; one
    iteration for RSM), an epoch l/2 (`rssm.blocks.epoch_iterations`), so a decay beta per
    epoch is beta^(binom(l, 2) / (l/2)) = beta^(l-1) per sweep."""
    from benchmarks.stepsizes import _method, best_grid_points

    out: dict = {}
    for (name, method, _seed), (_t, beta, _its) in sorted(best_grid_points(grid_csv).items()):
        ell = _method(method)[1]
        power = pair_count(ell) / epoch_iterations(ell)
        per_epoch, per_sweep = out.setdefault((name, method), ([], []))
        per_epoch.append(beta)
        per_sweep.append(beta**power)
    return out


def per_sweep(grid_csv: str, problems=("dpcp", "odl", "l1_procrustes")) -> None:
    """Print `sweep_decays` for ``problems``: the range over the seeds."""
    for (name, method), (ep, sw) in sweep_decays(grid_csv).items():
        if name in problems:
            print(f"{name} {method}: best beta per epoch {min(ep):.2f}-{max(ep):.2f}, "
                  f"per sweep {min(sw):.2f}-{max(sw):.2f} ({len(ep)} seeds)", flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.step_signals",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--signals", action="store_true", help="print the signals instead")
    ap.add_argument("--polyak-level", action="store_true",
                    help="Polyak's step with f* given, instead")
    ap.add_argument("--scale", action="store_true",
                    help="the best grid point over three normalizations, instead")
    ap.add_argument("--per-sweep", action="store_true",
                    help="the best grid points' decays per sweep of the block pairs, instead")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--first-seed", type=int, default=1,
                    help="seeds first..first + seeds - 1 (beyond 5 the grid CSV has no "
                         "best point: iterations only, 'n/a' ratios)")
    ap.add_argument("--candidates", nargs="*", default=list(CANDIDATES),
                    choices=list(CANDIDATES))
    ap.add_argument("--cells", nargs="*", default=list(CELLS))
    ap.add_argument("--grid-csv", default="benchmarks/results/stepsizes/stepsizes.csv")
    ap.add_argument("--default-calls", action="store_true",
                    help="the default RSSM call beside the success rule, instead")
    ap.add_argument("--shares", action="store_true",
                    help="where the subgradient lies (rotations between blocks), instead")
    ap.add_argument("--warm", nargs="*", type=float, default=None, metavar="NOISE",
                    help="from warm starts (a default solution plus noise of these "
                         "relative sizes) instead: how each run ends")
    args = ap.parse_args(argv)
    if not os.path.exists(args.grid_csv):
        print(f"no grid CSV at {args.grid_csv}: run python -m benchmarks.stepsizes first")
        return 1
    if args.default_calls:
        default_calls()
    elif args.shares:
        shares()
    elif args.warm is not None:
        warm(args.candidates, args.cells, list(range(1, args.seeds + 1)),
             args.warm or [1e-3, 1e-2, 1e-1])
    elif args.per_sweep:
        per_sweep(args.grid_csv)
    elif args.signals:
        signals(args.grid_csv)
    elif args.scale:
        scale(args.cells, list(range(1, args.seeds + 1)), args.grid_csv)
    elif args.polyak_level:
        cells = args.cells if args.cells != list(CELLS) else [
            f"{p}:{m}" for p in ("dpcp", "odl", "l1_procrustes")
            for m in ("rsm", "rssm-l3", "rssm-l5")]
        polyak_level(cells, list(range(1, args.seeds + 1)), args.grid_csv)
    else:
        compare(args.candidates, args.cells,
                list(range(args.first_seed, args.first_seed + args.seeds)), args.grid_csv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
