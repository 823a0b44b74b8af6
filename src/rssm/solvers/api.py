"""`minimize`: check the arguments, build the solver, run the loop."""

from __future__ import annotations

import copy
import functools
import math
import os
import threading
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from rssm._interrupt import NESTING, HeldInterrupt, interrupted_by
from rssm._validation import (
    InvalidType,
    InvalidValue,
    as_int,
    as_positive_float,
    describe,
    integer_valued,
    make_rng,
    type_name,
)
from rssm.blocks import epoch_iterations
from rssm.data.store import DataError
from rssm.problem import Problem, checked_shape, start_rng
from rssm.solvers.loop import run
from rssm.solvers.options import (
    DEFAULT_METHOD,
    DEFAULT_TOL,
    METHODS,
    RSSMOptions,
    as_options,
    default_budget,
)
from rssm.solvers.record import Observer, Record, as_record, error_at
from rssm.stepsizes import StepSize, from_spec
from rssm.stopping import (
    AllOf,
    AnyOf,
    CallbackStop,
    Converged,
    CostStagnation,
    MaxIterations,
    MaxTime,
    MinStationarity,
    Progress,
    StoppingCriterion,
    StopReason,
    TargetError,
)
from rssm.threads import RunThreads, check_threads
from rssm.trace import Result

__all__ = ["minimize", "METHODS", "DEFAULT_MAX_ITER"]

from rssm.solvers.options import DEFAULT_MAX_ITER  # noqa: E402  (re-export)

#: The positional order of the old signature (kept for one release, with a warning).
_OLD_POSITIONAL = ("n_blocks", "stepsize", "max_iter", "max_time", "target_error", "seed",
                   "record_every", "callback")
#: Old keywords and where they went.
_MOVED = {
    "n_blocks": "options={'n_blocks': ...}",
    "partition": "options={'partition': ...}",
    "selection": "options={'selection': ...}",
    "record_every": "record=N",
    "stationarity": "record=rssm.Record(stationarity=...)",
    "stationarity_tol": "stop=rssm.stopping.MinStationarity(tol)",
    "stagnation_epochs": "stop=rssm.stopping.CostStagnation(window, rtol, epoch=...)",
    "stagnation_rtol": "stop=rssm.stopping.CostStagnation(window, rtol, epoch=...)",
    "atol": "a start closer to St(n, p) (x0 is checked to 1e-8)",
}


