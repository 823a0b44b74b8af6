"""The one loop every solver runs (`run`).

Per iteration: the solver's `direction`, the rule's gamma (clipped to `max_step`), the
solver's `candidate` and `commit`, the convergence test's bookkeeping, then the stopping
criteria. Every way out (a criterion, a stall, a non-finite value, a failing rule,
Ctrl-C) goes through the same exit: a `_Halt` or the criterion's verdict, then one place
that builds the `rssm.Result` from the `SolverState`.

The loop times the steps and f at the recorded rows (which brings the data problems'
caches up to date, docs/performance.md): the rest of recording (the ground-truth error,
the stationarity column, user columns), callbacks and observers happen outside the timed
region.
"""

from __future__ import annotations

import math
import numbers
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from rssm import stiefel
from rssm._interrupt import HeldInterrupt, act_on_nested_interrupt, interrupted_by
from rssm._validation import describe, iterations
from rssm.data.store import DataError
from rssm.solvers.base import Direction, NonFiniteStep, Solver, rounding_zero
from rssm.solvers.certificate import (
    CHECK_ABOVE,
    EARLY_FROZEN,
    FULL_BUNDLE,
    PROBE_LENGTHS,
    ZIGZAG_STEPS,
    Certificate,
    GoldsteinTest,
    _place,
    bundle_probe,
    bundle_steps,
    full_cancel,
    probe,
    zigzag,
)
from rssm.solvers.record import Observer, Record, TraceRecorder, error_at
from rssm.stepcontext import StepContext
from rssm.stepsizes import Auto, StepSize, StepStall, make_auto
from rssm.stopping import (
    MaxIterations,
    MaxTime,
    Progress,
    StoppingCriterion,
    StopReason,
    TargetError,
    checked_reason,
)
from rssm.threads import RunThreads
from rssm.trace import Result

__all__ = ["run", "MAX_STEP_FACTOR", "max_step"]

#: The longest step the loop takes is MAX_STEP_FACTOR sqrt(|C|): ||gamma P(G_C)||_F is
#: clipped to the diameter of St(n, |C|) in the Frobenius norm (2 sqrt(|C|): X_C and -X_C),
#: |C| the columns the step moves (p for RSM). Every point of the block lies within that
#: distance of X_C, so a longer move means nothing: for gamma ||P(G_C)|| much longer the
#: projection of X_C - gamma P(G_C) onto the block is that of -P(G_C), whatever X is. The
#: theory's bound, gamma_k < 1/L (Algorithm ``alg-RSSM``), gives steps shorter than 1, the
#: radius of Lemma ``lem-projsubmfdblk``'s nearest-point property; it is sufficient, not
#: necessary (the polar factor is defined and the iterate feasible for every length), and
#: clipping there slowed the first steps from far starts (ODL from a Haar-random start:
#: RSM reached 1e-8 in 43 iterations with the diameter, never with 1). Clipped steps are
#: counted in ``Result.n_clipped``.
MAX_STEP_FACTOR = 2.0


def max_step(c: int) -> float:
    """The longest step on |C| = c columns: ``MAX_STEP_FACTOR * sqrt(c)``.

    Parameters
    ----------
    c : int
        The number of columns the step moves (p for RSM).

    Returns
    -------
    float
        ``MAX_STEP_FACTOR * sqrt(c)``, the Frobenius diameter of St(n, c).
    """
    return MAX_STEP_FACTOR * math.sqrt(c)


class _Halt(Exception):
    """Ends the loop with a reason and a message (the loop's one non-criterion exit)."""

    def __init__(self, reason: StopReason, message: str, converged: bool = False):
        super().__init__(message)
        self.reason, self.message, self.converged = reason, message, converged


def _rule_name(stepsize: StepSize) -> str:
    """How a stop message names the rule: the default by what the user wrote (or did not
    write), any other rule with its settings."""
    d = stepsize.describe()
    if d == make_auto().describe():
        return 'the default step-size rule (stepsize="auto")'
    args = ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}"
                     for k, v in d.items() if k != "rule" and v is not None)
    return f"the step-size rule {d.get('rule', type(stepsize).__name__)}({args})"


def _ask(stepsize: StepSize, k: int, ctx: StepContext, base: int = 0) -> float:
    """gamma_k from the rule, checked. Before the first step a failing rule is a bad
    argument and raises; from iteration 1 on the run is kept and ends ``stalled``. What
    the user's cost raised while the rule read f propagates unchanged. The rule is asked
    with ``k - base`` (``base``: the iteration of a restart, from which a rule started
    afresh counts)."""
    try:
        gamma = stepsize(k - base, ctx)
    except StepStall as exc:
        # A rule that read a non-finite f (the cost itself broke down) ends the run as the
        # loop would on reading it: non_finite, not a stall of the rule.
        f = ctx._cost
        reason = (StopReason.NON_FINITE if f is not None and not math.isfinite(f)
                  else StopReason.STALLED)
        raise _Halt(reason, f"iteration {k}: {exc}; returning the best finite iterate"
                    if reason is StopReason.NON_FINITE else f"iteration {k}: {exc}") from None
    except Exception as exc:
        if exc is ctx._raised:
            # Your cost (or the data it reads) failed while the rule read f, and the rule
            # let it through: that is not a stall of the rule. It propagates as it would
            # from any other call of the cost, and a `DataError` ends the run with
            # `data_error`. (An exception of the rule's own, even one raised while it
            # handled the cost's, is the rule's: `stalled`, as a review asked.)
            raise
        if k == 0:
            if isinstance(exc, (OverflowError, ZeroDivisionError)):
                raise ValueError(
                    f"stepsize could not compute gamma_{k}: {type(exc).__name__}: {exc}"
                ) from exc
            raise
        raise _Halt(StopReason.STALLED, (
            f"iteration {k}: {_rule_name(stepsize)} raised "
            f"{type(exc).__name__}: {exc}")) from None
    if type(gamma) is float and 0.0 < gamma < math.inf:
        return gamma                  # the common case, without the checks below
    # any real number (a Fraction too, as ``stepsize=Fraction(1, 100)`` is taken; a
    # user's audit) or a 0-d real array
    ok = (not isinstance(gamma, (bool, np.bool_))
          and (isinstance(gamma, numbers.Real)
               or (isinstance(gamma, np.ndarray) and gamma.ndim == 0
                   and gamma.dtype.kind in "iuf")))
    value = float(gamma) if ok else math.nan
    if ok and math.isfinite(value) and value > 0:
        return value
    if k == 0:
        raise ValueError(
            f"stepsize returned gamma_{k} = {describe(gamma)}; it must be a finite real "
            "number > 0 (int, float, a Fraction or a NumPy real scalar)")
    if ok and value == 0:
        why = (f"the step size gamma_{k} of {_rule_name(stepsize)} reached 0 (a rule that "
               "decays more slowly goes further)")
    else:
        why = (f"{_rule_name(stepsize)} returned gamma_{k} = {describe(gamma)}, not a finite "
               "number > 0")
    raise _Halt(StopReason.STALLED, f"iteration {k}: {why}")


