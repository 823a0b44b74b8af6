"""RSSM and RSM for Pymanopt users.

* `problem_from_pymanopt` (also `rssm.Problem.from_pymanopt`) turns a ``pymanopt.Problem``
  over ``pymanopt.manifolds.Stiefel(n, p)`` into an rssm `Problem`: its cost, and its
  Euclidean gradient from whichever back end the cost was written with (Pymanopt's
  autodiff back ends, or an explicit ``euclidean_gradient=``/``riemannian_gradient=``).
* `RSSM` and `RSM` are Pymanopt optimizers (subclasses of
  ``pymanopt.optimizers.optimizer.Optimizer``) whose ``run(problem, initial_point=None)``
  returns Pymanopt's own ``OptimizerResult``, so a Pymanopt script switches by changing
  the import of its optimizer.

A Riemannian gradient given instead of a Euclidean one serves as well: for the embedded
metric of St(n, p) (Pymanopt's) it is P_T(G), and both the full projection P_T
(eq. ``eq-Rsubdiff``) and the block projection P of RSSM (eq. ``eq-partialRiemsubgrad``,
onto a subspace of the tangent space) give the same direction from P_T(G) as from G.

Needs the optional extra ``rssm[pymanopt]``.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

try:
    import pymanopt  # noqa: F401 (fails early, naming the extra)
    from pymanopt.optimizers.optimizer import Optimizer, OptimizerResult
except ImportError:  # pragma: no cover - exercised only without pymanopt
    raise ImportError(
        'rssm.interop.pymanopt needs Pymanopt, which is not installed; install it with '
        'pip install "rssm[pymanopt]"'
    ) from None

from rssm._autodiff import pymanopt_oracles
from rssm._interrupt import HeldInterrupt
from rssm._validation import InvalidValue, as_int, as_positive_float, quieted
from rssm.problem import FullSubgradientWarning, FunctionProblem, Problem
from rssm.solvers import minimize
from rssm.stopping import StoppingCriterion, StopReason

__all__ = ["problem_from_pymanopt", "RSSM", "RSM"]


def problem_from_pymanopt(problem, *, name: str = "pymanopt", stepsize=None,
                          error: Callable[[np.ndarray], float] | None = None
                          ) -> FunctionProblem:
    """An rssm `Problem` from a ``pymanopt.Problem`` over ``Stiefel(n, p)``.

    Parameters
    ----------
    problem : pymanopt.Problem
        Its manifold must be ``pymanopt.manifolds.Stiefel(n, p)`` (k = 1). The
        subgradient is its Euclidean gradient: autodiff's for a cost written with an
        autodiff back end (a Clarke subgradient for sums of l1/l2 norms and max of smooth
        pieces; see `rssm._autodiff`), else the ``euclidean_gradient`` or
        ``riemannian_gradient`` given to ``pymanopt.Problem``.
    name, stepsize, error
        As in `rssm.Problem.from_functions`.

    Returns
    -------
    FunctionProblem
        Without a partial subgradient: RSSM slices the full one
        (`rssm.problem.FullSubgradientWarning`).

    Raises
    ------
    TypeError
        ``problem`` is not a ``pymanopt.Problem``.
    ValueError
        Another manifold, a product (k > 1), or no gradient (a NumPy-back-end cost without
        ``euclidean_gradient``).
    """
    return Problem.from_pymanopt(problem, name=name, stepsize=stepsize, error=error)


class _CountedCost:
    """The problem's cost, counting its calls (Pymanopt's ``cost_evaluations``)."""

    def __init__(self, cost: Callable[[np.ndarray], float]):
        self.cost = cost
        self.calls = 0

    def __call__(self, x: np.ndarray) -> float:
        self.calls += 1
        return self.cost(x)


class _CostBudget(StoppingCriterion):
    """Stops (reason ``callback``) once the counted cost calls reach ``limit``; checked
    after every iteration, so a run overshoots by at most one iteration's calls (a
    step-size rule's trials) and the final recording. A budget: minimize adds no
    iteration limit of its own beside it."""

    limits_run = True

    def __init__(self, counted: _CountedCost, limit: float, state: dict):
        self.counted, self.limit, self.state = counted, limit, state

    def check(self, progress) -> StopReason | None:
        if self.counted.calls >= self.limit:
            self.state["why"] = (f"Terminated - max cost evals reached after "
                                 f"{progress.iteration} iterations.")
            self.state["rssm"] = _cost_budget_stop(self.limit, progress.iteration)
            return StopReason.CALLBACK
        return None


def _cost_budget_stop(limit: float, k: int) -> tuple[StopReason, bool, str]:
    """The stop reason, convergence flag and message for ``log["rssm_result"]`` when the
    optimizer's max_cost_evaluations ends the run."""
    return (StopReason.CALLBACK, False, f"the optimizer's max_cost_evaluations ({limit:g}) "
                                        f"was reached after {k} iterations")


