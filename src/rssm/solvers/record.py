"""What a run records, and who watches it: `Record` options and `Observer` objects.

The loop does not know what is recorded. At each recording point it asks the
`TraceRecorder` for a row; the recorder evaluates its columns off the clock and hands
the resulting `rssm.stopping.Progress` to the criteria and to every `Observer` (a progress
bar, a logger, your own). A new column is a function ``fn(x) -> float`` in
``Record(columns={...})``; a new observer is a subclass with the hooks it needs.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rssm import stiefel
from rssm._validation import (
    as_int,
    check_bool,
    check_signature,
    describe,
    integer_valued,
    real_value,
    type_name,
)
from rssm.problem import NoGroundTruth
from rssm.stopping import Progress

__all__ = ["Record", "Observer", "TraceRecorder", "as_record"]


@dataclass(frozen=True)
class Record:
    """What `rssm.minimize` records and how often.

    Parameters
    ----------
    every : int, optional
        A row every this many iterations, plus the first and the last. Default: about 200
        rows over the iteration budget (``max(1, max_iter // 200)``, or of a
        `rssm.stopping.MaxIterations` given in ``stop=``); without one (``max_time``
        alone, or a criterion of your own), every 10 iterations, the spacing doubled
        after each 1000 rows, so that a run of hours keeps a trace of a few thousand
        rows (the criteria and the callback, read at the rows, are read as often).
    stationarity : bool
        Also record ||P_T(G)||_F (eq. ``eq-Rsubdiff``) for the oracle's full subgradient
        G: one full subgradient per row, off the clock. Off by default: on a nonsmooth
        problem it does not go to 0 (the convergence test of
        `rssm.solvers.certificate` does), and for RSSM a full subgradient costs l/2
        iterations.
    columns : mapping of str to callable, optional
        Extra columns ``name -> fn(x)`` evaluated at each row (off the clock); they appear
        in ``Result.trace`` after the standard ones.
    best : bool, optional
        Which iterates ``Result.x`` (the least f) is chosen from (but for a run stopped
        by ``target_error``, which returns the iterate that met it). None (default): every
        iterate where f is cheap next to an iteration (the data problems: their caches
        give f in the pass that computes the subgradient) or where the step rule reads f
        (the default ``"auto"`` with RSM does); otherwise the iterates whose f was
        evaluated (the recorded rows, the rule's reads). True: every iterate of any
        problem (one more cost call per iteration where the rule does not read f). False:
        only the evaluated ones: faster where the rule does not read f and an iteration
        is cheap (`python -m benchmarks.best_every_iterate`: with RSSM, l = 5, 20 % of the
        wall time on the paper's ODL and 47 % on `SparsePCA.synthetic()`, RSM 20 % on the
        latter, 0-2 % on the paper's DPCP and on ODL with l = 3), at the price of a
        returned point that depends on the recording (on those default runs the best f
        moved by 1e-12 relative or less; with a constant step on l1 Procrustes by 4 %).
        Unlike ``every`` (which rows are recorded never changes the path), ``best``
        changes which iterates have f evaluated, and the convergence test's relaxed
        first part reads the least f of those (docs/convergence.md): with a rule that
        does not read f, ``best=True`` or ``False`` can move the verdict, and so the
        path after it (``||Y^T x||_1``, p = 1, ``Geometric(0.01, 0.995)``: 2239
        iterations with ``best=True`` against 4532).
    """

    every: int | None = None
    stationarity: bool = False
    columns: Mapping[str, Callable[[np.ndarray], float]] = field(default_factory=dict)
    best: bool | None = None

    def __post_init__(self) -> None:
        if self.every is not None:
            object.__setattr__(self, "every", as_int(self.every, "Record(every=...)", minimum=1))
        check_bool(self.stationarity, "stationarity")
        if self.best is not None and not isinstance(self.best, (bool, np.bool_)):
            raise TypeError(f"best must be None, True or False, got {describe(self.best)}")
        if not isinstance(self.columns, Mapping):
            raise TypeError("Record columns must be a mapping name -> fn(x) -> float, got "
                            f"{type(self.columns).__name__}")
        for name, fn in self.columns.items():
            if isinstance(name, str) and name in _STANDARD:
                raise ValueError(f"Record column {name!r} would replace a standard column of "
                                 f"the trace ({', '.join(_STANDARD)}); name it otherwise")
            if not isinstance(name, str) or not callable(fn):
                raise TypeError(
                    f"Record columns must map str names to callables, got {name!r}: "
                    f"{type(fn).__name__}")
            check_signature(fn, 1, f"Record column {name!r}", "fn(x)")


#: What ``record=`` allows, as its errors say.
_RECORD_ALLOWED = ("record must be None, an int >= 1 (record every N iterations) or a "
                   "rssm.Record")


def as_record(value: Any) -> Record:
    """``record=`` of `rssm.minimize`: None, an int (every), or a `Record`.

    Parameters
    ----------
    value : None, int or Record
        None for the defaults, an int >= 1 (or an integer-valued float) for a row every
        that many iterations, or the options themselves.

    Returns
    -------
    Record
        ``value`` itself for a `Record`, else a new one.

    Raises
    ------
    TypeError
        ``value`` is of another type (a bool included).
    ValueError
        ``value`` is an int below 1.
    """
    if value is None:
        return Record()
    if isinstance(value, Record):
        return value
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{_RECORD_ALLOWED}, got {value!r}")
    value = integer_valued(value)
    if isinstance(value, (int, np.integer)):
        if value < 1:
            raise ValueError(f"{_RECORD_ALLOWED}, got {int(value)}")
        return Record(every=int(value))
    raise TypeError(f"{_RECORD_ALLOWED}, got {type_name(value)}")


class Observer:
    """Watches a run. Override the hooks you need; each is called outside the timed
    region. ``record`` receives every recorded row, the last one included."""

    def start(self, info: Mapping[str, Any]) -> None:
        """Before the first iteration; ``info`` has the run's settings.

        Parameters
        ----------
        info : mapping of str to object
            ``method`` ("rssm" or "rsm"), ``n_blocks``, ``shape`` (n, p) and the settings
            `rssm.minimize` passes on (``seed``, ``selection``, ``threads``: the thread
            setting as the run starts, which `rssm.Result.threads` repeats, adding, with
            ``threads=None``, that another run held the pools during this one, ...).
        """

    def record(self, progress: Progress) -> None:
        """At each recording point.

        Parameters
        ----------
        progress : Progress
            The recorded row: iteration, solver time, flops, cost, error (None without a
            ground truth), stationarity (when recorded) and, when the run keeps snapshots
            (`rssm.minimize` does with a ``callback``), a read-only copy of X.
        """

    def finish(self, result: Any) -> None:
        """With the `rssm.Result`, once the run has ended (not after Ctrl-C).

        Parameters
        ----------
        result : rssm.Result
            The run's result, complete (trace, message, best point).
        """


_STANDARD = ("iteration", "time", "flops", "cost", "error", "stationarity")


def _column(name: str, fn: Callable[[np.ndarray], float], x: np.ndarray) -> float:
    """A custom column's value at ``x`` (read-only), as a float, or an error naming it."""
    out = fn(x)
    try:
        if isinstance(out, (str, bytes)) or getattr(out, "ndim", 0):
            raise TypeError   # (a 1-entry array: NumPy 2.2 and older, PyTorch convert it)
        return float(out)
    except (TypeError, ValueError):
        raise TypeError(f"Record column {name!r} must return a real number, got "
                        f"{describe(out)}") from None


#: Rows a trace without an iteration budget records at one spacing before the spacing
#: doubles (`TraceRecorder`'s ``thin``).
THIN_ROWS = 1000


class TraceRecorder:
    """Builds the trace: a row every ``every`` iterations (and at the ends).

    Parameters
    ----------
    problem : Problem
        For ``error`` (when it has a ground truth).
    options : Record
        Frequency and columns.
    every : int
        Iterations between rows (``options``' frequency, resolved for the run).
    snapshot : bool
        Hand a read-only copy of X to the criteria and observers at each row (needed by a
        callback; one n x p copy per row, off the clock).
    thin : bool
        Double ``every`` each time `THIN_ROWS` more rows have been recorded at the current
        spacing: the default of a run without an iteration budget (``max_time`` alone),
        whose trace otherwise grew by a row every 10 iterations for as long as it ran (a
        user's audit: 50 000 rows in a minute, about 0.4 GiB an hour on a small
        problem). Its rows then number about `THIN_ROWS` per doubling of the iterations.
    """

    def __init__(self, problem: Any, options: Record, every: int, snapshot: bool = False,
                 thin: bool = False):
        self.problem = problem
        self.options = options
        self.every = every
        self.snapshot = snapshot
        self.thin = thin
        self._at_spacing = 0          # rows recorded at the current spacing (thin only)
        self.columns = _STANDARD + tuple(options.columns)
        self._rows: list[tuple[float, ...]] = []

    def due(self, k: int) -> bool:
        """Whether iteration ``k`` gets a row (``k`` a multiple of ``every``).

        Parameters
        ----------
        k : int
            Iteration number.

        Returns
        -------
        bool
            True when ``k % every == 0``.
        """
        return k % self.every == 0

    @property
    def last_iteration(self) -> int:
        """The iteration of the last row, -1 before the first."""
        return int(self._rows[-1][0]) if self._rows else -1

    def record(self, state: Any, certificate: Any = None) -> Progress:
        """Append the row of ``state`` (its cost evaluated if needed) and return it as a
        `Progress`.

        The error, the stationarity and the custom columns are evaluated here, off the
        clock. With ``thin``, the spacing ``every`` may double after the row.

        Parameters
        ----------
        state : SolverState
            The run's state (`rssm.solvers.base.SolverState`): iterate ``x``, iteration
            ``k``, time, flops, step norm, best cost, oracle.
        certificate : Certificate, optional
            The convergence certificate's value at this iteration
            (`rssm.solvers.certificate`), passed on in the `Progress`.

        Returns
        -------
        Progress
            The row: ``error`` None without a ground truth, ``stationarity`` None unless
            recorded (or not finite), ``step_norm`` None at iteration 0, ``x`` a
            read-only copy of the iterate with ``snapshot``, else None.
        """
        x = state.x
        cost = state.cost()
        has_err = self.problem.has_error
        # a copy: a user's error function that lines up signs in place (X *= ...) moved
        # the run's iterate off St(n, p)
        err = error_at(self.problem, x) if has_err else math.nan
        stat = _stationarity(state.oracle, x) if self.options.stationarity else math.nan
        extra = ()
        if self.options.columns:
            view = x.view()
            view.flags.writeable = False      # a column reads X; it cannot change the run's
            extra = tuple(_column(name, fn, view) for name, fn in self.options.columns.items())
        self._rows.append((state.k, state.time, state.flops, cost, err, stat) + extra)
        if self.thin:
            self._at_spacing += 1
            if self._at_spacing >= THIN_ROWS and state.k % (2 * self.every) == 0:
                self.every *= 2
                self._at_spacing = 0
        snap = None
        if self.snapshot:
            snap = x.copy()
            snap.flags.writeable = False
        return Progress(state.k, state.time, state.flops, cost, err if has_err else None, snap,
                        stationarity=None if math.isnan(stat) else stat,
                        step_norm=None if state.k == 0 else state.step_norm,
                        best_cost=state.best_fun, certificate=certificate)

    def last_value(self, column: str) -> float:
        """The last row's value of ``column`` (NaN without rows).

        Parameters
        ----------
        column : str
            A name of `columns` (a standard column or a custom one).

        Returns
        -------
        float
            Its value in the last row.
        """
        return self._rows[-1][self.columns.index(column)] if self._rows else math.nan

    def drop_last(self) -> None:
        """Remove the last row, if any (the loop drops a row recorded at an interrupted
        iteration)."""
        if self._rows:
            self._rows.pop()

    def as_dict(self) -> dict[str, np.ndarray]:
        """The trace so far, one array per column.

        Returns
        -------
        dict of str to numpy.ndarray
            Column name (`columns`) -> its values, one per row (float64; ``iteration`` as
            int64); empty arrays without rows.
        """
        arr = np.array(self._rows, dtype=np.float64).reshape(-1, len(self.columns))
        out = {name: arr[:, i].copy() for i, name in enumerate(self.columns)}
        out["iteration"] = out["iteration"].astype(np.int64)
        return out


def _stationarity(oracle: Any, x: np.ndarray) -> float:
    """||P_T(G)||_F for the oracle's full subgradient G at x (eq. ``eq-Rsubdiff``); NaN if
    it is not finite."""
    with np.errstate(all="ignore"):
        g = np.asarray(oracle.subgradient(), dtype=np.float64)
        val = float(np.linalg.norm(stiefel._tangent_projection(x, g)))
    return val if math.isfinite(val) else math.nan


def error_at(problem: Any, x: np.ndarray, no_truth: Any = math.nan) -> Any:
    """``problem.error`` at a copy of ``x``; ``no_truth`` (NaN by default) where this
    instance has no ground truth (an `error` that defers to `rssm.Problem.error`'s
    `NoGroundTruth`).

    Parameters
    ----------
    problem : Problem
        The problem whose error is measured (its ``_error_of_iterate`` hook, where it has
        one, is called with ``x`` itself instead).
    x : ndarray, shape (n, p)
        The point (``problem.error`` gets a copy).
    no_truth : object, optional
        What to return without a ground truth.

    Returns
    -------
    float or object
        The error as a float, or ``no_truth``.
    """
    try:
        hook = getattr(problem, "_error_of_iterate", None)
        out = hook(x) if hook is not None else problem.error(x.copy())
        if type(out) is float:
            return out
        try:
            # what float() takes (a torch tensor of one entry, a NumPy bool: a review
            # found them refused by the stricter check below)
            return float(out)
        except (TypeError, ValueError):
            # named: a subclass's error returning an array or None gave NumPy's "only
            # 0-dimensional arrays can be converted" (a user's audit)
            return real_value(out, f"{type(problem).__name__}.error")
    except NoGroundTruth:
        return no_truth