def _finite_cost(k: int, f: float, st: Any, elapsed: float) -> None:
    """Ends the run ``non_finite`` where the run read f(X_k) and it is not finite."""
    if not math.isfinite(f):
        st.time += elapsed
        raise _Halt(StopReason.NON_FINITE, f"iteration {k}: f(X_{k}) = {f} is not finite; "
                    "returning the best finite iterate")


class _Trial:
    """`StepContext.trial` for the current direction: a pure query, with the last
    candidate kept so that the step can take it without computing it again."""

    def __init__(self, solver: Solver):
        self.solver = solver
        self.d: Direction | None = None
        self.gamma = math.nan
        self.values: np.ndarray | None = None

    def reset(self, d: Direction) -> None:
        self.d, self.gamma, self.values = d, math.nan, None

    def __call__(self, gamma: float) -> float:
        st = self.solver.state
        try:
            vals = self.solver.candidate(st, self.d, gamma)
        except np.linalg.LinAlgError:
            return math.inf
        st.flops += self.solver.step_flops(st, self.d)
        st.n_cost += 1
        if not np.isfinite(vals).all():
            return math.inf
        self.gamma, self.values = gamma, vals
        return float(st.oracle.cost_at(self.d.cols, self.d.sel, vals))

    def take(self, gamma: float) -> np.ndarray | None:
        return self.values if self.values is not None and gamma == self.gamma else None


def run(
    solver: Solver,
    stepsize: StepSize,
    stop: StoppingCriterion,
    record: Record | int | None = None,
    *,
    tol: float | None = None,
    observers: Sequence[Observer] = (),
    snapshot: bool = False,
    track_best: bool = False,
    threads: str | int | None = None,
    settings: dict[str, Any] | None = None,
    setup_time: float = 0.0,
    verify: int | None = None,
    clip: bool = True,
) -> Result:
    """Run ``solver`` from its state until ``stop`` fires; return a `rssm.Result`.

    Parameters
    ----------
    solver : Solver
        A solver with its `SolverState` at the start.
    stepsize : StepSize
        The rule.
    stop : StoppingCriterion
        When to stop (add `rssm.stopping.Converged` to stop on the certificate).
    record : Record or int, optional
        Recording options or the recording interval (default 10).
    tol : float, optional
        Tolerance of the convergence test (`rssm.solvers.certificate`); None: no test.
    observers : sequence of Observer
        Called at the start, at each recorded row and at the end.
    snapshot : bool
        Give criteria and observers a copy of X at each row (callbacks need it).
    track_best : bool
        Evaluate f at every iterate to keep the best one even when the step rule does not
        read f and the oracle's cost is not cheap (default False: a rule that reads f, such
        as the default, sees every iterate anyway, and so does any rule on a problem whose
        oracle has ``cheap_cost``, the data problems; a plain schedule on another problem
        sees the recorded rows).
    threads : "auto", int or None
        Thread setting around the loop (`rssm.threads`); `rssm.minimize` sets it around
        the solver's construction as well and passes None here.
    settings : dict, optional
        ``seed``, ``selection`` and other settings copied into the Result.
    setup_time : float
        Seconds already spent building the solver (added to the solver time).
    verify : int, optional
        Steps of the check of a verdict of convergence
        (`rssm.solvers.certificate.bundle_probe`, then `zigzag` where it found a lower
        point); default 24 on verdicts whose ``cancel`` exceeds
        `rssm.solvers.certificate.CHECK_ABOVE`; given, on every verdict.
    clip : bool
        Shorten steps longer than `max_step` (default); False takes them as the rule
        gives them.

    Returns
    -------
    rssm.Result
        The best iterate seen (the last one when it is no worse, or when
        `rssm.stopping.TargetError` stopped the run) with its cost, the last iterate, the
        trace, the stop reason and message, and the certificate.
    """
    if threads is not None:
        with RunThreads(threads) as rt:
            return _run(solver, stepsize, stop, record, tol, observers, snapshot, track_best,
                        {**(settings or {}), "threads": rt.describe}, setup_time, verify,
                        clip)
    return _run(solver, stepsize, stop, record, tol, observers, snapshot, track_best,
                settings or {}, setup_time, verify, clip)


