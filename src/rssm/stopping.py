"""Stopping criteria as small objects that know their reason and combine with ``|`` and ``&``.

Iteration and time limits and the convergence test (`Converged`) are checked after every
iteration; criteria that need the error or a user callback are checked at recording
points (see `rssm.Record`), where the error is evaluated anyway and the time it takes is
not counted. Each criterion owns its stop's message and whether it means convergence.
"""

from __future__ import annotations

import abc
import enum
from collections.abc import Callable
from typing import Any

import numpy as np

from rssm._validation import as_int, as_positive_float, check_signature, iterations, type_name
from rssm.progress import Progress

__all__ = [
    "StopReason",
    "Progress",
    "StoppingCriterion",
    "MaxIterations",
    "MaxTime",
    "TargetError",
    "MinStationarity",
    "CostStagnation",
    "MinStepNorm",
    "CallbackStop",
    "Converged",
    "CONVERGED",
    "AnyOf",
    "AllOf",
]


class StopReason(str, enum.Enum):
    """Why a run ended.

    The built-in criteria make `Result.success` True only with the `CONVERGED` reasons
    (``converged``, ``target_error``, ``stationary``); a criterion of your own whose
    ``indicates_convergence`` is True makes it True with whatever reason it returns. The
    other reasons say that a budget ran out (``max_iter``, ``max_time``), the steps or
    the cost stalled without a convergence test firing (``stalled``, ``min_step``,
    ``no_progress``), the user stopped the run (``callback``, ``interrupted``), a value
    was not finite or left float64's range (``non_finite``: a cost or subgradient NaN or
    infinite, or a subgradient whose squared norm overflows or underflows; the message
    says which and what to scale) or the data became unreadable (``data_error``).

    Parameters
    ----------
    value : str
        The value of a reason, as ``str(reason)`` gives it: ``StopReason("max_iter")`` is
        `StopReason.MAX_ITER` (an unknown value raises ``ValueError``).
    """

    MAX_ITER = "max_iter"
    MAX_TIME = "max_time"
    TARGET_ERROR = "target_error"
    STATIONARY = "stationary"
    NO_PROGRESS = "no_progress"
    CALLBACK = "callback"
    NON_FINITE = "non_finite"
    INTERRUPTED = "interrupted"
    #: The step could not go on: the step size underflowed to 0 or the rule failed after
    #: the first iteration, the direction was 0, or the steps left X unchanged.
    STALLED = "stalled"
    #: `MinStepNorm`: ||X_{k+1} - X_k||_F fell below its tolerance.
    MIN_STEP = "min_step"
    #: `Converged`: the Goldstein certificate of `rssm.solvers.certificate` holds: the
    #: recent iterates lie in a ball of relative radius ``tol`` and recent subgradients
    #: cancel (or vanish) there.
    CONVERGED = "converged"
    #: The data or the workers holding it became unavailable (`rssm.data.DataError`): the
    #: run so far is returned.
    DATA_ERROR = "data_error"

    def __str__(self) -> str:
        return self.value


#: The reasons that mean a convergence criterion fired: `Result.success` is True for these.
CONVERGED = frozenset({StopReason.TARGET_ERROR, StopReason.STATIONARY, StopReason.CONVERGED})


