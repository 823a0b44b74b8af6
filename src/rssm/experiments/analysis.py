"""From CSV rows to per-run traces, median curves across seeds, and hitting times."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np

__all__ = ["Run", "group_runs", "method_order", "step_values", "median_band", "first_reach"]


class Run:
    """The trace of one run, as arrays sorted by iteration.

    Parameters
    ----------
    rows : sequence of dict
        The run's trace rows (as `rssm.experiments.io.read_rows` gives them), at least
        one, in any order; the run's labels (``part``, ``problem``, ``method``,
        ``blocks``, ``seed``, ``stepsize``) are read from the first row after sorting by
        ``iteration``, and the columns ``iteration``, ``time``, ``flops``, ``cost`` and
        ``error`` become float64 arrays.
    """

    def __init__(self, rows: Sequence[dict]):
        rows = sorted(rows, key=lambda r: r["iteration"])
        first = rows[0]
        self.part = first["part"]
        self.problem = first["problem"]
        self.method = first["method"]
        self.blocks = first["blocks"]
        self.seed = first["seed"]
        self.stepsize = first["stepsize"]
        for col in ("iteration", "time", "flops", "cost", "error"):
            setattr(self, col, np.array([r[col] for r in rows], dtype=np.float64))

    @property
    def final_error(self) -> float:
        return float(self.error[-1])


def group_runs(rows: Iterable[dict]) -> dict[tuple, Run]:
    """Runs keyed by (part, problem, method, seed, stepsize).

    Parameters
    ----------
    rows : iterable of dict
        Trace rows of any number of runs.

    Returns
    -------
    dict of tuple to Run
        One `Run` per key (part, problem, method, seed, stepsize).
    """
    buckets: dict[tuple, list[dict]] = {}
    for r in rows:
        buckets.setdefault((r["part"], r["problem"], r["method"], r["seed"], r["stepsize"]),
                           []).append(r)
    return {k: Run(v) for k, v in buckets.items()}


def method_order(keys: Iterable[str]) -> list[str]:
    """``rsm`` first, then RSSM by number of blocks.

    Parameters
    ----------
    keys : iterable of str
        Method labels (``"rsm"``, ``"rssm-l<blocks>"``); repeats are dropped.

    Returns
    -------
    list of str
        The distinct labels in that order.
    """
    def rank(k: str) -> tuple:
        return (0, 0) if k == "rsm" else (1, int(k.split("-l")[-1]) if "-l" in k else 0)
    return sorted(set(keys), key=rank)


def step_values(x: np.ndarray, y: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """y of the last recorded point with x_i <= g, for each g in ``grid``: each recorded
    value held until the next record, the last one after the run's end. Before the first
    point with x > 0 the run is still at its start: y of its first row (on a flops axis
    the start sits at x = 0; a run with no row gives NaN).

    Parameters
    ----------
    x : numpy.ndarray of shape (m,)
        The recorded points' horizontal values, increasing.
    y : numpy.ndarray of shape (m,)
        The recorded values.
    grid : numpy.ndarray
        The points at which to read the held values.

    Returns
    -------
    numpy.ndarray of the shape of ``grid``
        The held value at each grid point.
    """
    pos = x > 0
    xs, ys = x[pos], y[pos]
    out = np.full(grid.shape, np.nan)
    if y.size == 0:
        return out
    out[:] = y[0]
    if xs.size == 0:
        return out
    idx = np.searchsorted(xs, grid, side="right") - 1
    ok = idx >= 0
    out[ok] = ys[idx[ok]]
    return out


def median_band(runs: Sequence[Run], axis: str, n_grid: int = 160):
    """Median and min-max of the error across ``runs`` on a log grid of ``axis``.

    Parameters
    ----------
    runs : sequence of Run
        One per seed.
    axis : {"time", "flops"}
        Horizontal variable.
    n_grid : int
        Points of the log grid.

    Returns
    -------
    grid, median, low, high : ndarray
        From the first recorded point of any run (x > 0) to the median of the runs' ends;
        a run not yet at its first point counts with its starting error, a run that ended
        earlier with its last error, each run's errors held between its records (the
        seeds' thin lines are drawn the same way); nan where any run's error is nan, and
        all empty when that is everywhere.
    """
    firsts = [getattr(r, axis)[getattr(r, axis) > 0] for r in runs]
    firsts = [f for f in firsts if f.size]
    if not firsts:
        empty = np.empty(0)
        return empty, empty, empty, empty
    lo = min(f[0] for f in firsts)
    hi = float(np.median([f[-1] for f in firsts]))
    if hi <= lo:
        hi = lo * 1.0001
    grid = np.geomspace(lo, hi, n_grid)
    vals = np.vstack([step_values(getattr(r, axis), r.error, grid) for r in runs])
    # the starting errors at the first point, so that the median, like each seed's line,
    # starts from them (on a flops axis the start, x = 0, is off the log axis: the median
    # began at the first iterates' errors, 1.5e-3 on DPCP against 0.12 in the time panel)
    starts = np.array([[r.error[0] if r.error.size else np.nan] for r in runs])
    vals, grid = np.hstack([starts, vals]), np.r_[grid[0], grid]
    # where a run's error is unknown (nan) the median and band are nan, so the lines break
    # there (the grid points were dropped, and the line ran straight across the gap, which
    # the legend's "held until the next record" does not describe; an audit)
    gap = np.isnan(vals).any(axis=0)
    if gap.all():
        empty = np.empty(0)
        return empty, empty, empty, empty
    with np.errstate(invalid="ignore"):
        med, lo, hi = np.median(vals, axis=0), vals.min(axis=0), vals.max(axis=0)
    med[gap] = lo[gap] = hi[gap] = np.nan
    return grid, med, lo, hi


def first_reach(run: Run, level: float, axis: str, stay: bool = True) -> float:
    """``axis`` value (time, flops or iteration) at which the error reaches ``level``.

    With ``stay`` (the default) this is the first recorded point from which the error stays
    at or below ``level`` until the run ends, so a brief dip of an oscillating subgradient
    method does not count; otherwise the first recorded point at or below ``level``.
    inf if there is none.

    Parameters
    ----------
    run : Run
        The run.
    level : float
        The error level.
    axis : {"time", "flops", "iteration"}
        Horizontal variable whose value is returned.
    stay : bool, default=True
        Whether the error must stay at or below ``level`` until the run ends.

    Returns
    -------
    float
        The ``axis`` value of that recorded point, or inf.
    """
    below = run.error <= level
    if stay:
        if below.size == 0 or not below[-1]:
            return math.inf
        above = np.nonzero(~below)[0]
        first = 0 if above.size == 0 else int(above[-1]) + 1
    else:
        hit = np.nonzero(below)[0]
        if hit.size == 0:
            return math.inf
        first = int(hit[0])
    return float(getattr(run, axis)[first])