def _run(solver, stepsize, stop, record, tol, observers, snapshot, track_best, settings,
         setup_time, verify=None, clip=True) -> Result:
    opts = record if isinstance(record, Record) else Record(every=record or 10)
    st = solver.state
    st.time = setup_time
    problem, oracle = solver.problem, st.oracle
    n, p = st.x.shape
    rec = TraceRecorder(problem, opts, opts.every or 10, snapshot,
                        thin=bool(settings.get("thin_trace", False)))
    # The check of a verdict: by default ZIGZAG_STEPS steps on verdicts whose
    # subgradients cancel only in part (cancel > CHECK_ABOVE); steps given: every verdict.
    above = CHECK_ABOVE if verify is None else -math.inf
    if verify is None:
        verify = ZIGZAG_STEPS
    cert = (GoldsteinTest(tol, p, solver.n_pairs if solver.n_blocks > 1 else 1, verify=verify,
                          check_above=above, blocks=solver.n_blocks > 1)
            if tol else None)
    if cert is not None:
        # the default rule starts afresh at a relaxed verdict (its reset is a new start);
        # other rules' resets would not be one (a schedule's steps follow k), and telling
        # a schedule that restarts after a freeze (sparse PCA's default) of one more only
        # doubled its runs: 9 of 9 verdicts the same (mu = 0.5-1.5, seeds 0-2)
        cert.can_restart = isinstance(stepsize, Auto)
    trial = _Trial(solver)
    wind_down = HeldInterrupt()
    # The iteration whose f the run itself asked for (the rule, or track_best), as opposed
    # to f evaluated for a recorded row only: the convergence test reads the least cost
    # only where the run saw it, so that `record=` never changes the path.
    asked = [-1]

    def run_cost() -> float:
        asked[0] = st.k
        return st.cost()

    ctx = StepContext(solver.method, solver.n_blocks, (n, p), cost=run_cost, trial=trial,
                      best=lambda: st.best_fun, partition=solver.partition,
                      selection=None if solver.selector is None else solver.selector.name)
    # A rule that reads f (the default) evaluates it at every iterate, which keeps the best
    # one up to date at no extra cost. With a plain schedule f is evaluated at every
    # iterate too where the oracle says f is cheap next to an iteration (the data
    # problems' caches, `Oracle.cheap_cost`), unless Record(best=False), or where
    # Record(best=True) or track_best asks for it; otherwise it is seen at the recorded
    # rows only.
    every_iterate = (opts.best if opts.best is not None
                     else bool(getattr(oracle, "cheap_cost", False)))
    track_best = bool(track_best) or bool(every_iterate)
    still_limit = 1 if solver.n_blocks <= 1 else 2 * solver.n_pairs
    info = {"method": solver.method, "n_blocks": solver.n_blocks, "shape": (n, p), **settings}
    if "threads" in info:
        info["threads"] = _threads_line(settings)
    perf = time.perf_counter
    reason: StopReason | None = None
    message, converged = "", False
    fired: StoppingCriterion | None = None
    prog = None
    dead = False           # the oracle can no longer be called (DataError)
    try:
        stop._reset_for_run()   # (a criterion object may serve several runs)
        for obs in observers:
            obs.start(info)
        prog = _record(rec, st, None, observers)
        if not math.isfinite(prog.cost):
            stop.final(prog)
            raise _Halt(StopReason.NON_FINITE, "f(x0) is not finite")
        level = problem._exact_fit_level(prog.cost)
        if level is not None:          # an exact fit at the start: a global minimizer
            raise _Halt(StopReason.CONVERGED, _at_zero(prog.cost, level), converged=True)
        reason = checked_reason(stop, stop.check(prog))
        if reason is not None:
            fired = stop.fired()
        stepsize.reset()
        n_still = 0
        # the block pairs whose direction was 0 at the current X (cleared when X moves):
        # stationarity needs every pair's, not the last one's (with random pairs, 2
        # binom(l, 2) draws in a row can miss the one pair that still has a direction)
        zero_keys: set = set()
        still_escaped = False
        while reason is None:
            act_on_nested_interrupt()   # a run in this one's callback or cost had a Ctrl-C
            k = st.k
            t0 = perf()
            d = solver.direction(st)
            if track_best:
                _finite_cost(k, run_cost(), st, perf() - t0)   # f(X_k), after the
                #              direction: the data oracles compute both in one pass
            if d.defect or not (math.isfinite(d.norm_sq) and math.isfinite(d.grad_sq)):
                st.time += perf() - t0
                what = d.defect or "the subgradient is not finite"
                if not d.defect and d.neg is not None and np.isfinite(d.neg).all():
                    top = float(np.abs(d.neg).max())
                    what = (f"the subgradient's squared norm overflows float64 (its entries "
                            f"reach {top:.3g}; scale f or the data)")
                best = "best iterate" if "underflows" in what else "best finite iterate"
                raise _Halt(StopReason.NON_FINITE, f"iteration {k}: {what}; returning the "
                            f"{best}")
            if d.norm_sq == 0.0:
                st.step_norm = 0.0        # 0 is in the (partial) subdifferential: no move
                st.flops += d.flops
            else:
                trial.reset(d)
                max_gamma = max_step(d.size) / math.sqrt(d.norm_sq)
                ctx.advance(k, math.sqrt(d.norm_sq), d.grad_sq, max_gamma, d.neg, d.sel, d.key,
                            d.cross_sq, d.rotation_sq)
                if cert is not None:
                    # RSSM's BlockRule starts again after a refuted verdict too; RSM's gap
                    # rule follows the drop in f a refutation brings by itself (counting
                    # refutations for RSM: 295 iterations instead of 189 on the paper's
                    # ODL, seed 10, the only default RSM call of seeds 1-10 it changes).
                    ctx.escapes = cert.escapes()
                try:
                    # (after a restart the rule counts from it, as a new run would: its
                    # grace periods are in iterations of its own)
                    gamma = _ask(stepsize, k, ctx, 0 if cert is None else cert.k_base)
                except _Halt:
                    st.time += perf() - t0
                    raise
                if ctx._cost is not None:
                    # a rule that read f(X_k) and went on (BlockRule reads it at its
                    # tests only): a non-finite f ends the run here, not at the next row
                    _finite_cost(k, ctx._cost, st, perf() - t0)
                if gamma > max_gamma and clip:
                    gamma = max_gamma
                    st.n_clipped += 1
                values = trial.take(gamma)
                try:
                    if values is None:
                        values = solver.candidate(st, d, gamma)
                        st.flops += solver.step_flops(st, d)
                    solver.commit(st, d, values)
                    st.flops += d.flops
                except (NonFiniteStep, np.linalg.LinAlgError) as exc:
                    st.time += perf() - t0
                    what = ("non-finite values" if isinstance(exc, NonFiniteStep)
                            else f"a LAPACK failure ({exc})")
                    raise _Halt(StopReason.NON_FINITE, (
                        f"iteration {k}: the step produced {what} (step size {gamma:.3g}); "
                        "returning the best finite iterate")) from None
                st.gamma = gamma
                ctx.previous_gamma = gamma
                if st.step_norm > st.longest_step:
                    st.longest_step = st.step_norm
            st.k = k + 1
            certificate = None
            if cert is not None:
                # The least cost up to X_k where the run itself asked for f(X_k), and
                # before a recorded row evaluates f(X_{k+1}), so that what `record=` asks
                # for never changes the path (a row every iteration fed the relaxed test
                # X_{k+1}'s f one iteration early, a row every 10 fed it f where the run
                # had none: 2371 and 4551 iterations where the run without rows took 4559,
                # on ||Y^T x||_1 with p = 1).
                seen = asked[0] >= st.k - 1
                cert.observe(d.key, d.neg, math.sqrt(d.norm_sq), st.step_norm, d.sel,
                             st.best_fun if seen else math.nan,
                             st.fun if seen and st.fun_at == st.k - 1 else math.nan)
                certificate = _checked(cert, solver, st)
                if cert.restart_due:
                    _restart(cert, solver, st, stepsize)
                elif cert.trial_end is not None:
                    # a restart that lowered f by tol |f| in its horizons goes on as any
                    # run; one that did not leaves the verdict it set aside standing
                    stood = cert.trial_outcome(st.best_fun, st.k)
                    if stood is not None:
                        certificate = stood
            if rec.due(st.k):
                st.cost()      # the row's f(X_{k+1}) brings the caches up to date: solver work
            st.time += perf() - t0
            n_still = n_still + 1 if st.step_norm == 0.0 else 0
            if st.step_norm != 0.0:
                zero_keys.clear()
                still_escaped = False
            if d.norm_sq == 0.0:
                zero_keys.add(d.key)
            if rec.due(st.k):
                prog = _record(rec, st, certificate, observers)
                if not math.isfinite(prog.cost):
                    stop.final(prog)
                    raise _Halt(StopReason.NON_FINITE, f"f(x) is not finite at iteration {st.k}")
            else:
                prog = Progress(st.k, st.time, st.flops, step_norm=st.step_norm,
                                best_cost=st.best_fun, certificate=certificate)
            reason = checked_reason(stop, stop.check(prog))
            if reason is not None:
                fired = stop.fired()
            elif n_still >= still_limit:
                halt = _still(solver, st, d, cert, stepsize, n_still,
                              len(zero_keys) >= max(1, solver.n_pairs))
                # The first stall at a point, the test failing there, is a freeze: a
                # rule that starts again after one goes on (RSM's default call on a max of
                # |y_j^T x| stalled at f 9 % above where it goes on to; docs/convergence.md,
                # "stalled"); a second stall with X not moved since ends the run.
                if (halt is not None and halt.reason == StopReason.STALLED
                        and cert is not None and not still_escaped):
                    _unfreeze(cert, solver, st)
                    still_escaped = True
                    halt = None
                if halt is not None:
                    raise halt
                n_still = 0            # a check moved X to a lower point: go on from there
        # ... or in the last iteration (a review: the flag outlived the loop, and stopped
        # the next run at once)
        act_on_nested_interrupt()
    except _Halt as h:
        reason, message, converged = h.reason, h.message, h.converged
    except DataError as exc:
        # The data or its workers are gone: no further oracle call can succeed. Keep the
        # best iterate seen (its cost is known), else the iterate the oracle had.
        reason, message = StopReason.DATA_ERROR, f"iteration {st.k}: {exc}"
        dead = True
    except KeyboardInterrupt:
        # A second Ctrl-C while the run winds down (the rebuild below is a pass over the
        # data) is held: it raised out of minimize and lost the run (an audit: 10 of 20
        # double SIGINTs 1-10 ms apart); the run is already marked as interrupted.
        wind_down.__enter__()
        reason = StopReason.INTERRUPTED
        message = f"{interrupted_by()} after {iterations(st.k)}"
        # The interrupt may have landed between a step's write to x and the cache update,
        # or inside the copy of a new best point: rebuild both from scratch (a pure query
        # of the oracle; with unreachable data it fails, and the run so far is kept as is).
        try:
            try:
                oracle.refresh()
                st.fun_at = -1
                if st.best_k >= 0:
                    st.best_fun = float(oracle.cost_at(None, slice(None), st.best_x))
            except DataError:
                dead = True
            if rec.last_iteration == st.k:
                rec.drop_last()
        except BaseException:
            # (a user's cost that raises in the rebuild: the process's handler is put
            # back before the error goes on; a review found Ctrl-C dead after it)
            wind_down.__exit__(None, None, None)
            raise
    try:
        if (reason not in _NOT_STANDING and reason is not StopReason.CONVERGED
                and _standing(cert, st)):
            # f at the last iterate first: where the run stopped between recorded rows it
            # was not evaluated, and it may be the lower point a restart's trial looked
            # for (the last review: a run stopped at iteration 245 returned a point 82
            # tol |f| lower with the message "found f no lower", with record=10, not 1)
            try:
                st.cost()
            except KeyboardInterrupt:
                reason, converged, fired = StopReason.INTERRUPTED, False, None
                message = f"{interrupted_by()} after {iterations(st.k)}"
        if fired is not None:
            with HeldInterrupt() as held:
                message = fired.message(prog)
                converged = fired.indicates_convergence
                if converged and cert is not None and cert.saved is not None \
                        and cert.last is cert.saved:
                    message = _stood(cert, st.k)
                if isinstance(fired, (MaxIterations, MaxTime)) and not _standing(cert, st):
                    # (a time limit too: docs/convergence.md says so, and it said only
                    # "reached the time limit"; a user's audit)
                    held_too = _test_holds(cert)
                    message += (" (the convergence test held there too)" if held_too
                                else " before the convergence test held" if cert is not None
                                else " (the convergence test is off: tol=0)")
            if held.interrupted:
                reason, converged = StopReason.INTERRUPTED, False
                message = f"{interrupted_by()} after {iterations(st.k)}"
        if not converged and reason not in _NOT_STANDING and _standing(cert, st):
            # the run ended (its budget, a time limit, a callback or another criterion
            # of the user's, a stall) during a restart's trial, before it found f lower:
            # the verdict it set aside stands (the reviews of the restart: the same point,
            # called converged by the code before, ended max_iter or "callback")
            cert.stand()
            reason, converged = StopReason.CONVERGED, True
            message = _stood(cert, st.k)
        elif converged and cert is not None and cert.restarts and cert.last is not cert.saved:
            message += _restarted(cert)
        # The built-in target error certifies the last iterate itself (its error, measured
        # there): that point is the one asked for. Any other criterion, a user's that
        # returns TARGET_ERROR included, gets the best iterate.
        last_certified = isinstance(fired, TargetError)
        return _finish(solver, st, rec, stop, cert, reason, message, converged, observers,
                       stepsize, settings, tol, dead, last_certified)
    finally:
        wind_down.__exit__(None, None, None)        # (a no-op where it was not entered)