class StoppingCriterion(abc.ABC):
    """Base class. ``check(progress)`` returns a `StopReason` or None.

    A criterion owns the meaning of its stop: `message` says in one line why the run
    ended, and `indicates_convergence` whether that stop means the run converged
    (`rssm.Result.success`). A new criterion is one subclass: nothing else needs editing.

    ``needs_record`` is True for criteria that can only be decided at recording points.
    ``limits_run`` is True for a budget that ends every run by itself (iterations, time,
    evaluations): `rssm.minimize` adds its default iteration budget unless ``stop=`` holds
    one.
    """

    needs_record = False
    #: True when this criterion's stop means convergence (`rssm.Result.success`).
    indicates_convergence = False
    #: True when this criterion ends every run on its own (a budget).
    limits_run = False

    @abc.abstractmethod
    def check(self, progress: Progress) -> StopReason | None:
        """A reason to stop, or None.

        Parameters
        ----------
        progress : Progress
            The run after its last iteration. Between recording points only
            ``iteration``, ``time``, ``flops``, ``step_norm``, ``best_cost`` and
            ``certificate`` are set (``cost`` is None); at a recording point the row's
            values too. A criterion with ``needs_record`` is asked at recording points
            only.

        Returns
        -------
        StopReason or None
            Why the run stops now, or None to go on.
        """

    def fired(self) -> StoppingCriterion:
        """The criterion whose stop was returned by the last `check` (itself, or for a
        combination, the member that decided).

        Returns
        -------
        StoppingCriterion
            The criterion whose `message` and `indicates_convergence` describe the stop.
        """
        return self

    def message(self, progress: Progress) -> str:
        """One line on why the run ended, for `rssm.Result.message`.

        Parameters
        ----------
        progress : Progress
            The row on which `check` returned the stop.

        Returns
        -------
        str
            The reason in words, with the iteration count.
        """
        return f"{type(self).__name__} fired after {iterations(progress.iteration)}"

    def _reset_for_run(self) -> None:
        """Called by `rssm.minimize` before a run's first check: forget what an earlier
        run left (a criterion object may serve several runs). Default: nothing. (Private:
        a public ``reset`` clashed with users' criteria that have their own; a review.)"""
        return None

    def final(self, progress: Progress) -> None:
        """Called once with the last recorded row when the run stopped on a row that was
        not checked: a time limit, an iteration limit between recording points or a
        non-finite step (not after a user interrupt). Default: nothing.

        Parameters
        ----------
        progress : Progress
            The last recorded row.
        """
        return None

    def __or__(self, other: StoppingCriterion) -> AnyOf:
        return AnyOf(self, other)

    def __and__(self, other: StoppingCriterion) -> AllOf:
        return AllOf(self, other)


def checked_reason(criterion: StoppingCriterion, value: object) -> StopReason | None:
    """``criterion.check``'s result, refused by name unless it is a `StopReason` or None (a
    bool, a string: "False" used to count as a stop and crash the Result's printing).

    Parameters
    ----------
    criterion : StoppingCriterion
        The criterion that returned ``value`` (named in the error).
    value : object
        What its `StoppingCriterion.check` returned.

    Returns
    -------
    StopReason or None
        ``value`` itself.

    Raises
    ------
    TypeError
        ``value`` is neither a `StopReason` nor None.
    """
    if value is None or isinstance(value, StopReason):
        return value
    raise TypeError(f"{type(criterion).__name__}.check must return a rssm.StopReason (e.g. "
                    f"StopReason.TARGET_ERROR) or None to go on, got {value!r}")


def _check_criteria(criteria: tuple) -> tuple:
    for i, c in enumerate(criteria):
        if not isinstance(c, StoppingCriterion):
            raise TypeError(
                f"criteria[{i}] must be a StoppingCriterion (e.g. MaxIterations(100)), "
                f"got {type(c).__name__}"
            )
    return criteria


class MaxIterations(StoppingCriterion):
    """Stop after ``n`` iterations (reason ``max_iter``).

    Parameters
    ----------
    n : int
        The iteration budget, >= 0.
    """

    limits_run = True

    def __init__(self, n: int):
        self.n = as_int(n, "n", minimum=0)

    def check(self, progress: Progress) -> StopReason | None:
        """Whether the iteration budget is spent.

        Parameters
        ----------
        progress : Progress
            See `StoppingCriterion.check`.

        Returns
        -------
        StopReason or None
            `StopReason.MAX_ITER` once ``progress.iteration`` reaches ``n``, else None.
        """
        return StopReason.MAX_ITER if progress.iteration >= self.n else None

    def message(self, progress: Progress) -> str:
        """See `StoppingCriterion.message`.

        Parameters
        ----------
        progress : Progress
            The row on which `check` returned the stop.

        Returns
        -------
        str
            The reason in words, with the iteration count.
        """
        # (`rssm.minimize`'s loop adds what the convergence test did)
        return (f"reached the iteration limit ({self.n})" if progress.iteration == self.n
                else f"reached the iteration limit ({self.n}) after {progress.iteration} "
                "iterations")

    def __repr__(self) -> str:
        return f"MaxIterations({self.n})"


