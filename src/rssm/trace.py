"""What a run records, and the `Result` it returns."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rssm.stopping import StopReason

__all__ = ["Trace", "Result", "TRACE_COLUMNS"]

#: Columns of `Result.trace`, in order.
TRACE_COLUMNS = ("iteration", "time", "flops", "cost", "error")


class Trace:
    """Append-only table with the columns of `TRACE_COLUMNS`."""

    def __init__(self) -> None:
        self._rows: list[tuple[float, ...]] = []

    def append(self, iteration: int, time: float, flops: float, cost: float, error: float) -> None:
        self._rows.append((iteration, time, flops, cost, error))

    def drop_last(self) -> None:
        """Remove the last row (no-op on an empty trace)."""
        if self._rows:
            self._rows.pop()

    @property
    def last_iteration(self) -> int:
        return int(self._rows[-1][0]) if self._rows else -1

    def as_dict(self) -> dict[str, np.ndarray]:
        arr = np.array(self._rows, dtype=np.float64).reshape(-1, len(TRACE_COLUMNS))
        out = {name: arr[:, i].copy() for i, name in enumerate(TRACE_COLUMNS)}
        out["iteration"] = out["iteration"].astype(np.int64)
        return out


@dataclass
class Result:
    """Outcome of `rssm.minimize`.

    Attributes
    ----------
    x : ndarray, shape (n, p)
        Final iterate (on St(n, p); the last finite one if the run hit a non-finite value).
    fun : float
        f(x).
    n_iter : int
        Iterations done.
    time : float
        Solver wall time in seconds, recording and error evaluation excluded.
    flops : float
        Flop-model count of all iterations.
    stop_reason : StopReason
        Why the run ended.
    trace : dict of str to ndarray
        ``iteration``, ``time``, ``flops``, ``cost``, ``error`` (NaN when the problem has no
        ground truth), recorded every ``record_every`` iterations, at the start and at the end.
    error : float
        Final ground-truth error, or NaN.
    feasibility : float
        ||x^T x - I||_max of the final iterate.
    method, n_blocks, selection, stepsize, seed, partition
        The run's settings (``n_blocks`` is 1 and ``partition`` None for RSM).
    message : str
        One line on why the run ended.
    threads : str
        The thread setting of the run and, for ``threads="auto"``, the thread counts it
        chose (see `rssm.threads`).
    """

    x: np.ndarray
    fun: float
    n_iter: int
    time: float
    flops: float
    stop_reason: StopReason
    trace: dict[str, np.ndarray]
    error: float = math.nan
    feasibility: float = math.nan
    method: str = "rssm"
    n_blocks: int = 1
    selection: str | None = None
    stepsize: dict[str, Any] = field(default_factory=dict)
    seed: Any = None
    partition: list[np.ndarray] | None = None
    message: str = ""
    threads: str = ""

    @property
    def success(self) -> bool:
        """True unless the run ended on a non-finite value."""
        return self.stop_reason is not StopReason.NON_FINITE

    def __repr__(self) -> str:
        n, p = self.x.shape
        blocks = f", l={self.n_blocks} ({self.selection})" if self.method == "rssm" else ""
        lines = [
            f"rssm.Result: {self.method.upper()}{blocks} on St({n}, {p})",
            f"  stop reason   {self.stop_reason.value}: {self.message}",
            f"  iterations    {self.n_iter}",
            f"  solver time   {self.time:.4g} s",
            f"  flops         {self.flops:.4g}",
            f"  final cost    {self.fun:.10g}",
            (f"  final error   {self.error:.4g}" if not math.isnan(self.error)
             else "  final error   n/a"),
            f"  feasibility   {self.feasibility:.2e} (||X^T X - I||_max)",
        ]
        if self.threads:
            lines.append(f"  threads       {self.threads}")
        return "\n".join(lines)