def _full_direction_is_zero(st) -> bool:
    """Whether the full Riemannian subgradient at X is 0 (to working precision): asked
    when the last block pair's direction was 0 but not every pair has been drawn at this
    X (one full subgradient, and X does not move)."""
    x = st.x
    g = st.oracle.subgradient()
    neg, _ = stiefel.descent_direction_parts(x, g)
    norm_sq = float(np.vdot(neg, neg))
    return norm_sq == 0.0 or rounding_zero(norm_sq, float(np.vdot(g, g)), x.shape[1])


def _still(solver: Solver, st, d: Direction, cert, stepsize: StepSize,
           n_still: int, all_zero: bool = True) -> _Halt | None:
    """The iterate stopped moving: converged if the certificate says so, else stalled;
    None when the check of a verdict moved X to a lower point (the run goes on), or when
    the last direction was 0, not every block pair's has been at this X (``all_zero``)
    and the full Riemannian subgradient is not 0 (a pair still has a direction)."""
    if d.norm_sq == 0.0:
        if not all_zero and not _full_direction_is_zero(st):
            return None
        return _Halt(StopReason.CONVERGED, (
            f"the Riemannian subgradient is 0 to working precision (X is stationary; the "
            f"last {n_still} iteration(s), up to iteration {st.k}, left it where it was)"),
            converged=True)
    moves = 0 if cert is None else cert.moves
    c = None if cert is None else _checked(cert, solver, st)
    if cert is not None and cert.moves != moves:
        return None
    if cert is not None and cert.restart_due:
        _restart(cert, solver, st, stepsize)     # (a relaxed verdict at a kink: go on)
        return None
    if c is not None and c.converged:
        return _Halt(StopReason.CONVERGED, f"converged after {iterations(st.k)}: the step can "
                     f"no longer change X and {c.summary()}", converged=True)
    test = ("the convergence test does not hold" if cert is not None
            else "the convergence test is off (tol=0)")
    return _Halt(StopReason.STALLED, (
        f"iteration {st.k}: the last {n_still} step(s) of {_rule_name(stepsize)} were too "
        f"short to change X (step size {st.gamma:.3g}) and {test}; X is returned as it "
        "is"))


