"""One loop shared by every solver. A solver only defines `Solver.step`.

The loop times the steps alone: recording the trace, evaluating the ground-truth error,
checking criteria that need them and calling the user's callback happen outside the
timed region.
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
from rssm.stepsizes import StepContext, StepSize
from rssm.stopping import Progress, StoppingCriterion, StopReason
from rssm.threads import ThreadGovernor
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
    """A solver holds the working iterate ``x`` and an `Oracle` bound to it."""

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

    @property
    def n_blocks(self) -> int:
        return 1 if self.partition is None else self.partition.n_blocks

    @abc.abstractmethod
    def step(self, gamma: float) -> float:
        """Do one iteration with step size ``gamma`` and return its flop-model count.

        Must leave ``self.x`` unchanged and raise `NonFiniteStep` when the new values are
        not finite.
        """


def _commit_check(new: np.ndarray) -> None:
    if not np.isfinite(new).all():
        raise NonFiniteStep("the step produced non-finite values")


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
    threads: str | int | None = "auto",
) -> Result:
    """Run ``solver`` until ``stop`` fires; return a `Result`.

    ``threads`` sets the BLAS/OpenMP pools during the run (`rssm.threads`)."""
    with ThreadGovernor(threads) as governor:
        result = _run(solver, stepsize, stop, record_every, governor, seed=seed,
                      selection=selection)
    result.threads = governor.describe()
    return result


def _run(
    solver: Solver,
    stepsize: StepSize,
    stop: StoppingCriterion,
    record_every: int,
    governor: ThreadGovernor,
    *,
    seed: Any = None,
    selection: str | None = None,
) -> Result:
    problem = solver.problem
    oracle = solver.oracle
    ctx = StepContext(solver.method, solver.n_blocks)
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
        trace.append(k, t_solver, flops, cost, err)
        view = solver.x.view()
        view.flags.writeable = False
        return Progress(k, t_solver, flops, cost, err if has_err else None, view)

    try:
        prog = record()
        if not math.isfinite(prog.cost):
            reason, message = StopReason.NON_FINITE, "f(x0) is not finite"
        else:
            reason = stop.check(prog)
        perf = time.perf_counter
        while reason is None:
            governor.before_step(k)
            t0 = perf()
            try:
                gamma = stepsize(k, ctx)
            except (OverflowError, ZeroDivisionError) as exc:
                raise ValueError(
                    f"stepsize could not compute gamma_{k}: {type(exc).__name__}: {exc}"
                ) from exc
            if not (isinstance(gamma, float) or isinstance(gamma, (int, np.floating))) or not (
                math.isfinite(gamma) and gamma > 0
            ):
                raise ValueError(
                    f"stepsize returned gamma_{k} = {describe(gamma)}; it must be a finite "
                    "number > 0"
                )
            try:
                f = solver.step(float(gamma))
            except (NonFiniteStep, np.linalg.LinAlgError) as exc:
                # A non-finite subgradient or an overflowing step (gamma too large) makes
                # the polar factorization see NaN/Inf; LAPACK then fails to converge. The
                # step has not written to x, so x is the last finite iterate.
                t_solver += perf() - t0
                what = (
                    "non-finite values" if isinstance(exc, NonFiniteStep)
                    else f"a LAPACK failure ({exc})"
                )
                reason, message = StopReason.NON_FINITE, (
                    f"iteration {k}: the step produced {what}: the subgradient is not finite or "
                    f"the step size {float(gamma):.3g} overflows; returning the last finite iterate"
                )
                break
            dt = perf() - t0
            t_solver += dt
            governor.after_step(k, dt)
            flops += f
            k += 1
            if k % record_every == 0:
                prog = record()
                if not math.isfinite(prog.cost):
                    reason, message = StopReason.NON_FINITE, f"f(x) is not finite at iteration {k}"
                    break
            else:
                prog = Progress(k, t_solver, flops)
            reason = stop.check(prog)
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
    )