class MaxTime(StoppingCriterion):
    """Stop once the solver time (`rssm.Result.time`: f at the recorded rows counted, the
    error and the other columns not) reaches ``seconds`` (reason
    ``max_time``).

    Parameters
    ----------
    seconds : float
        The time budget in seconds of solver time, > 0.
    """

    limits_run = True

    def __init__(self, seconds: float):
        self.seconds = as_positive_float(seconds, "seconds")

    def check(self, progress: Progress) -> StopReason | None:
        """Whether the time budget is spent.

        Parameters
        ----------
        progress : Progress
            See `StoppingCriterion.check`.

        Returns
        -------
        StopReason or None
            `StopReason.MAX_TIME` once ``progress.time`` reaches ``seconds``, else None.
        """
        return StopReason.MAX_TIME if progress.time >= self.seconds else None

    def message(self, progress: Progress) -> str:
        """See `StoppingCriterion.message`.

        Parameters
        ----------
        progress : Progress
            The row on which `check` returned the stop.

        Returns
        -------
        str
            The reason in words, with the iteration count.
        """
        return (f"reached the time limit ({self.seconds:g} s of solver time) after "
                f"{iterations(progress.iteration)}")

    def __repr__(self) -> str:
        return f"MaxTime({self.seconds})"


class TargetError(StoppingCriterion):
    """Stop when the problem's ``error(X)`` is at most ``target`` (checked at recording points).

    Parameters
    ----------
    target : float
        The largest error that stops the run, >= 0 (reason ``target_error``, a success).
    """

    needs_record = True
    indicates_convergence = True

    def __init__(self, target: float):
        self.target = as_positive_float(target, "target", allow_zero=True)

    def message(self, progress: Progress) -> str:
        """See `StoppingCriterion.message`.

        Parameters
        ----------
        progress : Progress
            The row on which `check` returned the stop.

        Returns
        -------
        str
            The reason in words, with the iteration count.
        """
        return (f"the error reached the target {self.target:g} after {progress.iteration} "
                "iterations")

    def check(self, progress: Progress) -> StopReason | None:
        """Whether the recorded error reached the target.

        Parameters
        ----------
        progress : Progress
            See `StoppingCriterion.check`.

        Returns
        -------
        StopReason or None
            `StopReason.TARGET_ERROR` once ``progress.error`` is at most ``target``; None
            while it is larger or None (no ground truth, or no recording point).
        """
        if progress.error is not None and progress.error <= self.target:
            return StopReason.TARGET_ERROR
        return None

    def __repr__(self) -> str:
        return f"TargetError({self.target})"


