"""`minimize`: validate the arguments, build the solver, run the shared loop.

Paper labels (``eq-...``, ``alg-...``) are those of the LaTeX source of A. Y.-M. Cheung,
J. Wang, M.-C. Yue, A. M.-C. So, "Randomized Submanifold Subgradient Method for
Optimization over Stiefel Manifolds", arXiv:2409.01770; here ``eq-Rsubdiff`` = eq. (3),
``alg-RSSM`` = Algorithm 1 (table: docs/paper-map.md).
"""

from __future__ import annotations

import inspect
import math
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
    CostStagnation,
    MaxIterations,
    MaxTime,
    MinStationarity,
    Progress,
    StoppingCriterion,
    TargetError,
)
from rssm.threads import check_threads
from rssm.trace import Result

__all__ = ["minimize", "METHODS"]

#: Method names accepted by `minimize`.
METHODS = {"rssm": RSSMSolver, "rsm": RSMSolver}

#: Epoch limit used when no iteration, time or custom limit is given: 1000 RSM iterations,
#: ceil(1000 l / 2) RSSM iterations with l blocks (the same number of column updates).
DEFAULT_MAX_ITER = 1000

#: RSSM's number of blocks when ``n_blocks`` is not given: ``min(DEFAULT_N_BLOCKS, p)``.
DEFAULT_N_BLOCKS = 5


