"""One loop shared by every solver. A solver only defines `Solver.step`.

The loop times the steps alone: recording the trace, evaluating the ground-truth error,
checking criteria that need them and calling the user's callback happen outside the
timed region.

Paper labels (``eq-...``, ``alg-...``) are those of the LaTeX source of A. Y.-M. Cheung,
J. Wang, M.-C. Yue, A. M.-C. So, "Randomized Submanifold Subgradient Method for
Optimization over Stiefel Manifolds", arXiv:2409.01770; here ``eq-Rsubdiff`` = eq. (3)
(table: docs/paper-map.md).
"""

from __future__ import annotations

import abc
import math
import time
from typing import Any

import numpy as np

from rssm import stiefel
from rssm._validation import describe
from rssm.blocks import PairSelector, Partition
from rssm.problem import Oracle, Problem
from rssm.stepsizes import StepContext, StepSize, StepStall
from rssm.stopping import Progress, StoppingCriterion, StopReason
from rssm.threads import RunThreads
from rssm.trace import Result, Trace

__all__ = ["Solver", "NonFiniteStep", "polar_flops", "run"]


class NonFiniteStep(ArithmeticError):
    """Raised by a step whose result is not finite; the iterate is left unchanged."""


def polar_flops(n: int, k: int) -> float:
    """Flop model of `rssm.stiefel.polar` on n x k by the Gram route: Gram 2nk^2,
    eigh ~9k^3, V diag V^T 2k^3, Xi B 2nk^2. Near the manifold `polar` takes 2-4
    Newton-Schulz steps instead (4nk^2 each, 8-16 nk^2 in all), which the model leaves at
    the same count: at the solvers' sizes both are a few percent of an iteration."""
    return 4.0 * n * k * k + 11.0 * k**3


class Solver(abc.ABC):
    """A solver holds the working iterate ``x`` and an `Oracle` bound to it.

    An iteration has two halves, so that a step-size rule can see the step's direction
    before it chooses gamma (`rssm.stepsizes.StepContext`):

    * `direction` draws what the iteration updates (RSSM: a block pair) and computes the
      (partial) Riemannian subgradient there; it returns its squared norm and the
      unbiased estimate of ||grad f(X)||^2 the rules use;
    * `apply` moves ``x`` along it with step size gamma and updates the oracle's cache.

    `trial` evaluates f at the point a given gamma would give without committing to it
    (for line searches); `step` does both halves with a given gamma.
    """

    method: str = "base"

    def __init__(self, problem: Problem, x0: np.ndarray, partition: Partition | None,
                 selector: PairSelector | None, rng: np.random.Generator):
        self.problem = problem
        self.x = np.array(x0, dtype=np.float64, order="C", copy=True)
        self.partition = partition
        self.selector = selector
        self.rng = rng
        if selector is not None and partition is not None:
            selector.bind(partition.n_blocks, rng)
        self.oracle: Oracle = problem.make_oracle(self.x, partition)
        #: ||X_{k+1} - X_k||_F of the last applied step (NaN before the first).
        self.step_norm = math.nan
        self._pending: tuple | None = None     # (cols or None, selector, -direction, |C|)
        self._dir_flops = 0.0
        self._extra_flops = 0.0                # trials that were not kept
        self._tentative: tuple | None = None   # (gamma, old columns) of a trial left in x

    @property
    def n_blocks(self) -> int:
        return 1 if self.partition is None else self.partition.n_blocks

    @abc.abstractmethod
    def direction(self) -> tuple[float, float]:
        """Compute this iteration's direction; return (||P(G_C)||_F^2, grad_sq), grad_sq an
        unbiased estimate of ||grad f(X)||^2 (see `rssm.stepsizes.StepContext.grad_sq`)."""

    @abc.abstractmethod
    def _candidate(self, gamma: float) -> np.ndarray:
        """The new values of the pending columns for step size ``gamma`` (x unchanged)."""

    @abc.abstractmethod
    def _apply_flops(self) -> float:
        """Flop model of one `_candidate` plus the cache update that follows it."""

    def _write(self, values: np.ndarray) -> None:
        cols, sel = self._pending[:2]
        self.x[:, sel] = values
        self.oracle.update(cols)

    def _move(self, gamma: float) -> np.ndarray:
        """Write the candidate of ``gamma`` into x (and the cache); return the old values."""
        new = self._candidate(gamma)
        _commit_check(new)
        sel = self._pending[1]
        old = self.x[:, sel].copy()
        self._write(new)
        return old

    def _undo_tentative(self) -> None:
        if self._tentative is not None:
            _, old = self._tentative
            self._tentative = None
            self._write(old)
            self._extra_flops += self.oracle.flops_update(self._pending[3])

    def trial(self, gamma: float) -> float:
        """f at the point of step size ``gamma``; x is left there until `apply` (which keeps
        it when given the same gamma, and undoes it otherwise)."""
        if self._tentative is not None and self._tentative[0] == gamma:
            return float(self.oracle.cost())
        self._undo_tentative()
        try:
            old = self._move(gamma)
        except (NonFiniteStep, np.linalg.LinAlgError):
            return math.inf   # no usable point at this step size; x is unchanged
        self._tentative = (gamma, old)
        self._extra_flops += self._apply_flops()
        return float(self.oracle.cost())

    def apply(self, gamma: float) -> float:
        """Take the pending direction's step with size ``gamma``; return the iteration's
        flop-model count. Leaves ``x`` unchanged and raises `NonFiniteStep` when the new
        values are not finite."""
        if self._tentative is not None and self._tentative[0] == gamma:
            old = self._tentative[1]
            self._tentative = None
            self._extra_flops -= self._apply_flops()   # counted once, below
        else:
            self._undo_tentative()
            old = self._move(gamma)
        diff = self.x[:, self._pending[1]] - old
        self.step_norm = float(np.sqrt(np.vdot(diff, diff)))
        flops = self._dir_flops + self._apply_flops() + self._extra_flops
        self._extra_flops = 0.0
        self._pending = None
        return flops

    def step(self, gamma: float) -> float:
        """Do one iteration with step size ``gamma`` and return its flop-model count.

        Leaves ``self.x`` unchanged and raises `NonFiniteStep` when the new values are
        not finite.
        """
        self.direction()
        return self.apply(gamma)