class MinStationarity(StoppingCriterion):
    """Stop when the recorded stationarity ||P_T(G)||_F is at most ``tol`` (checked at
    recording points; reason ``stationary``).

    The stationarity column is the norm of one Riemannian subgradient P_T(G) at X, G the
    oracle's Euclidean subgradient (eq. ``eq-Rsubdiff``); it is evaluated off the clock at
    each recording point. For a smooth f it tends to 0 at a stationary point. For a
    nonsmooth f it need not: at a sharp minimizer (DPCP, ODL, l1 problems) every single
    subgradient keeps a norm of the order of the sharpness, and the measure that does go
    to 0, dist(0, Riemannian subdifferential) or the paper's surrogate Theta (Prop.
    ``prop-stationarymeasure``), needs the whole subdifferential or a proximal step. On
    such problems rely on `Converged`, the convergence test `rssm.minimize` applies by
    default (Goldstein's epsilon-subdifferential, `rssm.solvers.certificate`); ``tol``
    here fits smooth costs and costs whose subgradient is continuous near the solution.
    It needs the column: ``record=rssm.Record(stationarity=True)``.

    Parameters
    ----------
    tol : float
        The largest recorded ||P_T(G)||_F that stops the run, >= 0.
    """

    needs_record = True
    indicates_convergence = True

    def __init__(self, tol: float):
        self.tol = as_positive_float(tol, "tol", allow_zero=True)

    def message(self, progress: Progress) -> str:
        """See `StoppingCriterion.message`.

        Parameters
        ----------
        progress : Progress
            The row on which `check` returned the stop.

        Returns
        -------
        str
            The reason in words, with the iteration count.
        """
        return (f"||P_T(G)||_F is at most {self.tol:g} (the stationarity tolerance) after "
                f"{iterations(progress.iteration)}")

    def check(self, progress: Progress) -> StopReason | None:
        """Whether the recorded stationarity is within the tolerance.

        Parameters
        ----------
        progress : Progress
            See `StoppingCriterion.check`.

        Returns
        -------
        StopReason or None
            `StopReason.STATIONARY` once ``progress.stationarity`` is at most ``tol``; None
            while it is larger or not recorded.
        """
        st = progress.stationarity
        if st is not None and st <= self.tol:
            return StopReason.STATIONARY
        return None

    def __repr__(self) -> str:
        return f"MinStationarity({self.tol})"


class CostStagnation(StoppingCriterion):
    """Stop when the best cost so far has not decreased by more than
    ``rtol * |best| + atol`` over the last ``window`` epochs (reason ``no_progress``).

    Checked at recording points. An epoch is ``epoch`` iterations: `rssm.minimize` sets
    it to l/2 for RSSM with l blocks (each column moves once per epoch on average) and 1
    for RSM; built by hand it defaults to 1 (``window`` then counts iterations). The best
    cost, not the last one, is compared, because a subgradient method's cost oscillates.
    A stop on this criterion is not a success (`Result.success` is False): the run stalled,
    which a converged run and a run stuck far from a solution both do; read
    ``Result.stationarity`` and, with a ground truth, the error.

    Parameters
    ----------
    window : float
        Epochs over which the best cost must decrease, > 0.
    rtol : float, optional
        Relative decrease that counts as progress, >= 0.
    atol : float, optional
        Absolute decrease that counts as progress, >= 0.
    epoch : float, optional
        Iterations per epoch, > 0.
    """

    needs_record = True

    def __init__(self, window: float, rtol: float = 1e-8, atol: float = 0.0, *,
                 epoch: float = 1.0):
        self.window = as_positive_float(window, "window")
        self.rtol = as_positive_float(rtol, "rtol", allow_zero=True)
        self.atol = as_positive_float(atol, "atol", allow_zero=True)
        self.epoch = as_positive_float(epoch, "epoch")
        self._hist: list[tuple[int, float]] = []

    def _reset_for_run(self) -> None:
        """Forget the best costs of an earlier run (a reused criterion first asked after
        that run's last iteration judged the new run on the old one's costs, and stopped
        it at once; a user's audit)."""
        self._hist = []

    def check(self, progress: Progress) -> StopReason | None:
        """Whether the best cost stalled over the last ``window`` epochs. Keeps the best
        cost of recent rows (forgotten before each run, and when ``progress.iteration``
        is 0 or goes back).

        Parameters
        ----------
        progress : Progress
            See `StoppingCriterion.check`.

        Returns
        -------
        StopReason or None
            `StopReason.NO_PROGRESS` once the best cost at the last recording point at
            least ``window * epoch`` iterations back exceeds the best cost now by at most
            ``rtol * |best| + atol``; None before that many iterations and without a cost.
        """
        if progress.cost is None:
            return None
        k = progress.iteration
        if k == 0 or (self._hist and k <= self._hist[-1][0]):
            self._hist = []  # a new run (the criterion object is reused)
        best = min(progress.cost, self._hist[-1][1]) if self._hist else progress.cost
        self._hist.append((k, best))
        horizon = k - self.window * self.epoch
        then = [b for it, b in self._hist if it <= horizon]
        if not then:
            return None
        del self._hist[: len(then) - 1]  # keep the last point before the horizon
        if then[-1] - best <= self.rtol * abs(best) + self.atol:
            return StopReason.NO_PROGRESS
        return None

    def message(self, progress: Progress) -> str:
        """See `StoppingCriterion.message`.

        Parameters
        ----------
        progress : Progress
            The row on which `check` returned the stop.

        Returns
        -------
        str
            The reason in words, with the iteration count.
        """
        return (f"the best cost did not decrease by more than rtol={self.rtol:g} over "
                f"{self.window:g} epochs (after {iterations(progress.iteration)}); not a "
                "convergence test")

    def __repr__(self) -> str:
        return (f"CostStagnation({self.window:g} epochs of {self.epoch:g} iterations, "
                f"rtol={self.rtol:g}, atol={self.atol:g})")