def _checked(cert: GoldsteinTest, solver: Solver, st) -> Certificate | None:
    """The certificate now; a new verdict of convergence is checked by the descent probe
    (`rssm.solvers.certificate.probe`), whose cost evaluations count as solver work. For
    RSSM, part 2 failing on the per-pair bundles is asked again on a bundle of full
    subgradients (`rssm.solvers.certificate.full_cancel`, solver work) when due; a failed
    ask (RSSM), or part 2 failing on RSM's own bundle, is a freeze (`_unfreeze`), counted
    at growing intervals (`GoldsteinTest.frozen_due`)."""
    c = cert.evaluate()
    if c is None:
        level = cert.early_due()
        if level is not None:
            # A freeze found early (RSSM): the full bundle at a radius the decay reached
            # long before tol; where its subgradients do not cancel the steps froze
            full = _full_cancel(cert, solver, st, level)
            cert.early.append((st.k, level, full))
            if math.isfinite(full) and full > EARLY_FROZEN:
                _unfreeze(cert, solver, st)
        return None
    if cert.frozen_due():
        _unfreeze(cert, solver, st)
        return cert.last
    if cert.full_due():
        c = cert.with_full(_full_cancel(cert, solver, st))
        if not c.converged:
            if cert.verify and getattr(solver.selector, "name", None) == "cyclic":
                # With cyclic pairs each pair meets the others' moves in the same order
                # every sweep, so near a solution its bundle holds one subgradient again
                # and again and does not cancel (0.76 at an l1 Procrustes solution that
                # RSM certifies; the full bundle of 4 read 0.94-1.0): a warm start there
                # ran its whole budget (a user's audit: 4 of 6). The bundle check decides:
                # stationary (in about 10 trial points there) is a verdict; a lower point
                # it finds is a freeze escaped, as below.
                if _bundle(cert, c, solver, st):
                    return cert.confirm_by_bundle()
                cert.frozen += 1
                _moved(cert, st)
                return cert.last
            _unfreeze(cert, solver, st)
            return cert.last
    if c is None or not c.converged or c.probed:
        return c
    st.n_cost += len(PROBE_LENGTHS)
    ok = probe(solver.problem, st.x, cert.aggregate(st.x.shape), st.oracle, st.cost(),
               keep=True)
    if ok and cert.verify and _weak(cert, c, solver, st):
        # The bundle check decides (it withdrew every verdict the zigzag did, and more);
        # where it finds a lower point the zigzag looks for a farther one to escape to.
        ok = _bundle(cert, c, solver, st)
        if not ok:
            st.fun_at = -1          # X is at the bundle check's lower point: f there, and
            st.cost()               # the best iterate, before the zigzag compares with it
            _zigzag(cert, solver, st)
    if ok and c.radius > cert.tol and st.best_k >= 0 and cert.verify:
        if not _strict_at_best(cert, solver, st):
            # the run was closing in: withdraw the verdict, and let the decay go on (a
            # refutation counted as a move restarted RSSM's rule each time, and the
            # iterates were back at the relaxed radius when the next verdict came)
            cert.refute()
            return cert.last
        if cert.restart_relaxed(st.best_fun, c):
            # a stall as well as a smooth minimizer: the default rule starts afresh from
            # the best iterate (the loop makes the restart), and the verdict stands only
            # where it comes back with f no lower by more than tol |f|
            cert.refute()
            return cert.last
    if ok:
        cert.confirm()
    else:
        _moved(cert, st)
    return cert.last