def _commit_check(new: np.ndarray) -> None:
    if not np.isfinite(new).all():
        raise NonFiniteStep("the step produced non-finite values")


def _ask(stepsize: StepSize, k: int, ctx: StepContext) -> tuple[float, str | None]:
    """gamma_k from the rule, checked: (gamma, None), or (nan, why the run stalls).

    Before the first step a failing rule is a bad argument and raises; from iteration 1
    on, the run is kept: a rule that raises or returns anything but a finite number > 0
    stalls it (`StopReason.STALLED`) with a message that says what happened.
    """
    try:
        gamma = stepsize(k, ctx)
    except StepStall as exc:
        return math.nan, f"iteration {k}: {exc}"
    except Exception as exc:
        if k == 0:
            if isinstance(exc, (OverflowError, ZeroDivisionError)):
                raise ValueError(
                    f"stepsize could not compute gamma_{k}: {type(exc).__name__}: {exc}"
                ) from exc
            raise
        return math.nan, (
            f"iteration {k}: the step-size rule raised {type(exc).__name__}: {exc}; "
            "returning the last iterate"
        )
    # Any real number is accepted (Python or NumPy, a 0-d real array included); bool,
    # complex, strings and arrays with more than one entry are refused.
    ok = (
        not isinstance(gamma, (bool, np.bool_))
        and isinstance(gamma, (int, float, np.integer, np.floating, np.ndarray))
        and np.ndim(gamma) == 0
        and np.asarray(gamma).dtype.kind in "iuf"
    )
    value = float(gamma) if ok else math.nan
    if ok and math.isfinite(value) and value > 0:
        return value, None
    if k == 0:
        raise ValueError(
            f"stepsize returned gamma_{k} = {describe(gamma)}; it must be a finite real "
            "number > 0 (int, float or a NumPy real scalar)"
        )
    if ok and value == 0:
        why = f"the step size gamma_{k} is 0 (a decaying rule underflowed)"
    else:
        why = f"the step-size rule returned gamma_{k} = {describe(gamma)}, not a finite number > 0"
    return math.nan, f"iteration {k}: {why}; returning the last iterate"