class MinStepNorm(StoppingCriterion):
    """Stop once a step moves X by less than ``tol``: ||X_{k+1} - X_k||_F < tol
    (checked after every iteration; reason `StopReason.MIN_STEP`).

    A subgradient method's steps do not shrink by themselves near a minimizer the way a
    gradient method's do; they shrink as its step size does, so with a decaying or
    adaptive rule this is a "the method has settled" test. An RSSM step changes only the
    columns of one block pair, so its length is that of their change.

    Parameters
    ----------
    tol : float
        The step length below which the run stops, > 0.
    """

    def __init__(self, tol: float):
        self.tol = as_positive_float(tol, "tol")

    def check(self, progress: Progress) -> StopReason | None:
        """Whether the last step was shorter than ``tol``.

        Parameters
        ----------
        progress : Progress
            See `StoppingCriterion.check`.

        Returns
        -------
        StopReason or None
            `StopReason.MIN_STEP` once ``progress.step_norm`` is below ``tol``; None while
            it is not, and before the first step.
        """
        s = progress.step_norm
        return StopReason.MIN_STEP if s is not None and s < self.tol else None

    def message(self, progress: Progress) -> str:
        """See `StoppingCriterion.message`.

        Parameters
        ----------
        progress : Progress
            The row on which `check` returned the stop.

        Returns
        -------
        str
            The reason in words, with the iteration count.
        """
        return (f"the step ||X_k+1 - X_k||_F = {progress.step_norm:.3g} fell below "
                f"{self.tol:g} after {iterations(progress.iteration)}")

    def __repr__(self) -> str:
        return f"MinStepNorm({self.tol})"


class CallbackStop(StoppingCriterion):
    """Call ``fn(progress)`` at each recording point; a truthy return stops the run.

    Parameters
    ----------
    fn : callable
        ``fn(progress) -> bool``, given the `Progress` of each recorded row. True (or any
        truthy value) stops the run with reason ``callback``; False or None goes on.
    """

    needs_record = True

    def __init__(self, fn: Callable[[Progress], Any]):
        if not callable(fn) or isinstance(fn, type):
            raise TypeError(f"callback must be callable, got {type_name(fn)}")
        check_signature(fn, 1, "callback", "callback(progress)")
        self.fn = fn

    def check(self, progress: Progress) -> StopReason | None:
        """Call ``fn(progress)``; a return value with no truth value (an array) raises
        ``TypeError``.

        Parameters
        ----------
        progress : Progress
            See `StoppingCriterion.check`.

        Returns
        -------
        StopReason or None
            `StopReason.CALLBACK` when ``fn(progress)`` is truthy, else None.
        """
        ret = self.fn(progress)
        try:
            if isinstance(ret, np.ndarray) and ret.size == 0:
                raise ValueError   # (NumPy 2.1 and older read it as False, with a warning)
            stop = bool(ret)
        except Exception:                 # (a torch tensor's is a RuntimeError)
            # an audit: an array returned said only "The truth value of an array with
            # more than one element is ambiguous", naming neither the callback nor what
            # it may return
            what = (f"an array of shape {ret.shape}" if isinstance(ret, np.ndarray)
                    else f"a {type(ret).__name__}")
            raise TypeError(f"callback returned {what}, which is neither true nor false: "
                            "return True to stop the run, False or None to go on") from None
        return StopReason.CALLBACK if stop else None

    def message(self, progress: Progress) -> str:
        """See `StoppingCriterion.message`.

        Parameters
        ----------
        progress : Progress
            The row on which `check` returned the stop.

        Returns
        -------
        str
            The reason in words, with the iteration count.
        """
        return f"the callback asked to stop after {iterations(progress.iteration)}"

    def final(self, progress: Progress) -> None:
        """Calls ``fn`` with the last row, so that it sees every row of the trace; its
        return value is ignored. See `StoppingCriterion.final`.

        Parameters
        ----------
        progress : Progress
            The last recorded row, passed to ``fn``.
        """
        self.fn(progress)  # the last row of the trace; the return value no longer matters

    def __repr__(self) -> str:
        return f"CallbackStop({getattr(self.fn, '__name__', 'fn')})"