#: Stops after which a restart's set-aside verdict does not stand: the user's Ctrl-C,
#: data gone, a value that is not finite.
_NOT_STANDING = (StopReason.INTERRUPTED, StopReason.DATA_ERROR, StopReason.NON_FINITE)


def _standing(cert: GoldsteinTest | None, st) -> bool:
    """A restart's trial is on and has not lowered the least cost by tol |f|."""
    return (cert is not None and cert.trial_end is not None and cert.saved is not None
            and not cert.lowered(st.best_fun))


def _stood(cert: GoldsteinTest, k: int) -> str:
    """The message of a run whose verdict stood after a restart found f no lower."""
    text = f"converged after {iterations(cert.saved_k)} ({cert.last.summary()}); "
    if k == cert.saved_k:
        # (a review: "found f no lower ... in the 0 iterations after")
        return text + ("the run ended where the default rule was to start afresh from "
                       "the best iterate (a relaxed verdict at a kink)")
    return text + (f"the default rule, started afresh from the best iterate there, found f "
                   f"no lower by more than tol |f| in the {iterations(k - cert.saved_k)} "
                   "after")


def _restarted(cert: GoldsteinTest) -> str:
    """What a converged message adds after restarts (at relaxed verdicts at a kink)."""
    times = "once" if cert.restarts == 1 else f"{cert.restarts} times"
    return (f"; the default rule was started afresh from the best iterate {times} on the "
            f"way, the last at iteration {cert.saved_k} (a relaxed verdict at a kink)")


def _restart(cert: GoldsteinTest, solver: Solver, st, stepsize) -> None:
    """Start the rule afresh from the best iterate (`GoldsteinTest.restart_relaxed`): X
    there (the oracle told), the rule (`Auto`) reset, and the escapes so far its base, as
    in a new run from that point."""
    cert.restart_due = False
    if st.best_k >= 0 and not np.array_equal(st.best_x, st.x):
        _place(st.x, st.best_x, st.oracle)
        st.fun_at = -1
        st.cost()
    stepsize.reset()
    cert.escape_base += cert.escapes()
    cert.k_base = st.k
    cert.start_trial(st.k)


def _zigzag(cert: GoldsteinTest, solver: Solver, st) -> bool:
    """The zigzag check from the iterate, keeping a lower point it finds (True: none);
    its cost evaluations and subgradients count as solver work."""
    ok, taken = zigzag(solver.problem, st.x, st.oracle, st.cost(), steps=cert.verify,
                       keep=True)
    st.n_cost += taken
    st.flops += taken * st.oracle.flops_subgradient()
    return ok


def _bundle(cert: GoldsteinTest, c: Certificate, solver: Solver, st) -> bool:
    """The bundle check from the iterate (`bundle_probe`: null steps of a bundle method),
    keeping a lower point it finds (True: none); its cost evaluations and subgradients
    count as solver work."""
    ok, taken = bundle_probe(solver.problem, st.x, st.oracle, st.cost(),
                             steps=_bundle_steps(cert, st),
                             radius=c.radius, keep=True)
    st.n_cost += taken
    st.flops += taken * st.oracle.flops_subgradient()
    return ok


def _bundle_steps(cert: GoldsteinTest, st) -> int:
    """Trial points of the bundle check: ``verify_steps`` when given; by default up to
    two per tangent dimension, 24 to 128 (`bundle_steps`): a verdict that stands ends in
    3-8."""
    if cert.check_above == -math.inf:
        return cert.verify
    return bundle_steps(st.x.shape, cert.verify)


def _strict_at_best(cert: GoldsteinTest, solver: Solver, st) -> bool:
    """A verdict of the relaxed part 1 (iterates within up to sqrt(tol) ||X||_F) that its
    checks upheld: the bundle check again, at the best iterate (what the run returns),
    with the strict test's trial length (True: no lower point). The relaxed check's trial
    points, 10 radii long, overshoot a sharp minimizer closer than that and rise (a
    user's audit: l1 Procrustes and the planted sparse basis called converged at errors
    3e-8 to 5e-6, from which steps of 1e-6 ||X||_F lower f by up to 1.4e-6 of f). Where
    it finds a lower point X stays there (solver work, as the other checks); else X is
    put back where it was."""
    here, fun, fun_at, f0 = st.x.copy(), st.fun, st.fun_at, st.best_fun
    away = not np.array_equal(st.best_x, st.x)
    if away:
        _place(st.x, st.best_x, st.oracle)
    ok, taken = bundle_probe(solver.problem, st.x, st.oracle, st.best_fun,
                             steps=_bundle_steps(cert, st), radius=0.0, keep=True)
    st.n_cost += taken
    st.flops += taken * st.oracle.flops_subgradient()
    if ok and away:
        _place(st.x, here, st.oracle)
        st.fun, st.fun_at = fun, fun_at
    elif not ok:
        st.fun_at = -1
        st.cost()           # f at the lower point: the best iterate from now on
        # A lower point by at most tol |f| is within what a strict verdict leaves in f
        # (its radius tol ||X||_F, and |f| <= ||G|| ||X||_F for a positively homogeneous
        # f): the verdict stands, there. On ODL with 1 % noise the check found points
        # 1.6e-12 to 7.5e-11 lower at every verdict, and the run went on to its budget;
        # where it withdrew the audit's verdicts they were 1e-8 to 1e-6 lower.
        ok = f0 - st.best_fun <= cert.tol * abs(f0)
    return ok


def _moved(cert: GoldsteinTest, st) -> None:
    """A check that lowered f left X at that lower point (the oracle told): no verdict for
    a horizon, one more move, and f there is the iterate's cost (and may be the best)."""
    cert.refute()
    cert.moves += 1
    cert.restart_early()
    st.fun_at = -1
    st.cost()


