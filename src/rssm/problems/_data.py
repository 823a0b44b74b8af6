"""Incremental oracle for data objectives f(X) = sum_j h(y_j^T X).

The cache is Z^T = X^T Yt (p x m, one row per column of X, so a block's rows are a
contiguous slab). After RSSM changes the columns C, only the rows Z^T[C] are recomputed
from the new columns (2 m n |C| flops); nothing is accumulated, so the cache cannot drift
from a from-scratch computation beyond one rounding of each entry.
"""

from __future__ import annotations

import abc

import numpy as np

from rssm.blocks import ColumnSet, Partition
from rssm.problem import Oracle, Problem


class DataOracle(Oracle, abc.ABC):
    """Base of the oracles of `DPCP` and `ODL`.

    Subclasses implement `_weights(rows, out)`: the derivative of h with respect to the
    entries of Z for the given rows of Z^T (written into ``out``, shape (|rows|, m)),
    and may extend `_after_update`.
    """

    cheap_cost = True

    def __init__(
        self, problem: Problem, x: np.ndarray, partition: Partition | None, yt: np.ndarray
    ):
        super().__init__(problem, x, partition)
        self.yt = yt  # n x m, C order
        n, m = yt.shape
        p = x.shape[1]
        self.n, self.m, self.p = n, m, p
        self.zt = np.empty((p, m))
        self._w = np.empty((p, m))
        # Per-row cost contributions of entrywise objectives, recomputed lazily: rows of Z^T
        # that changed since the last `cost` call are marked stale (see `_row_cost`).
        self._row_cost = np.zeros(p)
        self._stale = np.ones(p, dtype=bool)
        self.refresh()

    # Z^T rows for column runs -------------------------------------------------------------
    def _recompute_rows(self, run: slice) -> None:
        np.matmul(self.x[:, run].T, self.yt, out=self.zt[run])

    def refresh(self) -> None:
        np.matmul(self.x.T, self.yt, out=self.zt)
        self._stale[:] = True
        self._after_update(None)

    def update(self, cols: ColumnSet | None) -> None:
        if cols is None:
            self._stale[:] = True
        else:
            self._stale[cols.index] = True
        if cols is None:
            np.matmul(self.x.T, self.yt, out=self.zt)
        elif len(cols.runs) == 1:
            self._recompute_rows(cols.runs[0])
        else:
            # Several runs (a pair of non-adjacent blocks): one GEMM over all of C into the
            # scratch rows of the weight buffer, then row copies. One GEMM streams Yt once;
            # one GEMM per run would stream (and pack) it once per run.
            c = cols.size
            buf = self._w[:c]
            np.matmul(self.x[:, cols.index].T, self.yt, out=buf)
            off = 0
            for run in cols.runs:
                k = run.stop - run.start
                self.zt[run] = buf[off : off + k]
                off += k
        self._after_update(cols)

    def _after_update(self, cols: ColumnSet | None) -> None:
        """Hook for per-block statistics after Z^T rows changed."""

    def _row_values(self, rows: np.ndarray) -> np.ndarray:
        """The cost's contributions of the given rows of Z^T (one number per row), for
        objectives that are sums over the columns of X; others override `cost`."""
        raise NotImplementedError

    def _cached_cost(self) -> float:
        """Sum of the per-row contributions, recomputing only the rows of Z^T that changed
        since the last call: O(m |C|) after an RSSM step, O(p) when nothing changed. Each
        row's value is recomputed from scratch, so nothing drifts."""
        stale = np.flatnonzero(self._stale)
        if stale.size:
            self._row_cost[stale] = self._row_values(stale)
            self._stale[stale] = False
        return float(self._row_cost.sum())

    @abc.abstractmethod
    def _weights(self, rows: slice, out: np.ndarray) -> None:
        """Write dh/dZ for the rows ``rows`` of Z^T into ``out``."""

    # oracles --------------------------------------------------------------------------------
    def partial_subgradient(self, cols: ColumnSet) -> np.ndarray:
        c = cols.size
        w = self._w[:c]
        off = 0
        for run in cols.runs:
            k = run.stop - run.start
            self._weights(run, w[off : off + k])
            off += k
        # G_C = Yt W^T  (n x c), computed as (W Yt^T)^T: one GEMM of 2 m n c flops.
        return (w @ self.yt.T).T

    def subgradient(self) -> np.ndarray:
        w = self._w
        self._weights(slice(0, self.p), w)
        return (w @ self.yt.T).T

    # flop model -------------------------------------------------------------------------
    def flops_partial(self, c: int) -> float:
        return 2.0 * self.m * self.n * c + self._weight_flops(c)

    def flops_subgradient(self) -> float:
        return self.flops_partial(self.p)

    def flops_update(self, c: int) -> float:
        return 2.0 * self.m * self.n * c + self._stat_flops(c)

    def _weight_flops(self, c: int) -> float:
        return float(self.m * c)

    def _stat_flops(self, c: int) -> float:
        return 0.0
