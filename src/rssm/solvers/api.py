"""`minimize`: validate the arguments, build the solver, run the shared loop."""

from __future__ import annotations

import inspect
import numbers
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from rssm._validation import as_int, as_positive_float, describe, make_rng
from rssm.blocks import PairSelector, Partition, make_selector
from rssm.problem import Problem
from rssm.solvers.base import run
from rssm.solvers.rsm import RSMSolver
from rssm.solvers.rssm import RSSMSolver
from rssm.stepsizes import StepSize, as_stepsize
from rssm.stopping import (
    AnyOf,
    CallbackStop,
    MaxIterations,
    MaxTime,
    Progress,
    StoppingCriterion,
    TargetError,
)
from rssm.trace import Result

__all__ = ["minimize", "METHODS"]

#: Method names accepted by `minimize`.
METHODS = {"rssm": RSSMSolver, "rsm": RSMSolver}

#: Iteration limit used when no iteration, time or custom limit is given.
DEFAULT_MAX_ITER = 1000


def minimize(
    problem: Problem,
    x0: np.ndarray | None = None,
    method: str = "rssm",
    n_blocks: int = 5,
    stepsize: StepSize | Callable | float | str | None = None,
    max_iter: int | None = None,
    max_time: float | None = None,
    target_error: float | None = None,
    seed: int | np.random.Generator | None = None,
    record_every: int | None = None,
    callback: Callable[[Progress], Any] | None = None,
    *,
    partition: Partition | Sequence[Sequence[int]] | None = None,
    selection: str | PairSelector = "uniform",
    stop: StoppingCriterion | None = None,
    atol: float = 1e-8,
) -> Result:
    """Minimize a weakly convex ``problem`` over St(n, p) with RSSM or RSM.

    Parameters
    ----------
    problem : Problem
        The objective (e.g. `rssm.problems.DPCP`, `rssm.problems.ODL`, or your own).
    x0 : ndarray, shape (n, p), optional
        Start on St(n, p) (checked to ``atol``). Default: ``problem.initial_point(child)``
        with ``child`` a generator spawned from ``seed`` (an independent stream).
    method : {"rssm", "rsm"}
        RSSM (Algorithm ``alg-RSSM``) or the Riemannian subgradient method.
    n_blocks : int
        RSSM's number of blocks l, 2 <= l <= p; the columns are split into contiguous
        blocks whose sizes differ by at most one. Ignored by RSM and when ``partition``
        is given.
    stepsize : StepSize, callable, float or "auto", optional
        Rule ``(k, ctx) -> gamma_k`` (see `rssm.stepsizes.StepContext` for what ``ctx``
        offers); a number means a constant step; ``"auto"`` is `rssm.stepsizes.Auto`, which
        needs no tuning and no problem constant (docs/stepsizes.md). Default: the rule a
        custom problem was built with (``Problem.from_functions(..., stepsize=)``), else
        ``"auto"``. The paper's schedule is `rssm.stepsizes.PaperSchedule`.
    max_iter : int, optional
        Iteration limit. When neither ``max_iter``, ``max_time`` nor ``stop`` is given, 1000.
    max_time : float, optional
        Solver-time limit in seconds (recording excluded).
    target_error : float, optional
        Stop once ``problem.error(X) <= target_error`` (checked at recording points).
    seed : int, numpy.random.Generator or None
        Randomness of the block selection (and of the start, when ``x0`` is None).
        The same seed gives the same result, bit for bit, for a fixed BLAS thread count.
    record_every : int, optional
        Record cost, error, time and flops every this many iterations (also at the start
        and end). Default: max(1, max_iter // 200), or 10 without an iteration limit.
    callback : callable, optional
        ``callback(progress)`` at each recording point with a `rssm.stopping.Progress`
        (iteration, time, flops, cost, error, read-only x); return True to stop. It sees
        every row of the trace, the last one included (also when a time or iteration limit
        ends the run between recording points), except after a KeyboardInterrupt.
    partition : Partition or sequence of index sequences, optional
        A user partition of the columns (blocks may differ in size); overrides ``n_blocks``.
    selection : {"uniform", "cyclic", "shuffled"} or PairSelector
        Block-pair rule; "uniform" is the paper's.
    stop : StoppingCriterion, optional
        Further criterion, combined with the others by "any".
    atol : float
        Tolerance on ||x0^T x0 - I||_max.

    Returns
    -------
    Result
        Final point, cost, iterations, time, flops, stop reason and trace. A
        KeyboardInterrupt during the run returns the Result so far with stop reason
        ``interrupted``; a non-finite step returns the last finite iterate with
        ``non_finite``; from iteration 1 on, a step size that underflows to 0, a step rule
        that fails, or steps that leave X unchanged return the Result with ``stalled``.
    """
    if not isinstance(problem, Problem):
        raise TypeError(
            "problem must be an rssm Problem (e.g. rssm.problems.DPCP), "
            f"got {type(problem).__name__}"
        )
    if not isinstance(method, str) or method.lower() not in METHODS:
        raise ValueError(f"method must be one of {sorted(METHODS)}, got {describe(method)}")
    method = method.lower()
    rng = make_rng(seed)
    n, p = problem.shape
    atol = as_positive_float(atol, "atol")

    if x0 is None:
        # The start draws from a child stream of the seed, not the seed's own stream: an
        # instance built with the same seed (e.g. ODL.synthetic(seed=s), which draws its
        # ground truth X* first) must not hand X* to the solver as its Haar start.
        x = problem.initial_point(rng.spawn(1)[0])
    else:
        x = x0
    x = problem.check_x(x, "x0", atol=atol)

    part: Partition | None = None
    selector: PairSelector | None = None
    sel_name: str | None = None
    if method == "rssm":
        if partition is not None:
            part = partition if isinstance(partition, Partition) else Partition(partition, p)
            if part.p != p:
                raise ValueError(f"partition covers {part.p} columns but the problem has p={p}")
        else:
            nb = as_int(n_blocks, "n_blocks")
            if p < 2:
                raise ValueError(
                    f"RSSM needs p >= 2 columns to form 2 blocks, got p={p}; use method='rsm'"
                )
            if not 2 <= nb <= p:
                raise ValueError(f"n_blocks must satisfy 2 <= n_blocks <= p = {p}, got {nb}")
            part = Partition.uniform(p, nb)
        selector = make_selector(selection)
        sel_name = selector.name

    if stepsize is None:
        # The problem's own rule when it was given one (Problem.from_functions(stepsize=),
        # CompositeProblem(stepsize=)); else the tuning-free rule.
        stepsize = problem.default_stepsize()
        if stepsize is None:
            stepsize = "auto"
    rule = _check_stepsize(stepsize)

    criteria: list[StoppingCriterion] = []
    if max_iter is not None:
        criteria.append(MaxIterations(as_int(max_iter, "max_iter", minimum=0)))
    if max_time is not None:
        criteria.append(MaxTime(as_positive_float(max_time, "max_time")))
    if max_iter is None and max_time is None and stop is None:
        max_iter = DEFAULT_MAX_ITER
        criteria.append(MaxIterations(max_iter))
    if target_error is not None:
        te = as_positive_float(target_error, "target_error")
        if not problem.has_error:
            raise ValueError(
                f"target_error needs a ground truth, but this {type(problem).__name__} has none"
            )
        criteria.append(TargetError(te))
    if callback is not None:
        criteria.append(CallbackStop(callback))
    if stop is not None:
        if not isinstance(stop, StoppingCriterion):
            raise TypeError(f"stop must be a StoppingCriterion, got {type(stop).__name__}")
        criteria.append(stop)
    if record_every is None:
        record_every = max(1, int(max_iter) // 200) if max_iter else 10
    record_every = as_int(record_every, "record_every", minimum=1)

    solver = METHODS[method](problem, x, part, selector, rng)
    return run(
        solver,
        rule,
        AnyOf(*criteria),
        record_every,
        seed=seed if not isinstance(seed, np.random.Generator) else "Generator",
        selection=sel_name,
    )


def _check_stepsize(stepsize: Any) -> StepSize:
    """`as_stepsize` with messages that name ``stepsize``; numpy scalars count as numbers
    and a plain callable must accept the two arguments (k, ctx)."""
    if isinstance(stepsize, numbers.Real) and not isinstance(stepsize, (bool, np.bool_)):
        stepsize = float(stepsize)
    elif callable(stepsize) and not isinstance(stepsize, StepSize):
        try:
            sig = inspect.signature(stepsize)
        except (TypeError, ValueError):  # some builtins have no signature: call them as is
            sig = None
        if sig is not None:
            try:
                sig.bind(0, None)
            except TypeError:
                raise TypeError(
                    f"stepsize must be called as stepsize(k, ctx) (iteration k and a "
                    f"rssm.stepsizes.StepContext), but {getattr(stepsize, '__name__', 'it')}"
                    f"{sig} does not accept two positional arguments"
                ) from None
    try:
        return as_stepsize(stepsize)
    except ValueError as exc:
        raise ValueError(f"stepsize: {exc} (a number is the constant step size c)") from None
