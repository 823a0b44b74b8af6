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

import numpy as np

from rssm._validation import as_positive_float
from rssm.stepcontext import StepContext

#: Largest exponent parameter ``a`` PaperSchedule accepts; the paper uses 2 and 4, and
#: binom(l, 2)^(a - 1) leaves float64 for a of a few hundred already at l = 10.
_MAX_A = 100.0
_LOG_MAX = math.log(np.finfo(np.float64).max)

__all__ = [
    "StepContext",
    "StepSize",
    "StepStall",
    "PaperSchedule",
    "Geometric",
    "Constant",
    "InverseSqrt",
    "Polyak",
    "PolyakLevel",
    "PolyakBest",
    "AdaptiveGeometric",
    "Backtracking",
    "Auto",
    "make_auto",
]


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


# -- adaptive rules -----------------------------------------------------------------------
#
# Every rule below reads f(X_k) and the norm of the step's direction from the StepContext
# and uses them only through scale-free ratios: gap / ||g||^2, where both the gap (a
# difference of costs) and ||g|| scale with f. Multiplying f by c > 0 then multiplies
# every direction by c and every gamma by 1/c, so the iterates do not change (to rounding).
# Their only constants are lengths on the manifold (St(n, p) has diameter ~ 2 sqrt(p)).


def _grad_sq(ctx: StepContext) -> float:
    g2 = ctx.grad_sq
    if not (math.isfinite(g2) and g2 > 0):
        raise StepStall(f"the step direction has squared norm {g2!r}; no step size helps")
    return g2


class _GradMean:
    """Mean of the last w unbiased estimates ctx.grad_sq of ||grad f||^2 (w = binom(l, 2)
    for RSSM, so one window sees every pair once on average; w = 1 for RSM)."""

    def __init__(self) -> None:
        self.buf: list[float] = []
        self.total = 0.0

    def __call__(self, ctx: StepContext) -> float:
        g2 = _grad_sq(ctx)
        w = ctx.n_pairs
        self.buf.append(g2)
        self.total += g2
        if len(self.buf) > w:
            self.total -= self.buf.pop(0)
        return max(self.total / len(self.buf), 1e-300)


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

    Raises `StepStall` (the run ends with ``stalled``) once f(X_k) <= f*.
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
        self._mean = _GradMean()

    def __call__(self, k: int, ctx: StepContext) -> float:
        gap = ctx.cost - self.f_star
        g2 = self._mean(ctx) if self.estimate == "mean" else _grad_sq(ctx)
        if not gap > 0:
            raise StepStall(
                f"Polyak: f(X_{k}) - f_star = {gap:.3g} <= 0: X is optimal to rounding "
                "(or f_star is too large)"
            )
        return self.scale * gap / g2


def _length(t0: float | None, ctx: StepContext) -> float:
    """The first step's length: ``t0``, or sqrt(p) = ||X||_F when None (a step as long as
    the iterate itself: the scale of St(n, p), which needs no knowledge of f)."""
    if t0 is not None:
        return t0
    p = ctx.shape[1] if ctx.shape is not None else 1
    return math.sqrt(p)


def _t0(value) -> float | None:
    return None if value is None else as_positive_float(value, "t0")


class _Adaptive(StepSize):
    """Shared state of the tuning-free rules: f_best and the averaged ||grad f||^2."""

    def reset(self) -> None:
        self._mean = _GradMean()
        self._f_best = math.inf
        self._started = False

    def _observe(self, ctx: StepContext) -> tuple[float, float]:
        f = ctx.cost
        if not math.isfinite(f):
            raise StepStall(f"f(X_{ctx.iteration}) = {f} is not finite")
        self._f_best = min(self._f_best, f)
        return f, self._mean(ctx)


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
        self.t0 = _t0(t0)
        self.grow = as_positive_float(grow, "grow")
        if self.grow < 1:
            raise ValueError(f"grow must be >= 1, got {grow}")
        self.patience = as_positive_float(patience, "patience")
        self.reset()

    def __call__(self, k: int, ctx: StepContext) -> float:
        f, g2 = self._observe(ctx)
        if not self._started:
            self._started = True
            self._delta = _length(self.t0, ctx) * math.sqrt(g2)
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
        return (f - self._f_rec + self._delta) / g2


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
        self.t0 = _t0(t0)
        self.reset()

    def __call__(self, k: int, ctx: StepContext) -> float:
        f, g2 = self._observe(ctx)
        if not self._started:
            self._started = True
            self._delta0 = _length(self.t0, ctx) * math.sqrt(g2)
        delta = self._delta0 / (1.0 + k / ctx.epoch)
        return (f - self._f_best + delta) / g2


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
        self.t0 = _t0(t0)
        self.shrink = as_positive_float(shrink, "shrink", upper=1.0, upper_inclusive=False)
        self.window = as_positive_float(window, "window")
        self.grow = as_positive_float(grow, "grow")
        self.reset()

    def _floor_length(self, k: int, ctx: StepContext, f: float) -> float:
        if not self._started:
            self._started = True
            self._t = _length(self.t0, ctx)
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
        return self._floor_length(k, ctx, f) / math.sqrt(g2)