def _unfreeze(cert: GoldsteinTest, solver: Solver, st) -> None:
    """The iterates settled (part 1) where no bundle cancels (RSSM: neither its per-pair
    bundles nor the full one; RSM: its own bundle of full subgradients): the steps froze
    before X came within about tol of a stationary point (the full bundle's steps of tol
    ||X||_F / 3 cross the kink of one that close). That counts as an escape
    (``StepContext.escapes``: a decaying rule may start again), and the zigzag check
    (unless ``verify_steps=0``) looks for a lower point: a step of it that lowers f
    leaves X there (the oracle told), and the certificate waits a horizon of new
    subgradients. The early asks of the full bundle (`GoldsteinTest.early_due`) start
    again with the next decay."""
    cert.frozen += 1
    cert.restart_early()
    if cert.verify and not _zigzag(cert, solver, st):
        _moved(cert, st)


def _full_cancel(cert: GoldsteinTest, solver: Solver, st, level: float | None = None
                 ) -> float:
    """`full_cancel` at the iterate, its points within the radius of part 1 (steps of
    tol ||X||_F / (FULL_BUNDLE - 1)), or within ``level`` ||X||_F (an early ask); its
    subgradients count as solver work."""
    st.flops += FULL_BUNDLE * st.oracle.flops_subgradient()
    radius = cert.tol if level is None else level
    return full_cancel(solver.problem, st.x, st.oracle, length=radius / (FULL_BUNDLE - 1))


def _weak(cert: GoldsteinTest, c: Certificate, solver: Solver, st) -> bool:
    """Whether a verdict gets the zigzag check: every one when its steps were given; by
    default those whose subgradients cancel to more than `CHECK_ABOVE`, read on RSM's own
    bundle, and for RSSM (whose per-pair bundles cancel less at the same points) on the
    full bundle (`_full_cancel`, asked now unless part 2 already did)."""
    if cert.check_above == -math.inf:
        return True
    if not cert.blocks:
        return c.cancel > cert.check_above
    if not math.isfinite(c.full):
        c = cert.note_full(_full_cancel(cert, solver, st))
    return not c.full <= cert.check_above      # NaN: check


def _record(rec: TraceRecorder, st, certificate, observers) -> Progress:
    prog = rec.record(st, certificate)
    for obs in observers:
        obs.record(prog)
    return prog