def _nested_interrupts_reach_the_outer_run(fn: Callable) -> Callable:
    """A Ctrl-C that ends a run nested in another (a callback or a cost that calls
    `minimize`) reaches the outer run too: the inner call returns its ``interrupted``
    Result as always (an estimator fitted in a callback keeps the run so far), and the
    outer run stops at the start of its next iteration, ``interrupted``
    (`rssm._interrupt.NESTING`). Before, one Ctrl-C stopped only the inner run and the
    outer went on to its budget."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Result:
        depth = getattr(NESTING, "depth", 0)
        if not depth:
            NESTING.pending = False
        NESTING.depth = depth + 1
        try:
            res = fn(*args, **kwargs)
        finally:
            NESTING.depth = depth
            # a nested run's Ctrl-C that this run's loop did not act on (it came after the
            # loop, or the run stopped on another reason in the same iteration)
            stale = getattr(NESTING, "pending", False)
            NESTING.pending = False
        if stale:
            _mark_interrupted(res)
        if depth and res.stop_reason is StopReason.INTERRUPTED:
            NESTING.pending = True
        return res

    return wrapper


@_nested_interrupts_reach_the_outer_run
def minimize(
    problem: Problem,
    x0: np.ndarray | None = None,
    method: str | None = None,
    *args: Any,
    stepsize: StepSize | Callable | float | str | None = None,
    options: dict | Any | None = None,
    seed: int | np.random.Generator | None = None,
    tol: float | None = None,
    max_iter: int | None = None,
    max_time: float | None = None,
    target_error: float | None = None,
    stop: StoppingCriterion | None = None,
    callback: Callable[[Progress], Any] | None = None,
    record: Record | int | None = None,
    observers: Sequence[Observer] = (),
    threads: str | int | None = "auto",
    **legacy: Any,
) -> Result:
    """Minimize a weakly convex ``problem`` over St(n, p) with RSSM or RSM.

    With nothing but the problem, ``minimize(problem)`` starts at
    ``problem.initial_point(0)``, runs `DEFAULT_METHOD` with the problem's default step
    (the tuning-free ``"auto"`` but for sparse PCA and the planted sparse basis, whose
    own geometric rules converge where Auto does not always), stops when the convergence
    test holds (``Result.success``) or after the problem's budget (1000 epochs unless it
    declares another), and returns the best iterate it saw; the same call gives the same
    bits.

    Parameters
    ----------
    problem : Problem
        The objective (e.g. `rssm.problems.DPCP`, `rssm.problems.ODL`, or your own).
    x0 : ndarray, shape (n, p), optional
        Start on St(n, p), checked to 1e-8 (a float32 start to 1e-5, a float16 one to
        2e-2) and projected onto St(n, p) in float64 where it is off by more than 1e-13,
        so no point off the manifold is returned. Default ``problem.initial_point(seed)``.
    method : {"rssm", "rsm"}, optional
        RSSM (Algorithm ``alg-RSSM``) or the Riemannian subgradient method. Default
        `rssm.solvers.options.DEFAULT_METHOD` (RSM), or RSSM when ``options`` sets one of
        RSSM's own (``n_blocks`` other than 1, ``partition``, a ``selection`` other than
        "uniform", or an `RSSMOptions`): blocks mean Algorithm ``alg-RSSM``.
    *args
        Deprecated: the old signature's further positional arguments (see Notes), each
        mapped to its keyword with a DeprecationWarning.
    stepsize : StepSize, callable, float or "auto", optional
        Rule ``(k, ctx) -> gamma_k`` (`rssm.stepsizes.StepContext` says what ``ctx``
        offers); a number is a constant step; a spec such as ``"geometric:mu0=0.1,beta=0.9"``
        (`rssm.stepsizes.from_spec`). Default: ``problem.default_stepsize()``: the rule a
        custom problem was built with, the reference geometric rule of `SparsePCA` and
        `PlantedSparseBasis`, else ``"auto"`` (`rssm.stepsizes.Auto`, no tuning). Steps
        are never longer than `rssm.solvers.max_step`. A callable is called as it is:
        state it keeps in itself carries over from run to run and is shared by runs in
        several threads; a rule with memory subclasses `rssm.stepsizes.StepSize`, whose
        ``reset()`` each run calls first and which a run in another thread does not share.
    options : dict or RSSMOptions, optional
        Options of the method: for RSSM ``n_blocks`` (default ``min(5, p)``),
        ``partition``, ``selection`` (`RSSMOptions`). Options of the other method are
        left out (one dict serves a loop over methods) but their values are checked.
    seed : int, Generator or None
        One meaning everywhere: seed s starts at ``problem.initial_point(s)`` (the stream
        ``default_rng([s, 1])``) and draws the block pairs from ``default_rng([s, 2])``
        (``synthetic(seed=s)`` data use ``default_rng(s)``). None is s = 0. A Generator
        draws both (the start from four words it draws first), and is advanced by the
        call: two Generators in the same state give the same bits.
    tol : float, optional
        Tolerance of the convergence test (`rssm.solvers.certificate`; default
        `DEFAULT_TOL` = 1e-10): stop, with ``success=True``, once the recent iterates lie
        within ``tol * ||X||_F`` of each other and their subgradients cancel or vanish.
        ``tol=0`` turns the test off (a Riemannian subgradient that is 0 to working
        precision, where no step moves X, still ends the run ``converged``).
    max_iter, max_time : int, float, optional
        Iteration limit and solver-time limit (seconds). Without any limit (here or
        inside ``stop``: a `MaxIterations`, a `MaxTime` or a criterion whose
        ``limits_run`` is True there counts):
        ``problem.default_max_epochs()`` epochs, else 1000 (1000 RSM iterations, 1000 l/2
        RSSM iterations); sparse PCA and the planted sparse basis, whose default rules
        decay slowly, take more.
    target_error : float, optional
        Stop once ``problem.error(X) <= target_error``, >= 0 (checked at recording
        points).
    stop : StoppingCriterion, optional
        Further criteria (`rssm.stopping`), combined with the others by "any".
    callback : callable, optional
        ``callback(progress)`` at each recorded row (`rssm.stopping.Progress`, with
        ``x`` a read-only copy of the iterate); return True to stop. It sees the last row
        too, except after Ctrl-C.
    record : int or Record, optional
        Record a trace row every this many iterations, or a `rssm.Record` (frequency,
        ||P_T(G)||_F column, your own columns). Default: about 200 rows over the budget.
    observers : sequence of Observer
        Objects told of the start, every recorded row and the Result (`rssm.Observer`).
    threads : "auto", int or None
        Threads during the run (`rssm.threads`): ``"auto"`` and any int give the same
        bits (BLAS at one thread, data chunks on that many workers); None leaves the pools
        alone. ``Result.threads`` records the setting.
    **legacy
        Deprecated: the old signature's keywords (``n_blocks=``, ``record_every=``,
        ``stationarity_tol=``, ...; see Notes), each mapped to its replacement with a
        DeprecationWarning; an unknown keyword raises TypeError.

    Returns
    -------
    Result
        ``x`` is the best iterate by cost (``x_last`` the last; a run stopped by
        ``target_error`` returns the iterate that met it), ``success`` says whether
        a convergence criterion stopped the run, ``message`` why it stopped. Ctrl-C
        returns the Result so far (``interrupted``).

    Notes
    -----
    The old signature (up to 11 positional arguments; ``n_blocks=``, ``record_every=``,
    ``stationarity_tol=``, ...) still works for one release and warns where each
    argument went.
    """
    if not isinstance(problem, Problem):
        raise TypeError("problem must be an rssm Problem (e.g. rssm.problems.DPCP.synthetic()"
                        f" or Problem.from_functions(...)), got {type_name(problem)}")
    kw = _legacy(args, legacy, dict(stepsize=stepsize, max_iter=max_iter, max_time=max_time,
                                      target_error=target_error, seed=seed, callback=callback,
                                      record=record, stop=stop, options=options))
    if method is None:
        method = "rssm" if _asks_for_blocks(kw["options"]) else DEFAULT_METHOD
    obs = _check_observers(observers)
    if not isinstance(method, str) or method.lower() not in METHODS:
        raise ValueError(f"method must be one of {sorted(METHODS)}, got {describe(method)}")
    method = method.lower()
    n, p = checked_shape(problem)
    opts = as_options(method, kw["options"], p)
    threads = check_threads(threads)
    rec = as_record(kw["record"])
    tol = _tol_with_stop(tol, kw["stop"])
    rng, start = _streams(kw["seed"])
    # The start, its check and the run under the run's thread setting: BLAS at one
    # thread throughout (a multi-threaded BLAS call on a busy machine can stall for
    # milliseconds, even for the small product of the check).
    rt = RunThreads(threads)
    res = None
    claimed = cut = False
    try:
        # the try is in place before the setting is taken (in a held section), and the
        # release runs in its finally, exactly once: a Ctrl-C at any moment leaves the
        # process's thread setting as it was (`rssm._interrupt`, `RunThreads.release`)
        try:
            with HeldInterrupt() as held:
                rt.claim()
                claimed = True
            if held.interrupted:
                raise KeyboardInterrupt
            res = _setup_and_run(problem, x0, start, rng, kw, opts, method, tol, rec, obs, p,
                                 rt)
        finally:
            # inline: a Ctrl-C pending at a call's entry is raised there, before the call
            # does anything; release() is idempotent and tried until the setting is back
            while claimed:
                try:                  # (every call inside the try: `released` is one too)
                    if rt.released:
                        break
                    cut = rt.release() or cut
                except KeyboardInterrupt:
                    cut = True
    except KeyboardInterrupt:
        if res is None:
            raise
        cut = True
    if cut:
        # Ctrl-C after the run returned its Result: the finished run is kept
        if res is None:
            raise KeyboardInterrupt
        _mark_interrupted(res)
    if not res.threads:
        res.threads = rt.describe()
    return res


def _mark_interrupted(res: Result) -> None:
    """A Result whose run ended, marked as cut short by a Ctrl-C that came after it."""
    if res.stop_reason is not StopReason.INTERRUPTED:
        res.stop_reason = StopReason.INTERRUPTED
        res.message = (f"{interrupted_by()} after {res.n_iter} iterations, while the "
                       f"result was put together (the run had ended: {res.message})")
        res.converged = False


def _setup_and_run(problem, x0, start, rng, kw, opts, method, tol, rec, obs, p,
                   rt: RunThreads) -> Result:
    """The start, the rule, the stopping criteria and the run, under the run's thread
    setting (`minimize`)."""
    if x0 is None:
        x = problem.initial_point(_child(rng) if start is None else start)
    else:
        x = x0
    x = problem.check_x(x, "x0", atol=kw.get("atol", 1e-8))
    dominated = getattr(problem, "_warn_if_dominated", None)
    if dominated is not None:
        dominated()
    part = selector = None
    if isinstance(opts, RSSMOptions):
        part, selector = opts.build(p)
    n_blocks = 1 if part is None else part.n_blocks

    rule = kw["stepsize"]
    if rule is None:
        try:
            rule = problem.default_stepsize()
        except DataError as exc:   # the data read for the rule's scale: see `_Unread`
            rule = _Unread(exc)
    try:
        rule = _check_stepsize("auto" if rule is None else rule, problem)
    except DataError as exc:       # a named spec completed from the problem's own rule
        rule = _Unread(exc, rule)

    criteria: list[StoppingCriterion] = []
    budget = kw["max_iter"]
    if budget is not None:
        criteria.append(MaxIterations(as_int(budget, "max_iter", minimum=0)))
    if kw["max_time"] is not None:
        criteria.append(MaxTime(as_positive_float(kw["max_time"], "max_time")))
    # (an audit: any stop= took the default budget away, so stop=CostBelow(level) ran for
    # ever where the level was never reached; only a limit inside it does now)
    if budget is None and kw["max_time"] is None and not _limits(kw["stop"]):
        budget = default_budget(n_blocks, problem.default_max_epochs())
        criteria.append(MaxIterations(budget))
    if tol > 0 and not any(isinstance(c, Converged) for c in _leaves(kw["stop"])):
        # (a Converged of the user's, say in Converged() & CostBelow, decides alone: one
        # added here beside it stopped the run on the certificate alone)
        # (a verdict on the budget's last iteration is a success: `AnyOf` gives a
        # criterion that means success the reason where several fire at once)
        criteria.append(Converged(tol))
    if kw["target_error"] is not None:
        # (0 too, as TargetError(0) takes it: an exact recovery; a user's audit)
        te = as_positive_float(kw["target_error"], "target_error", allow_zero=True)
        _check_error_known(problem, x, "target_error")
        criteria.append(TargetError(te))
    criteria += _legacy_criteria(kw, n_blocks, rec)
    if kw["callback"] is not None:
        criteria.append(CallbackStop(kw["callback"]))
    if kw["stop"] is not None:
        if not isinstance(kw["stop"], StoppingCriterion):
            raise TypeError("stop must be a StoppingCriterion (e.g. "
                            "rssm.stopping.MaxIterations(100); a function of the progress "
                            f"goes in callback=), got {type_name(kw['stop'])}")
        for c in _leaves(kw["stop"]):
            # criteria that could never fire were accepted and the run went on to its
            # budget without a word (a user's audit)
            # (where `check` is theirs: a subclass may read something else in its own)
            if isinstance(c, TargetError) and type(c).check is TargetError.check:
                _check_error_known(problem, x, f"stop={c!r}")
            elif (isinstance(c, MinStationarity) and type(c).check is MinStationarity.check
                  and not rec.stationarity):
                raise InvalidValue("stop", f"stop={c!r} reads ||P_T(G)||_F, which a run "
                                   "computes only when asked: pass "
                                   "record=rssm.Record(stationarity=True) too")
        criteria.append(kw["stop"])
    rows_over = budget if budget is not None else _iteration_limit(kw["stop"])
    every = rec.every if rec.every is not None else (
        max(1, int(rows_over) // 200) if rows_over else 10)
    # no iteration budget (max_time alone, a criterion of the user's): the spacing grows
    thin = rec.every is None and rows_over is None
    rec = Record(every=every, stationarity=rec.stationarity, columns=rec.columns,
                 best=rec.best)

    # None is seed 0 (`_streams`): recorded as 0, so that the setting reruns the call
    settings = {"seed": _seed_setting(kw["seed"]),
                "selection": None if selector is None else selector.name,
                "clip_steps": bool(opts.clip_steps), "thin_trace": thin,
                # read in the run's end, so that the observers' finish sees it too
                "threads": rt.describe}
    cls = METHODS[method][0]
    t0 = time.perf_counter()
    solver = cls(problem, x, part, selector, rng)
    setup = time.perf_counter() - t0
    claimed = False
    try:
        # held: a Ctrl-C between the claim and this `try` left the rule claimed for good
        with HeldInterrupt() as held:
            rule, claimed = _claim_rule(rule)
        if held.interrupted:
            raise KeyboardInterrupt
        return run(solver, rule, AnyOf(*criteria), rec, tol=tol if tol > 0 else None,
                   observers=obs, snapshot=kw["callback"] is not None,
                   settings=settings, setup_time=setup, verify=opts.verify_steps,
                   clip=bool(opts.clip_steps))
    finally:
        if claimed:
            with _RULES_LOCK:
                _RULES_IN_USE.pop(id(rule), None)


def _live_threads() -> set[int]:
    return {t.ident for t in threading.enumerate()}


#: id of each step-size rule a run is using now -> the thread of that run (`_claim_rule`).
_RULES_IN_USE: dict[int, int] = {}
_RULES_LOCK = threading.Lock()


def _after_fork_in_child() -> None:
    # a forked child runs only the forking thread: a lock another thread held at the fork
    # would never be released in it, and the rules that thread's runs held are free there
    global _RULES_LOCK
    _RULES_LOCK = threading.Lock()
    me = threading.get_ident()
    for key in [k for k, owner in _RULES_IN_USE.items() if owner != me]:
        del _RULES_IN_USE[key]


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _claim_rule(rule: StepSize) -> tuple[StepSize, bool]:
    """``rule`` for a run, and whether this run claimed it. A rule keeps its state in
    itself, so one object stepped by two runs at once (two threads: a problem's own rule,
    as `Problem.from_functions(stepsize=...)` keeps, or one object passed to both) mixed
    their states and neither gave the bits of a run alone. A rule already in use by a run
    (in another thread, or an outer run whose callback calls `minimize`) is rebuilt for
    this run (from its record, else deep-copied); one
    not in use is the caller's object, so that it can be read after the run
    (`Auto.handed_over`, `BlockRule.restarts`)."""
    me = threading.get_ident()
    with _RULES_LOCK:
        owner = _RULES_IN_USE.get(id(rule))
        # free, or claimed by a thread that has ended; a run of this thread that holds it
        # is an outer run (a minimize in its callback): the inner one gets its own rule
        if owner is None or (owner != me and owner not in _live_threads()):
            _RULES_IN_USE[id(rule)] = me
            return rule, True
    # a fresh rule from its parameters (the other run changes the object's state while it
    # would be copied); a rule that its record does not rebuild (a callable, a user's own
    # class) is deep-copied
    try:
        fresh = from_spec(rule.describe())
        if type(fresh) is type(rule) and fresh.describe() == rule.describe():
            return fresh, False
    except (TypeError, ValueError):
        pass
    return copy.deepcopy(rule), False


class _Unread(StepSize):
    """The problem's default rule, which could not be set up because its data could not
    be read (a file truncated since the problem was made): the run's first call of the
    oracle (or of this rule) raises that `DataError`, which the loop turns into a
    ``data_error`` result at x0, as it does for data lost during a run."""

    def __init__(self, exc: DataError, spec: Any = None):
        self._exc = exc
        self._name = (spec if isinstance(spec, str) else spec.get("rule", "default")
                      if isinstance(spec, dict) else "default")

    def __call__(self, k, ctx) -> float:
        raise self._exc

    def describe(self) -> dict:
        return {"rule": self._name, "note": "not set up: its data could not be read"}


def one_block(n_blocks: Any) -> bool:
    """``n_blocks`` is one block, RSM (1, 1.0 or a NumPy one; not True)."""
    return (not isinstance(n_blocks, (bool, np.bool_))
            and isinstance(n_blocks, (int, float, np.integer, np.floating)) and n_blocks == 1)


def _asks_for_blocks(options: Any) -> bool:
    """``options`` sets something only RSSM has (blocks, a partition, a pair rule); one
    block (``n_blocks=1``) is RSM, as `RSSMOptions.check` says (a user's audit: it was
    read as RSSM and refused, "2 <= n_blocks <= p")."""
    if isinstance(options, RSSMOptions):
        return True
    if not isinstance(options, Mapping):
        return False
    nb = options.get("n_blocks")
    return ((nb is not None and not one_block(nb)) or options.get("partition") is not None
            or not (isinstance(sel := options.get("selection", "uniform"), str)
                    and sel.lower() == "uniform"))


def _check_observers(observers: Any) -> tuple:
    """``observers=`` as a tuple, each with the hooks of `rssm.Observer`."""
    try:
        obs = tuple(observers)
    except TypeError:
        raise TypeError("observers must be a sequence of rssm.Observer objects, got "
                        f"{describe(observers)}") from None
    for i, o in enumerate(obs):
        if isinstance(o, type) or not all(callable(getattr(o, h, None))
                                          for h in ("start", "record", "finish")):
            raise TypeError(f"observers[{i}] must be an rssm.Observer (with start, record "
                            f"and finish methods), got "
                            f"{type_name(o) if isinstance(o, type) else describe(o)}")
    return obs


def _seed_setting(seed: Any) -> Any:
    """``Result.seed``: the int a run was seeded with (None is 0, a NumPy integer a Python
    int), or "Generator" for a Generator (whose state the run advanced)."""
    if isinstance(seed, np.random.Generator):
        return "Generator"
    if seed is None:
        return 0
    seed = integer_valued(seed)            # (3.0 was recorded as 3.0; it seeds as 3)
    return int(seed) if isinstance(seed, (int, np.integer)) else seed


def _streams(seed: Any) -> tuple[np.random.Generator, Any]:
    """(solver stream, start) for ``seed``: see `minimize`. For a Generator the start is
    None: `_setup_and_run` draws it only where no ``x0`` is given (so a given start leaves
    the Generator's stream for the block pairs as it was)."""
    if isinstance(seed, np.random.Generator):
        return seed, None
    s = 0 if seed is None else seed
    make_rng(s)                                        # type and sign checks
    return np.random.default_rng([int(s), 2]), start_rng(int(s))


def _child(rng: np.random.Generator) -> np.random.Generator:
    """A stream for the start seeded by four words drawn from ``rng``: it depends on the
    state of ``rng`` alone (``rng.spawn`` also depends on how many children its seed
    sequence has spawned before, which the state does not hold: two Generators in the
    same state gave different runs)."""
    return np.random.default_rng(rng.integers(0, 2**32, size=4, dtype=np.uint64))


def _iteration_limit(stop: Any) -> int | None:
    """The iterations after which ``stop`` ends a run by itself, where it holds a
    `MaxIterations` that does (alone, in an `AnyOf`: the least of its members', in an
    `AllOf`: the largest, where every member has one); None otherwise. A budget given
    this way sets the trace's spacing as ``max_iter`` does (a review: ``stop=
    MaxIterations(40000)`` was recorded as a run without a budget)."""
    if isinstance(stop, MaxIterations):
        return stop.n
    members = getattr(stop, "criteria", None)
    if isinstance(stop, AnyOf) and members:
        found = [n for n in map(_iteration_limit, members) if n is not None]
        return min(found) if found else None
    if isinstance(stop, AllOf) and members:
        found = [_iteration_limit(c) for c in members]
        return None if any(n is None for n in found) else max(found)
    return None


def _leaves(stop: Any):
    """The criteria inside ``stop``, through its `AnyOf` and `AllOf`."""
    members = getattr(stop, "criteria", None)
    if isinstance(stop, (AnyOf, AllOf)) and members:
        for c in members:
            yield from _leaves(c)
    else:
        yield stop


def _check_error_known(problem, x: np.ndarray, what: str) -> None:
    """Refuse ``what`` (a target error) where the problem's error cannot be measured: no
    ground truth, or an error function that returns NaN at the start. The message names
    the problem as the user built it and how to give it a ground truth."""
    name, how = _truth_hint(problem)
    none = InvalidValue("target_error", f"{what} needs a ground truth, but {name} has none "
                        f"(no planted solution or error function to measure against): "
                        f"{how}, or leave out target_error")
    if not problem.has_error:
        raise none
    err = error_at(problem, x, no_truth=None)
    if err is None:             # an `error` that defers to the base class's
        raise none
    if math.isnan(err):
        raise InvalidValue("target_error", f"{what} needs the error at the start, but "
                           f"{name}'s error(x0) returned NaN")


#: The keyword through which each built-in problem's constructor takes its ground truth.
_TRUTH_KEYWORDS = {"DPCP": "subspace", "ODL": "dictionary", "L1Procrustes": "x_true",
                   "PlantedSparseBasis": "x_true", "SparsePCA": "loadings"}


def _truth_hint(problem) -> tuple[str, str]:
    """(how to name ``problem`` in a message, how to give it a ground truth): a problem of
    `Problem.from_functions` is named by that call (its class is internal; a user's
    audit), a built-in by its class with its constructor's keyword."""
    from rssm.problem import FunctionProblem

    cls = type(problem).__name__
    if isinstance(problem, FunctionProblem):
        return ("this problem (Problem.from_functions)",
                "pass error=callable (the distance of X to your solution) to "
                "Problem.from_functions")
    key = _TRUTH_KEYWORDS.get(cls)
    if key is not None:
        return f"this {cls}", f"pass the planted solution as {cls}(..., {key}=...)"
    return f"this {cls}", f"give it an error method (a subclass of {cls})"


def _tol_with_stop(tol: Any, stop: Any) -> float:
    """``tol``, or the one of a `Converged` inside ``stop`` where ``tol`` is not given: the
    certificate is the run's, so a `Converged(t)` of the user's and ``tol`` must agree (a
    user's audit: ``stop=Converged(1e-3)`` ran at the default 1e-10 without a word, and
    never fired with ``tol=0``)."""
    given = None if tol is None else as_positive_float(tol, "tol", allow_zero=True)
    if given is not None:
        _below_one(given, "tol")
    mine = sorted({c.tol for c in _leaves(stop) if isinstance(c, Converged)}) \
        if isinstance(stop, StoppingCriterion) else []
    for t in mine:
        _below_one(t, "stop")
    if not mine:
        return DEFAULT_TOL if given is None else given
    if len(mine) > 1:
        raise InvalidValue("stop", "stop holds Converged criteria with different tol ("
                           f"{', '.join(f'{t:g}' for t in mine)}): the run has one "
                           "convergence test; give one tol")
    if given is not None and given != mine[0]:
        raise InvalidValue("tol", f"tol={given:g} and stop=...Converged(tol={mine[0]:g}) "
                           "disagree: the run has one convergence test (tol=0 turns it "
                           "off); give the tolerance once")
    return mine[0]


def _below_one(tol: float, name: str) -> None:
    """Refuse a relative tolerance of 1 or more (``name``: the argument that gave it)."""
    if tol >= 1:
        what = "tol" if name == "tol" else f"stop=...Converged(tol={tol:g}): its tol"
        raise InvalidValue(name, f"{what} is relative (the recent iterates within tol "
                           f"||X||_F of each other, ||X||_F = sqrt(p)) and must be below 1, "
                           f"got {tol:g}: at 1 or more every radius passes (St(n, p)'s "
                           "diameter is 2 ||X||_F); the default is 1e-10, 0 turns the test "
                           "off")


def _limits(stop: Any) -> bool:
    """Whether the criterion ``stop`` ends every run by itself (``limits_run``: a
    `MaxIterations` or `MaxTime`, an `AnyOf` with one, an `AllOf` of such, or a budget of
    the user's or a bridge's that says so)."""
    return isinstance(stop, StoppingCriterion) and bool(stop.limits_run)


#: What users of other solvers type, and what it is here.
_ALIASES = {
    "maxiter": "max_iter", "max_iters": "max_iter", "max_iterations": "max_iter",
    "n_iter": "max_iter", "iterations": "max_iter", "tolerance": "tol", "gtol": "tol",
    "ftol": "tol", "xtol": "tol", "step_size": "stepsize", "step": "stepsize",
    "lr": "stepsize", "learning_rate": "stepsize", "x_0": "x0", "x_init": "x0",
    "init": "x0", "start": "x0", "random_state": "seed", "rng": "seed",
    "maxtime": "max_time", "time_limit": "max_time", "timeout": "max_time",
    "n_block": "options={'n_blocks': ...}", "nblocks": "options={'n_blocks': ...}",
    "blocks": "options={'n_blocks': ...}", "l": "options={'n_blocks': ...}",
    "verbose": "callback= (called at each recorded row) or observers=",
    "n_jobs": "threads", "num_threads": "threads", "workers": "threads",
}


def _did_you_mean(name: str) -> str:
    """A hint for a keyword minimize does not take: its name here, or the close ones."""
    import difflib
    import inspect

    if name.lower() in _ALIASES:
        return f"; did you mean {_ALIASES[name.lower()]}?"
    known = [p for p in inspect.signature(minimize).parameters
             if p not in ("problem", "args", "legacy")]
    close = difflib.get_close_matches(name, known, n=2, cutoff=0.6)
    hint = f"; did you mean {' or '.join(close)}?" if close else ""
    return f"{hint} (minimize takes {', '.join(known)})"


def _legacy(args: tuple, legacy: dict, kw: dict) -> dict:
    """Map the old positional arguments and keywords, with one DeprecationWarning each."""
    if len(args) > len(_OLD_POSITIONAL):
        raise TypeError(f"minimize takes at most {3 + len(_OLD_POSITIONAL)} positional "
                        f"arguments, got {3 + len(args)}")
    for name, value in zip(_OLD_POSITIONAL, args, strict=False):
        warnings.warn(f"minimize: passing {name} by position is deprecated; pass it by "
                      "keyword" + (f" ({_MOVED[name]})" if name in _MOVED else ""),
                      DeprecationWarning, stacklevel=3)
        legacy[name] = value
    for name, value in legacy.items():
        if name in _MOVED:
            if not any(name == a for a in _OLD_POSITIONAL[: len(args)]):
                warnings.warn(f"minimize: {name}= is deprecated; use {_MOVED[name]}",
                              DeprecationWarning, stacklevel=3)
            continue
        if name not in kw:
            raise TypeError(f"minimize() got an unexpected keyword argument {name!r}"
                            f"{_did_you_mean(name)}")
        if kw[name] is not None and value is not None:
            raise TypeError(f"minimize() got multiple values for argument {name!r}")
        kw[name] = value
    opt = {k: legacy[k] for k in ("n_blocks", "partition", "selection") if k in legacy}
    if opt:
        if kw["options"] is not None:
            raise TypeError("pass the RSSM options either in options= or as the old keywords "
                            f"{sorted(opt)}, not both")
        kw["options"] = opt
        kw["_legacy_options"] = True
    if "record_every" in legacy or "stationarity" in legacy or "stationarity_tol" in legacy:
        # The old default recorded ||P_T(G)||_F at every row.
        rec = kw["record"]
        if isinstance(rec, Record) or ("record_every" in legacy and rec is not None):
            raise TypeError("pass record= or the old record_every=/stationarity=, not both")
        every = legacy.get("record_every", rec)
        kw["record"] = Record(every=every, stationarity=legacy.get("stationarity", True))
    for k in ("stationarity_tol", "stagnation_epochs", "stagnation_rtol", "atol"):
        if k in legacy:
            kw[k] = legacy[k]
    return kw


def _legacy_criteria(kw: dict, n_blocks: int, rec: Record) -> list[StoppingCriterion]:
    out: list[StoppingCriterion] = []
    if kw.get("stationarity_tol") is not None:
        if not rec.stationarity:
            raise ValueError("stationarity_tol needs the ||P_T(G)||_F column: "
                             "record=rssm.Record(stationarity=True)")
        out.append(MinStationarity(as_positive_float(kw["stationarity_tol"],
                                                     "stationarity_tol")))
    if kw.get("stagnation_epochs") is not None:
        epoch = epoch_iterations(n_blocks)
        out.append(CostStagnation(
            as_positive_float(kw["stagnation_epochs"], "stagnation_epochs"),
            as_positive_float(kw.get("stagnation_rtol", 1e-8), "stagnation_rtol",
                              allow_zero=True), epoch=epoch))
    return out


def _base_rule(stepsize: Any, problem: Problem | None) -> StepSize | None:
    """The problem's own rule, else its reference rule, for a name or dict spec; None when
    there is none or it cannot be built (data on which it is undefined, e.g. all zero)."""
    if problem is None or not isinstance(stepsize, (str, dict)) or stepsize == "auto":
        return None
    try:
        base = problem.default_stepsize()
        return base if base is not None else problem.reference_stepsize()
    except (ArithmeticError, ValueError):
        return None


def _check_stepsize(stepsize: Any, problem: Problem | None = None) -> StepSize:
    """``stepsize=`` through `rssm.stepsizes.from_spec`, the one spec parser (numbers,
    callables ``(k, ctx)`` with their signature checked, "auto", names, dicts, strings),
    with messages that name the argument. A name or dict spec takes the parameters it
    leaves out from the problem's own rule, else its reference rule, when that is of the
    same kind (as ``rssm solve --stepsize paper`` does: ``stepsize="paper"`` is the
    paper's schedule of a paper problem)."""
    try:
        return from_spec(stepsize, base=_base_rule(stepsize, problem))
    except ValueError as exc:
        text = str(exc)
        raise InvalidValue("stepsize", text if text.startswith("stepsize")
                           else f"stepsize: {text}") from None
    except TypeError as exc:
        text = str(exc)
        raise InvalidType("stepsize", text if text.startswith("stepsize")
                          else f"stepsize: {text}") from None