class _Combination(StoppingCriterion):
    """Members shared by `AnyOf` and `AllOf`: the criteria, whether any of them needs a
    recording point, and `final` forwarded to each of them."""

    _joiner = ""

    def __init__(self, *criteria: StoppingCriterion):
        if not criteria:
            # (a user's audit: AllOf() read as a limit, all() of nothing, took the default
            # budget away and never fired, so the run went on for ever)
            raise ValueError(f"{type(self).__name__} needs at least one criterion, e.g. "
                             f"{type(self).__name__}(MaxIterations(100), TargetError(1e-8))")
        self.criteria = _check_criteria(criteria)
        self.needs_record = any(c.needs_record for c in criteria)
        self._fired: StoppingCriterion | None = None

    def fired(self) -> StoppingCriterion:
        """The member that decided the last stop (itself before any): see
        `StoppingCriterion.fired`."""
        return self if self._fired is None else self._fired.fired()

    @property
    def indicates_convergence(self) -> bool:  # type: ignore[override]
        """Whether the member that decided the last stop means convergence."""
        return self._fired is not None and self._fired.fired().indicates_convergence

    def message(self, progress: Progress) -> str:
        """The deciding member's message ("" before a stop). See
        `StoppingCriterion.message`."""
        return self.fired().message(progress) if self._fired is not None else ""

    def _reset_for_run(self) -> None:
        """Resets every member (`StoppingCriterion._reset_for_run`)."""
        self._fired = None
        for c in self.criteria:
            c._reset_for_run()

    def final(self, progress: Progress) -> None:
        """Calls every member's `final`. See `StoppingCriterion.final`."""
        for c in self.criteria:
            c.final(progress)

    def __repr__(self) -> str:
        return self._joiner.join(map(repr, self.criteria))


class AnyOf(_Combination):
    """Stop when any member fires; the reason is the first member's that fired, or,
    where several fire at once and one of them means success (`Converged`, `TargetError`,
    `MinStationarity`), that one's: a verdict on the last iteration of a budget is a
    success (a user's review: ``MaxIterations(46) | Converged()`` reported ``max_iter``
    for a run whose test held there).

    Every member is asked, even after one has fired, so that a callback sees every
    recording point, including the one where an iteration limit stops the run.
    ``a | b`` builds ``AnyOf(a, b)``.

    Parameters
    ----------
    *criteria : StoppingCriterion
        The members, in the order they are asked.
    """

    _joiner = " | "

    @property
    def limits_run(self) -> bool:  # type: ignore[override]
        """True when some member ends every run on its own."""
        return any(c.limits_run for c in self.criteria)

    def check(self, progress: Progress) -> StopReason | None:
        """Ask every member (those with ``needs_record`` only at recording points).

        Parameters
        ----------
        progress : Progress
            See `StoppingCriterion.check`.

        Returns
        -------
        StopReason or None
            The first member's reason that is not None, or the first such of a member
            whose stop means convergence (that member is then `fired`), or None.
        """
        reason = None
        for c in self.criteria:
            if c.needs_record and progress.cost is None:
                continue
            r = checked_reason(c, c.check(progress))
            if r is not None and (reason is None or (
                    c.fired().indicates_convergence
                    and not self._fired.fired().indicates_convergence)):
                reason, self._fired = r, c
        return reason