def _stationarity(oracle: Oracle, x: np.ndarray) -> float:
    """||P_T(G)||_F for the oracle's full subgradient G at x (eq. ``eq-Rsubdiff``): one
    full subgradient per recording point, off the clock; NaN if it is not finite."""
    with np.errstate(all="ignore"):
        g = np.asarray(oracle.subgradient(), dtype=np.float64)
        val = float(np.linalg.norm(stiefel.tangent_projection(x, g)))
    return val if math.isfinite(val) else math.nan


def _interrupted(k: int) -> str:
    return f"interrupted by the user after {k} iterations"


def run(
    solver: Solver,
    stepsize: StepSize,
    stop: StoppingCriterion,
    record_every: int,
    *,
    seed: Any = None,
    selection: str | None = None,
    stationarity: bool = True,
    threads: str | int | None = "auto",
) -> Result:
    """Run ``solver`` until ``stop`` fires; return a `Result`. With ``stationarity`` each
    recording point also records ||P_T(G)||_F (off the clock); ``threads`` sets the
    BLAS/OpenMP pools during the run (`rssm.threads`)."""
    with RunThreads(threads) as rt:
        result = _run(solver, stepsize, stop, record_every, seed=seed,
                      selection=selection, stationarity=stationarity)
    result.threads = rt.describe()
    return result