class _Stop(Exception):
    """Internal: which of the Pymanopt-style criteria fired (its message)."""


class _RssmOptimizer(Optimizer):
    """Shared parts of `RSSM` and `RSM`."""

    _method = "rssm"

    def __init__(self, stepsize=None, *, seed: int | np.random.Generator | None = None,
                 record_every: int | None = None, max_time: float | None = 1000,
                 max_iterations: int | None = 1000, min_gradient_norm: float | None = 1e-6,
                 min_step_size: float | None = None, max_cost_evaluations: int = 5000,
                 verbosity: int = 2, log_verbosity: int = 0):
        # checked here, in the optimizer's own words (they failed only in run(), named
        # as rssm.minimize names them: "max_iter must be >= 0"; a user's audit)
        if max_iterations is not None:      # (None: no iteration limit)
            max_iterations = as_int(max_iterations, "max_iterations", minimum=0)
        if max_time is not None and max_time != math.inf:   # (no time limit)
            max_time = as_positive_float(max_time, "max_time")
        if record_every is not None:
            record_every = as_int(record_every, "record_every", minimum=1)
        super().__init__(max_time=max_time, max_iterations=max_iterations,
                         min_gradient_norm=-math.inf if min_gradient_norm is None
                         else min_gradient_norm,
                         min_step_size=-math.inf if min_step_size is None else min_step_size,
                         max_cost_evaluations=max_cost_evaluations, verbosity=verbosity,
                         log_verbosity=log_verbosity)
        self.stepsize = stepsize
        self.seed = seed
        self.record_every = record_every

    def _options(self) -> dict:
        return {}

    def run(self, problem, *, initial_point=None) -> OptimizerResult:
        """Minimize ``problem`` from ``initial_point`` (default: a Haar-random point drawn
        from ``seed``) and return Pymanopt's ``OptimizerResult``.

        ``problem`` is a ``pymanopt.Problem`` over ``Stiefel(n, p)`` (or an rssm
        `Problem`). Stopping: ``max_iterations``; ``max_time`` (solver time, recording
        excluded); and, checked at each recording point (every ``record_every``
        iterations): ``min_gradient_norm`` on ||P_T(G)||_F at the recorded point,
        ``min_step_size`` on the mean distance ||X - X_prev||_F per iteration since the
        previous recording point. ``max_cost_evaluations`` counts every call of the
        problem's cost (the recording points', and those of a step-size rule that reads f,
        such as the default ``"auto"``), checked after every iteration; the last iteration
        and the final recording may add a few calls, as the line search of Pymanopt's own
        optimizers does. For an rssm `Problem` (whose oracle may evaluate f incrementally)
        the recorded costs are counted. The result's ``point`` and ``cost`` are rssm's
        best iterate and its cost (`rssm.Result.x`, ``fun``), ``gradient_norm`` is
        ||P_T(G)||_F at that point, ``step_size`` the mean step per iteration over the
        last recorded interval, and ``time`` is wall time; ``log["rssm_result"]`` holds
        rssm's own `rssm.Result` (trace, flops, stop reason, the last iterate).
        """
        start = time.time()
        counted = None
        if isinstance(problem, Problem):
            rproblem = problem
        else:
            shape, cost, grad = pymanopt_oracles(problem)
            counted = _CountedCost(cost)
            rproblem = FunctionProblem(counted, grad, None, shape=shape, name="pymanopt")
        if self._method == "rssm" and rproblem.shape[1] < 2:
            raise InvalidValue("problem", f"RSSM needs p >= 2 columns to form 2 blocks, got "
                               f"Stiefel({rproblem.shape[0]}, {rproblem.shape[1]}); use "
                               "rssm.interop.pymanopt.RSM")
        self._initialize_log(optimizer_parameters={
            "method": self._method, "stepsize": repr(self.stepsize), **self._options()})
        verbose = self._verbosity
        state: dict[str, Any] = {"prev": None, "step": math.nan, "grad": math.nan, "evals": 0,
                                 "why": None}
        if verbose >= 1:
            print("Optimizing...")
        if verbose >= 2:
            print(f"{'Iteration':>10}  {'Cost':>24}  {'Gradient norm':>15}  {'Step':>10}")

        def watch(prog) -> bool:
            x = np.array(prog.x)  # a writable copy (back ends such as torch wrap it)
            g = rproblem.riemannian_subgradient(x)
            state["grad"] = float(np.linalg.norm(g))
            state["evals"] += 1
            prev = state["prev"]
            if prev is not None and prog.iteration > prev[0]:
                state["step"] = float(np.linalg.norm(x - prev[1])) / (prog.iteration - prev[0])
            state["prev"] = (prog.iteration, x)
            self._add_log_entry(iteration=prog.iteration, point=x, cost=prog.cost,
                                gradient_norm=state["grad"], step_size=state["step"])
            if verbose >= 2:
                print(f"{prog.iteration:>10d}  {prog.cost:>+24.16e}  {state['grad']:>15.8e}  "
                      f"{state['step']:>10.3e}")
            k = prog.iteration
            if state["grad"] < self._min_gradient_norm:
                state["why"] = f"Terminated - min grad norm reached after {k} iterations."
                state["rssm"] = (StopReason.STATIONARY, True, (
                    f"the Riemannian gradient norm {state['grad']:.3g} fell below the "
                    f"optimizer's min_gradient_norm ({self._min_gradient_norm:g}) after {k} "
                    "iterations"))
            elif state["step"] < self._min_step_size:
                state["why"] = f"Terminated - min step_size reached after {k} iterations."
                state["rssm"] = (StopReason.MIN_STEP, False, (
                    f"the step {state['step']:.3g} fell below the optimizer's min_step_size "
                    f"({self._min_step_size:g}) after {k} iterations"))
            elif counted is None and state["evals"] >= self._max_cost_evaluations:
                state["why"] = f"Terminated - max cost evals reached after {k} iterations."
                state["rssm"] = _cost_budget_stop(self._max_cost_evaluations, k)
            return state["why"] is not None

        res = None
        try:
            with quieted(FullSubgradientWarning):
                # Pymanopt gives no partial gradient: the full one is sliced, documented.
                res = minimize(rproblem, initial_point, method=self._method,
                               stepsize=self.stepsize, max_iter=self._max_iterations,
                               max_time=(None if self._max_time == math.inf
                                         else self._max_time), seed=self.seed,
                               record=self.record_every, callback=watch,
                               stop=None if counted is None else _CostBudget(
                                   counted, self._max_cost_evaluations, state),
                               options=self._options() or None)
        except KeyboardInterrupt:
            if res is None:
                raise
        if res.stop_reason.value == "callback" and state["why"] is not None:
            state["fired"] = True
            if state.get("rssm") is not None:
                # rssm's Result names the optimizer's criterion that fired (it said "the
                # callback asked to stop" and named a private class; a user's audit)
                res.stop_reason, res.converged, res.message = state["rssm"]
        # The run is over (a Ctrl-C in it comes back as a result marked interrupted, as
        # from rssm.minimize): one that comes now is held until the result is whole (it
        # lost finished runs) and then marks it so; the section is entered again if one
        # lands at its entry.
        late = False
        for _attempt in range(3):
            try:
                with HeldInterrupt() as held:
                    out = self._finish(res, state, counted, start, verbose, rproblem)
                late = late or held.interrupted
                break
            except KeyboardInterrupt:
                late = True
        else:
            out = self._finish(res, state, counted, start, verbose, rproblem)
        if late and res.stop_reason.value != "interrupted":
            res.stop_reason = StopReason.INTERRUPTED
            res.message = f"interrupted by the user after the run ({res.message})"
            out.stopping_criterion = ("Terminated - interrupted by the user after "
                                      f"{res.n_iter} iterations, as the result was put "
                                      "together.")
        return out

    def _finish(self, res, state, counted, start, verbose, rproblem) -> OptimizerResult:
        """Pymanopt's result of rssm's run ``res``: its ``gradient_norm`` is the one at
        the returned ``point`` (rssm's best iterate, which need not be the last recorded
        one: it was the last row's, of another point; a user's audit)."""
        why = state["why"] if state.get("fired") else None
        if why is None:
            why = _WORDS.get(res.stop_reason.value, "Terminated - {message}.").format(
                n=res.n_iter, message=res.message)
        if verbose >= 1:
            print(why)
        if self._log is not None:
            self._log["rssm_result"] = res
        grad = state["grad"]
        prev = state["prev"]
        if prev is None or not np.array_equal(prev[1], res.x):
            grad = float(np.linalg.norm(rproblem.riemannian_subgradient(np.array(res.x))))
        sys.stdout.flush()
        return self._return_result(
            start_time=start, point=res.x, cost=res.fun, iterations=res.n_iter,
            stopping_criterion=why,
            cost_evaluations=state["evals"] if counted is None else counted.calls,
            step_size=state["step"], gradient_norm=grad)