class Backtracking(_Adaptive):
    """Armijo backtracking on the drawn block: try gamma = ``grow`` times the last accepted
    step and halve it until f(X_trial) <= f(X_k) - ``c`` gamma ||P(G_C)||^2, at most
    ``max_trials`` times (the last trial is then taken). A trial costs one retraction
    and one cache update (`StepContext.trial`). The first trial step is ``t0`` long.

    On nonsmooth problems the sufficient-decrease test can fail for every gamma (the
    negative subgradient need not be a descent direction), and the steps then shrink
    towards 0: that is how Pymanopt's Armijo search stalls on ODL. `Auto` adds a floor.
    """

    def __init__(self, t0: float | None = None, c: float = 1e-4, grow: float = 2.0,
                 max_trials: int = 30):
        self.t0 = _t0(t0)
        self.c = as_positive_float(c, "c", upper=1.0, upper_inclusive=False)
        self.grow = as_positive_float(grow, "grow")
        if not isinstance(max_trials, int) or max_trials < 1:
            raise ValueError(f"max_trials must be an int >= 1, got {max_trials!r}")
        self.max_trials = max_trials
        self.reset()

    def reset(self) -> None:
        super().reset()
        self._gamma: float | None = None

    def __call__(self, k: int, ctx: StepContext) -> float:
        f = ctx.cost
        d2 = ctx.direction_norm**2
        if self._gamma is None:
            gamma = _length(self.t0, ctx) / ctx.direction_norm
        else:
            gamma = self._gamma * self.grow
        for _ in range(self.max_trials - 1):
            if ctx.trial(gamma) <= f - self.c * gamma * d2:
                break
            gamma *= 0.5
        self._gamma = gamma
        return gamma


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
        self.t0 = _t0(t0)
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
            gamma = _length(self.t0, ctx) / g
            d2 = ctx.direction_norm**2
            for _ in range(self.patience):
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
        self._f_prev = f
        return gamma


def make_auto() -> StepSize:
    """A fresh `Auto` rule (what ``stepsize="auto"`` and ``stepsize=None`` mean)."""
    return Auto()


def as_stepsize(value, name: str = "stepsize") -> StepSize:
    """Accept a `StepSize`, a callable ``(k, ctx) -> float``, a positive number (constant)
    or ``"auto"`` (a fresh `Auto`)."""
    if isinstance(value, StepSize):
        return value
    if isinstance(value, str) and value == "auto":
        return make_auto()
    if isinstance(value, bool):
        raise TypeError(
            f"{name} must be a StepSize, a callable (k, ctx) -> float, a positive number "
            "or 'auto'"
        )
    if isinstance(value, (int, float)):
        return Constant(value)
    if callable(value):
        return _CallableStep(value)
    raise TypeError(
        f"{name} must be a StepSize, a callable (k, ctx) -> float, a positive number or "
        f"'auto', got {type(value).__name__}"
        + (f" {value!r}" if isinstance(value, str) else "")
    )


class _CallableStep(StepSize):
    def __init__(self, fn):
        self._fn = fn

    def __call__(self, k: int, ctx: StepContext) -> float:
        return self._fn(k, ctx)

    def describe(self) -> dict:
        return {"rule": getattr(self._fn, "__name__", "callable")}