def _run(
    solver: Solver,
    stepsize: StepSize,
    stop: StoppingCriterion,
    record_every: int,
    *,
    seed: Any = None,
    selection: str | None = None,
    stationarity: bool = True,
) -> Result:
    problem = solver.problem
    oracle = solver.oracle
    ctx = StepContext(solver.method, solver.n_blocks, solver.x.shape)
    trace = Trace()
    has_err = problem.has_error
    k = 0
    t_solver = 0.0
    flops = 0.0
    reason: StopReason | None = None
    message = ""

    def record() -> Progress:
        cost = oracle.cost()
        err = float(problem.error(solver.x)) if has_err else math.nan
        stat = _stationarity(oracle, solver.x) if stationarity else math.nan
        trace.append(k, t_solver, flops, cost, err, stat)
        # A snapshot, not a view of the working iterate (which later steps overwrite in
        # place): one n x p copy per recording point, outside the timed region.
        snap = solver.x.copy()
        snap.flags.writeable = False
        return Progress(k, t_solver, flops, cost, err if has_err else None, snap,
                        stationarity=None if math.isnan(stat) else stat,
                        step_norm=None if k == 0 else solver.step_norm)

    try:
        prog = record()
        if not math.isfinite(prog.cost):
            reason, message = StopReason.NON_FINITE, "f(x0) is not finite"
            stop.final(prog)  # callbacks see this row too
        else:
            reason = stop.check(prog)
        perf = time.perf_counter
        stepsize.reset()
        ctx._cost_fn = oracle.cost
        ctx._trial_fn = solver.trial
        # Iterations in a row that left x unchanged before the run counts as stalled: one
        # for RSM; for RSSM twice the number of pairs (another pair may still move).
        still_limit = 1 if solver.method != "rssm" else 2 * max(1, ctx.n_pairs)
        n_still = 0
        while reason is None:
            t0 = perf()
            norm_sq, grad_sq = solver.direction()
            if not (math.isfinite(norm_sq) and math.isfinite(grad_sq)):
                t_solver += perf() - t0
                solver._pending = None
                reason, message = StopReason.NON_FINITE, (
                    f"iteration {k}: the subgradient is not finite; returning the last "
                    "finite iterate"
                )
                break
            if norm_sq == 0.0:
                # 0 is in the (partial) Riemannian subdifferential the oracle returned: no
                # step size moves x. Count the iteration and draw again (RSSM) or stop.
                flops += solver._dir_flops
                solver._pending = None
                solver.step_norm = 0.0
                gamma = None
            else:
                ctx._begin(k, math.sqrt(norm_sq), grad_sq)
                gamma, stall = _ask(stepsize, k, ctx)
                if stall is not None:
                    t_solver += perf() - t0
                    solver._undo_tentative()
                    solver._pending = None
                    reason, message = StopReason.STALLED, stall
                    break
                try:
                    f = solver.apply(gamma)
                except (NonFiniteStep, np.linalg.LinAlgError) as exc:
                    # A non-finite subgradient or an overflowing step (gamma too large) makes
                    # the polar factorization see NaN/Inf; LAPACK then fails to converge.
                    # The step has not written to x, so x is the last finite iterate.
                    t_solver += perf() - t0
                    solver._undo_tentative()
                    solver._pending = None
                    what = (
                        "non-finite values" if isinstance(exc, NonFiniteStep)
                        else f"a LAPACK failure ({exc})"
                    )
                    reason, message = StopReason.NON_FINITE, (
                        f"iteration {k}: the step produced {what}: the subgradient is not "
                        f"finite or the step size {gamma:.3g} overflows; returning the last "
                        "finite iterate"
                    )
                    break
                flops += f
                ctx.previous_gamma = gamma
            dt = perf() - t0
            t_solver += dt
            k += 1
            n_still = n_still + 1 if solver.step_norm == 0.0 else 0
            if k % record_every == 0:
                prog = record()
                if not math.isfinite(prog.cost):
                    reason, message = StopReason.NON_FINITE, f"f(x) is not finite at iteration {k}"
                    stop.final(prog)  # the last row of the trace: callbacks see it too
                    break
            else:
                prog = Progress(k, t_solver, flops, step_norm=solver.step_norm)
            reason = stop.check(prog)
            if reason is None and n_still >= still_limit:
                reason = StopReason.STALLED
                message = (
                    f"iteration {k}: the last {n_still} iteration(s) left X unchanged ("
                    + ("the Riemannian subgradient is 0" if gamma is None else
                       f"step size {gamma:.3g} too small to change X")
                    + "); X is returned as it is"
                )
    except KeyboardInterrupt:
        reason, message = StopReason.INTERRUPTED, _interrupted(k)
        # The interrupt may have landed between a step's write to x and the oracle's cache
        # update: recompute the caches and the last trace row, so the reported cost and
        # error are those of the returned x (which then holds that step as well).
        oracle.refresh()
        if trace.last_iteration == k:
            trace.drop_last()
    if not message:
        message = {
            StopReason.MAX_ITER: f"reached the iteration limit ({k})",
            StopReason.MAX_TIME: f"reached the time limit after {k} iterations",
            StopReason.TARGET_ERROR: f"error reached the target after {k} iterations",
            StopReason.CALLBACK: f"the callback asked to stop after {k} iterations",
            StopReason.STATIONARY: f"||P_T(G)||_F reached the tolerance after {k} iterations",
            StopReason.NO_PROGRESS: f"the best cost stopped decreasing (after {k} iterations)",
            StopReason.MIN_STEP: (
                f"the step ||X_k+1 - X_k||_F = {solver.step_norm:.3g} fell below the minimum "
                f"after {k} iterations"
            ),
        }.get(reason, str(reason))
    if trace.last_iteration != k:
        # The run ended between recording points (time or iteration limit, a non-finite
        # step): record the returned iterate, and let callbacks see that last row too,
        # except after a user interrupt (no user code runs after Ctrl-C).
        prog = record()
        if reason is not StopReason.INTERRUPTED:
            try:
                stop.final(prog)
            except KeyboardInterrupt:
                reason = StopReason.INTERRUPTED
                message = _interrupted(k)
    tr = trace.as_dict()
    return Result(
        x=solver.x.copy(),
        fun=float(tr["cost"][-1]),
        n_iter=k,
        time=t_solver,
        flops=flops,
        stop_reason=reason,
        trace=tr,
        error=float(tr["error"][-1]),
        feasibility=stiefel.feasibility(solver.x),
        method=solver.method,
        n_blocks=solver.n_blocks,
        selection=selection,
        stepsize=stepsize.describe(),
        seed=seed,
        partition=None if solver.partition is None else [b.copy() for b in solver.partition.blocks],
        message=message,
        stationarity=float(tr["stationarity"][-1]),
    )