#: Pymanopt's wording of the stops both libraries have; others quote rssm's message.
_WORDS = {
    "max_iter": "Terminated - max iterations reached after {n} iterations.",
    "max_time": "Terminated - max time reached after {n} iterations.",
    "converged": "Terminated - converged after {n} iterations (rssm's convergence test).",
}


class RSSM(_RssmOptimizer):
    """Randomized submanifold subgradient method (Algorithm ``alg-RSSM``) as a Pymanopt
    optimizer.

    Parameters
    ----------
    n_blocks : int, optional
        Number of column blocks l, 2 <= l <= p. Default: min(5, p), as in `rssm.minimize`.
    stepsize : StepSize, callable or float, optional
        As in `rssm.minimize`: default "auto", the tuning-free rule.
    selection : {"uniform", "cyclic", "shuffled"}
        Block-pair rule; "uniform" is the paper's.
    seed : int or numpy.random.Generator, optional
        Randomness of the block pairs and of the default start.
    record_every : int, optional
        Recording interval (cost, gradient norm, the stopping tests, the printed table).
        Default: max(1, max_iterations // 200).
    max_time, max_iterations, min_gradient_norm, min_step_size, max_cost_evaluations, \
verbosity, log_verbosity
        Pymanopt's arguments with Pymanopt's defaults, except ``min_step_size``: off by
        default (None; Pymanopt's is 1e-10). rssm's step rules may shrink the steps
        below that for a while before they start again (a decay restarted after a
        freeze), and rssm's convergence test ends a run whose iterates settle where the
        subgradients cancel, so a test on the step length would stop such runs early:
        with 1e-10 the default RSSM and RSM calls on an l1 PCA cost (8 x 60 data,
        St(8, 3), seeds 0-2) stopped after 95-200 iterations, at costs 0.02-0.8 % above
        the ones they converge to (after 333-858). See `run` for how each is checked.
        ``None`` switches ``min_gradient_norm``, ``min_step_size``, ``max_iterations``
        or ``max_time`` off (``max_time=numpy.inf`` too). Bad values are refused when
        the optimizer is built, by these names.

    Examples
    --------
    >>> import numpy as np, pymanopt
    >>> from rssm.interop.pymanopt import RSSM
    >>> Y = np.random.default_rng(0).standard_normal((6, 40))
    >>> manifold = pymanopt.manifolds.Stiefel(6, 4)
    >>> @pymanopt.function.numpy(manifold)
    ... def cost(X): return np.abs(Y.T @ X).sum()
    >>> @pymanopt.function.numpy(manifold)
    ... def grad(X): return Y @ np.sign(Y.T @ X)
    >>> problem = pymanopt.Problem(manifold, cost, euclidean_gradient=grad)
    >>> result = RSSM(n_blocks=2, stepsize=1e-3, seed=0, verbosity=0).run(problem)
    >>> result.iterations
    1000
    """

    _method = "rssm"

    def __init__(self, n_blocks: int | None = None, stepsize=None, *,
                 selection: str = "uniform",
                 seed: int | np.random.Generator | None = None,
                 record_every: int | None = None, max_time: float | None = 1000,
                 max_iterations: int | None = 1000, min_gradient_norm: float | None = 1e-6,
                 min_step_size: float | None = None, max_cost_evaluations: int = 5000,
                 verbosity: int = 2, log_verbosity: int = 0):
        # (named here, not passed on as **kwargs: the signature is what help(), an IDE
        # and the API reference show, and it matched none of the documented names)
        super().__init__(stepsize, seed=seed, record_every=record_every, max_time=max_time,
                         max_iterations=max_iterations, min_gradient_norm=min_gradient_norm,
                         min_step_size=min_step_size,
                         max_cost_evaluations=max_cost_evaluations, verbosity=verbosity,
                         log_verbosity=log_verbosity)
        self.n_blocks = n_blocks
        self.selection = selection

    def _options(self) -> dict:
        return {"n_blocks": self.n_blocks, "selection": self.selection}


class RSM(_RssmOptimizer):
    """Riemannian subgradient method (full step, polar retraction) as a Pymanopt optimizer.

    Parameters as in `RSSM`, without ``n_blocks`` and ``selection``.
    """

    _method = "rsm"