def _still_falling(trace: dict, k: int, best: int, fun: float) -> str:
    """The advice a run ended by its budget gets where its least cost came in the last
    tenth of the run, below every recorded cost before that tenth by more than rounding
    (a new user could not tell a run cut short from one that had stalled: l1 Procrustes
    at n = 500, p = 2 ended at error 0.12 on the budget of 1000, and converged at 2322)."""
    if not (0 < best and k - best <= k // 10 and math.isfinite(fun)):
        return ""
    its = np.asarray(trace.get("iteration", ()), dtype=float)
    costs = np.asarray(trace.get("cost", ()), dtype=float)
    before = costs[(its <= k - k // 10 - 1) & np.isfinite(costs)] if costs.size else costs
    if before.size and not before.min() - fun > 1e-12 * max(abs(fun), abs(before.min())):
        return ""
    return (f"; f was still falling (a new least value at iteration {best}): more "
            "iterations may let it converge")


def _at_zero(f: float, level: float) -> str:
    """The message of a run stopped at a start whose cost is 0 to rounding."""
    return (f"converged at the start: f(x0) = {f:.3g} is 0 to rounding (at most {level:.2g} "
            "for these data), the least value f >= 0 takes: x0 is a global minimizer (an "
            "exact fit)")


#: Iterations after which a budget-ended run none of whose evaluated iterates was below
#: f(x0) says so (`_never_lower`).
NEVER_LOWER_AFTER = 10


#: A rule none of whose steps moved X by more than this times ||X||_F moved it by rounding
#: alone (the polar factor of X - gamma G recomputed: about 1e-16 ||X||_F); the budget-end
#: message then says so (`_rounding_steps`).
ROUNDING_STEP = 1e-13


def _rounding_steps(st, stepsize: StepSize, checks: bool) -> str:
    """The advice a budget-ended run gets where no step of its rule moved X beyond
    rounding (a user's audit: ``stepsize=1e-20`` ran its budget, the error falling from
    0.19 to 1e-3 through the convergence test's checks alone, under the rule's name)."""
    return (f"; no step of {_rule_name(stepsize)} moved X by more than "
            f"{st.longest_step:.2g} (rounding; step size {st.gamma:.3g})"
            + (", so what progress there was came from the convergence test's checks"
               if checks else "") + ": a rule with longer steps goes further")


def _test_holds(cert: GoldsteinTest | None) -> bool:
    """The convergence test's last value holds (a limit of the user's that fired with it
    in an `AllOf` ends the run, and its message says the test held there too)."""
    return cert is not None and cert.last is not None and bool(cert.last.converged)


def _never_lower(f0: float, clipped: int = 0, k: int = 0,
                 stepsize: StepSize | None = None) -> str:
    """The advice a run ended by its budget gets where no iterate it evaluated was below
    its start (a user's cost with the subgradient's sign flipped ran 1000 iterations, f
    rising to 35 from -0.21, and heard only that the test had not held). Where most steps
    were clipped to the diameter the rule's lengths are the cause, and the advice names
    them (a user's audit: ``stepsize=100`` heard that x0 or the subgradient was wrong)."""
    said = f"; no iterate was below the start (f(x0) = {f0:.6g})"
    if stepsize is not None and k > 0 and 2 * clipped >= k:
        return (f"{said}: {clipped} of {k} steps of {_rule_name(stepsize)} were longer "
                "than the manifold's diameter and clipped to it (Result.n_clipped), so "
                "they land anywhere; give shorter steps, or leave stepsize out for the "
                "default rule, which needs no length (else x0 may be a minimizer the test "
                "could not confirm)")
    return (f"{said}: x0 may be a minimizer the test could not confirm, or the subgradient "
            "may not be one of f (rssm.diagnostics.check_subgradient(problem) compares the "
            "two)")


def _finish(solver, st, rec, stop, cert, reason, message, converged, observers, stepsize,
            settings, tol, dead=False, last_certified=False) -> Result:
    if not message:
        message = str(reason)
    if dead:
        converged = False
    elif rec.last_iteration != st.k:
        # Ended between recording points: record the last iterate, and let callbacks see
        # that row too, except after a user interrupt (no user code runs after Ctrl-C).
        last = None if cert is None else cert.last
        if reason is StopReason.INTERRUPTED:
            _record(rec, st, last, ())
        else:
            try:
                stop.final(_record(rec, st, last, observers))
            except KeyboardInterrupt:
                reason = StopReason.INTERRUPTED
                message = f"{interrupted_by()} after {iterations(st.k)}"
                converged = False
                if rec.last_iteration != st.k:
                    _record(rec, st, last, ())
    else:
        try:
            st.cost()
        except KeyboardInterrupt:
            reason = StopReason.INTERRUPTED
            message = f"{interrupted_by()} after {iterations(st.k)}"
    if reason is StopReason.INTERRUPTED:
        converged = False
    last_fun = st.fun if st.fun_at == st.k else float("nan")
    # The best iterate by cost, except when the criterion that stopped the run certified
    # the last iterate itself (the built-in target error): then that is the point asked for.
    use_best = (st.best_k >= 0 and math.isfinite(st.best_fun)
                and not (math.isfinite(last_fun) and last_fun < st.best_fun)
                and not last_certified)
    x = st.best_x if use_best else st.x
    fun = st.best_fun if use_best else last_fun
    problem = solver.problem
    cl = None if cert is None else cert.last
    if reason is StopReason.INTERRUPTED and cert is not None and cl is not None \
            and cl is cert.saved:
        cl = None       # (a verdict a restart set aside, restored, then Ctrl-C: not the run's)
    part = solver.partition
    # The run is over: Ctrl-C while its trace and error are put together (the error of
    # ODL's signed permutation, a Dask problem's ground truth) must not lose it.
    trace, error, cut = None, math.nan, False
    for _attempt in range(3):
        try:
            if trace is None:
                trace = rec.as_dict()
            if problem.has_error and not cut:
                error = error_at(problem, x)     # a copy: a user's may change its X
            break
        except KeyboardInterrupt:
            if not cut:
                message = (f"{interrupted_by()} after {iterations(st.k)}, while the "
                           "result was put together (the error was not evaluated)")
            cut = True
            reason, converged = StopReason.INTERRUPTED, False
    if trace is None:
        raise KeyboardInterrupt
    if reason in (StopReason.MAX_ITER, StopReason.MAX_TIME) and cert is not None \
            and not _test_holds(cert):
        message += _still_falling(trace, st.k, st.best_k if use_best else st.k, fun)
    if reason in (StopReason.MAX_ITER, StopReason.MAX_TIME) and use_best and st.best_k == 0 \
            and st.k >= NEVER_LOWER_AFTER:
        message += _never_lower(fun, st.n_clipped, st.k, stepsize)
    elif reason in (StopReason.MAX_ITER, StopReason.MAX_TIME) and st.k >= NEVER_LOWER_AFTER \
            and 0 < st.longest_step <= ROUNDING_STEP * math.sqrt(x.shape[1]):
        message += _rounding_steps(st, stepsize, cert is not None and cert.moves > 0)
    # Ctrl-C held while the Result is built (real SIGINTs landed in the feasibility's
    # product and lost a finished run), then noted on it
    with HeldInterrupt() as held:
        res = _result(solver, st, rec, stepsize, settings, tol, reason, message, converged,
                      x, fun, last_fun, use_best, trace, error, cl, part)
    if held.interrupted and reason is not StopReason.INTERRUPTED:
        reason = res.stop_reason = StopReason.INTERRUPTED
        res.message = f"{interrupted_by()} after {iterations(st.k)}"
        res.converged = False
    if reason is not StopReason.INTERRUPTED:
        try:
            for obs in observers:
                obs.finish(res)
        except KeyboardInterrupt:          # the Result is complete: say it was cut short
            res.stop_reason = StopReason.INTERRUPTED
            res.message = f"{interrupted_by()} after {iterations(st.k)}"
            res.converged = False
    return res


def _settings_copy(value):
    """A rule's `describe` as the run had it: containers (dict, list, tuple, set) and small
    arrays (at most `SETTINGS_COPY_MAX` entries) copied, so that a list or array setting the
    rule keeps, which its user later changes, does not change a finished run's record (a
    user's audit); anything else, a large table or an object, kept as it is (a review: a
    deep copy held 160 MB per Result of a rule's lookup table)."""
    if isinstance(value, dict):
        return {k: _settings_copy(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return type(value)(_settings_copy(v) for v in value)
    if isinstance(value, np.ndarray) and value.size <= SETTINGS_COPY_MAX \
            and not isinstance(value, np.memmap):
        return value.copy()
    return value


#: Arrays of at most this many entries in a rule's settings are copied into its Result.
SETTINGS_COPY_MAX = 10_000


def _result(solver, st, rec, stepsize, settings, tol, reason, message, converged, x, fun,
            last_fun, use_best, trace, error, cl, part) -> Result:
    return Result(
        x=x.copy(), fun=float(fun), n_iter=st.k, time=st.time, flops=st.flops,
        stop_reason=reason, trace=trace, error=error,
        feasibility=stiefel.feasibility(x), method=solver.method, n_blocks=solver.n_blocks,
        selection=settings.get("selection"), stepsize=_settings_copy(stepsize.describe()),
        seed=settings.get("seed"),
        partition=None if part is None else [b.copy() for b in part.blocks],
        message=message, stationarity=float(rec.last_value("stationarity")), certificate=cl,
        x_last=st.x.copy(), fun_last=float(last_fun),
        best_iteration=st.best_k if use_best else st.k, converged=bool(converged), tol=tol,
        n_cost=st.n_cost, n_clipped=st.n_clipped,
        clip_steps=bool(settings.get("clip_steps", True)), threads=_threads_line(settings))


def _threads_line(settings: dict[str, Any]) -> str:
    """`rssm.Result.threads` as the observers' ``finish`` sees it: ``settings["threads"]``
    is the run's `RunThreads.describe` (or its line), read while the setting is held."""
    line = settings.get("threads", "")
    return str(line() if callable(line) else line)