def minimize(
    problem: Problem,
    x0: np.ndarray | None = None,
    method: str = "rssm",
    n_blocks: int | None = None,
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
    stationarity_tol: float | None = None,
    stagnation_epochs: float | None = None,
    stagnation_rtol: float = 1e-8,
    stationarity: bool = True,
    threads: str | int | None = "auto",
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
    n_blocks : int, optional
        RSSM's number of blocks l, 2 <= l <= p; the columns are split into contiguous
        blocks whose sizes differ by at most one. Default ``min(5, p)`` (`DEFAULT_N_BLOCKS`
        capped at p; docs/blocks.md says what l does, measured). RSSM needs p >= 2: on
        St(n, 1) it raises a ValueError that names ``method='rsm'`` (with one column there is
        no pair of blocks; RSM is what a single block would do). Ignored by RSM and when
        ``partition`` is given.
    stepsize : StepSize, callable, float or "auto", optional
        Rule ``(k, ctx) -> gamma_k`` (see `rssm.stepsizes.StepContext` for what ``ctx``
        offers); a number means a constant step; ``"auto"`` is `rssm.stepsizes.Auto`, which
        needs no tuning and no problem constant (docs/stepsizes.md). Default: the rule a
        custom problem was built with (``Problem.from_functions(..., stepsize=)``), else
        ``"auto"``. The paper's schedule is `rssm.stepsizes.PaperSchedule`.
    max_iter : int, optional
        Iteration limit. When neither ``max_iter``, ``max_time`` nor ``stop`` is given,
        1000 epochs: 1000 RSM iterations, ceil(1000 l / 2) RSSM iterations with l blocks
        (each RSSM iteration moves 2 of the l blocks, so both methods get the same number
        of column updates; with l = 5, 2500 iterations).
    max_time : float, optional
        Solver-time limit in seconds (recording excluded).
    target_error : float, optional
        Stop once ``problem.error(X) <= target_error`` (checked at recording points).
    seed : int, numpy.random.Generator or None
        Randomness of the block selection (and of the start, when ``x0`` is None).
        The same seed gives the same result, bit for bit, on the same thread counts
        (``threads=N``; with ``"auto"`` when its decisions, in ``Result.threads``, match).
    record_every : int, optional
        Record cost, error, time and flops every this many iterations (also at the start
        and end). Default: max(1, max_iter // 200), or 10 without an iteration limit.
    callback : callable, optional
        ``callback(progress)`` at each recording point with a `rssm.stopping.Progress`
        (iteration, time, flops, cost, error, and ``x``, a read-only copy of the iterate:
        one n x p copy per recording point, off the clock); return True to stop. It sees
        every row of the trace, the last one included (also when a time or iteration limit
        ends the run between recording points, or the cost turns non-finite), except after
        a KeyboardInterrupt.
    partition : Partition, sequence of index sequences or 2-D int array, optional
        A user partition of the columns (blocks may differ in size; the rows of a 2-D array
        are equal-sized blocks); overrides ``n_blocks``.
    selection : {"uniform", "cyclic", "shuffled"} or PairSelector
        Block-pair rule; "uniform" is the paper's. Checked for every method, used by RSSM.
    stop : StoppingCriterion, optional
        Further criterion, combined with the others by "any".
    atol : float
        Tolerance on ||x0^T x0 - I||_max.
    stationarity_tol : float, optional
        Stop (reason ``stationary``, a success) once the recorded stationarity
        ||P_T(G)||_F is at most this (`rssm.stopping.MinStationarity`; for nonsmooth f a
        single subgradient's norm need not go to 0, see there).
    stagnation_epochs : float, optional
        Stop (reason ``no_progress``, not a success) once the best cost has not decreased
        by more than ``stagnation_rtol * |best|`` over this many epochs
        (`rssm.stopping.CostStagnation`; an epoch is l/2 RSSM iterations, 1 RSM iteration).
    stagnation_rtol : float
        Relative decrease that counts as progress for ``stagnation_epochs``.
    stationarity : bool
        Record ||P_T(G)||_F (eq. ``eq-Rsubdiff``) at each recording point: one full
        subgradient per recording point, evaluated off the clock. False leaves the trace
        column and ``Result.stationarity`` NaN (for a problem whose full subgradient is
        expensive, or counts its calls); ``stationarity_tol`` needs it.
    threads : "auto", int or None
        BLAS/OpenMP threads during the run (`rssm.threads`). ``"auto"`` (default) keeps
        the pools as they are and moves to one thread while timed probes show that one
        thread is clearly faster (a machine with other busy processes); an int fixes the
        count for the run (restored afterwards); None leaves the pools alone.
        ``Result.threads`` says what was used.

    Returns
    -------
    Result
        Final point, cost, iterations, time, flops, stop reason, stationarity and trace.
        ``success`` is True only when a convergence criterion fired (``target_error`` or
        ``stationary``). A
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
    threads = check_threads(threads)
    rng = make_rng(seed)
    n, p = problem.shape
    atol = as_positive_float(atol, "atol")

    if x0 is None:
        # The start draws from a child stream of the seed, not the seed's own stream: an
        # instance built with the same seed (e.g. ODL.synthetic(seed=s), which draws its
        # ground truth X* first) must not hand X* to the solver as its Haar start.
        x = problem.initial_point(_child(rng))
    else:
        x = x0
    x = problem.check_x(x, "x0", atol=atol)

    part: Partition | None = None
    selector: PairSelector | None = None
    sel_name: str | None = None
    selector = make_selector(selection)  # checked for RSM too, so a typo is not ignored
    if method == "rssm":
        if partition is not None:
            part = partition if isinstance(partition, Partition) else Partition(partition, p)
            if part.p != p:
                raise ValueError(f"partition covers {part.p} columns but the problem has p={p}")
        else:
            if p < 2:
                raise ValueError(
                    f"RSSM needs p >= 2 columns to form 2 blocks, got p={p}; use method='rsm'"
                )
            nb = min(DEFAULT_N_BLOCKS, p) if n_blocks is None else as_int(n_blocks, "n_blocks")
            if not 2 <= nb <= p:
                raise ValueError(f"n_blocks must satisfy 2 <= n_blocks <= p = {p}, got {nb}")
            part = Partition.uniform(p, nb)
        sel_name = selector.name
    else:
        selector = None

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
        epoch = 1.0 if part is None else part.n_blocks / 2.0
        max_iter = math.ceil(DEFAULT_MAX_ITER * epoch)
        criteria.append(MaxIterations(max_iter))
    if target_error is not None:
        te = as_positive_float(target_error, "target_error")
        if not problem.has_error:
            raise ValueError(
                f"target_error needs a ground truth, but this {type(problem).__name__} has none"
            )
        criteria.append(TargetError(te))
    if not isinstance(stationarity, (bool, np.bool_)):
        raise TypeError(f"stationarity must be True or False, got {describe(stationarity)}")
    if stationarity_tol is not None:
        if not stationarity:
            raise ValueError("stationarity_tol needs stationarity=True (the recorded measure)")
        criteria.append(MinStationarity(as_positive_float(stationarity_tol, "stationarity_tol")))
    if stagnation_epochs is not None:
        epoch = 1.0 if part is None else part.n_blocks / 2.0
        criteria.append(CostStagnation(
            as_positive_float(stagnation_epochs, "stagnation_epochs"),
            as_positive_float(stagnation_rtol, "stagnation_rtol", allow_zero=True),
            epoch=epoch))
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
        stationarity=bool(stationarity),
        threads=threads,
    )


def _child(rng: np.random.Generator) -> np.random.Generator:
    """An independent child stream of ``rng`` for the start: ``rng.spawn(1)[0]``, or, when
    the bit generator cannot spawn (e.g. ``Philox(key=...)``, seeded without a
    SeedSequence), a generator seeded by four 32-bit words drawn from ``rng`` itself
    (deterministic too; it advances ``rng``)."""
    try:
        return rng.spawn(1)[0]
    except TypeError:
        return np.random.default_rng(rng.integers(0, 2**32, size=4, dtype=np.uint64))


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