class AllOf(_Combination):
    """Stop when every member fires at the same check; the reason is that of a member
    whose stop means success (`Converged`, `TargetError`, `MinStationarity`) where one is
    among them, else the last member's.

    Every member is asked at every check (those with ``needs_record`` only at recording
    points), whatever the others say, so the order of the members does not matter: asked
    in order until one did not fire, a stateful member placed second (`CostStagnation`)
    missed the rows where the first did not fire and stopped the run elsewhere, and
    ``Converged() & MaxIterations(50)`` ended ``max_iter`` where the reversed order ended
    ``converged`` (a user's audit).

    ``a & b`` builds ``AllOf(a, b)``.

    Parameters
    ----------
    *criteria : StoppingCriterion
        The members.
    """

    _joiner = " & "

    @property
    def limits_run(self) -> bool:  # type: ignore[override]
        """True when every member ends every run on its own."""
        return all(c.limits_run for c in self.criteria)

    def check(self, progress: Progress) -> StopReason | None:
        """Ask every member.

        Parameters
        ----------
        progress : Progress
            See `StoppingCriterion.check`.

        Returns
        -------
        StopReason or None
            When every member returns a reason: the first of a member whose stop means
            convergence (that member is then `fired`), else the last member's; None
            otherwise (always None between recording points when a member has
            ``needs_record``).
        """
        fired = []
        every = True
        for c in self.criteria:
            if c.needs_record and progress.cost is None:
                every = False
                continue
            r = checked_reason(c, c.check(progress))
            if r is None:
                every = False
            else:
                fired.append((c, r))
        if not every:
            return None
        c, r = next(((c, r) for c, r in fired if c.fired().indicates_convergence), fired[-1])
        self._fired = c
        return r


class Converged(StoppingCriterion):
    """Stop when the run's convergence certificate holds (reason ``converged``, a
    success): see `rssm.solvers.certificate` for the test and its justification.

    ``rssm.minimize`` adds it with its ``tol`` (default `DEFAULT_TOL`); build it by hand
    only to combine it with ``&``: one inside ``stop=`` sets the run's ``tol`` (a ``tol=``
    beside it must agree) and ``minimize`` then adds none of its own. The certificate is
    computed by the solver loop from the subgradients it already has; this criterion
    reads its verdict from `Progress.certificate`.

    Parameters
    ----------
    tol : float
        Relative radius: the recent iterates must lie within ``tol * ||X||_F`` of each
        other, ||X||_F = sqrt(p).
    """

    indicates_convergence = True

    def __init__(self, tol: float = 1e-10):
        self.tol = as_positive_float(tol, "tol")

    def check(self, progress: Progress) -> StopReason | None:
        """Whether the run's convergence certificate holds.

        Parameters
        ----------
        progress : Progress
            See `StoppingCriterion.check`.

        Returns
        -------
        StopReason or None
            `StopReason.CONVERGED` when ``progress.certificate`` is set and its
            ``converged`` is True, else None.
        """
        cert = progress.certificate
        return StopReason.CONVERGED if cert is not None and cert.converged else None

    def message(self, progress: Progress) -> str:
        """See `StoppingCriterion.message`; adds the certificate's summary.

        Parameters
        ----------
        progress : Progress
            The row on which `check` returned the stop.

        Returns
        -------
        str
            The reason in words, with the iteration count.
        """
        cert = progress.certificate
        how = "" if cert is None else f" ({cert.summary()})"
        return f"converged after {iterations(progress.iteration)}{how}"

    def __repr__(self) -> str:
        return f"Converged(tol={self.tol:g})"
