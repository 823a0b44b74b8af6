"""The one incremental oracle of the data objectives, chunk by chunk.

The cache is Z^T = X^T Yt (p x m), kept per chunk of samples (p x k each) beside the
per-sample state the loss declares (`rssm.problems.losses`). After RSSM changes the
columns C only the rows Z^T[C] are recomputed from the new columns (2 m n |C| flops) and
the loss's statistics of the blocks that changed are recomputed from those rows; nothing
is accumulated, so no cache drifts from a from-scratch computation beyond one rounding.

**One task per chunk per call.** A cache update is not done when the solver reports it
(`DataOracle.update`) but in the next call that needs the state: a chunk's task then
recomputes its rows of Z^T, the loss's statistics, its share of the cost (when the cost is
being read), the weights W of the requested columns and its partial product
Yt_k W_k^T, all in the chunk's own buffers. So an RSSM iteration is one dispatch of the
chunks (`rssm.threads.parallel_for`), and the chunk results are added on the caller's
thread in chunk order 0, 1, 2, ...: the partial subgradient as a sum of n x |C| partials,
the cost with `math.fsum` of the chunks' shares. The partition is the store's
(`rssm.data.store.default_chunk_size`: a function of the data's size alone), so one
worker or eight, the bits are the same.

**Where the state lives** (``cache`` of the store): in memory, one set of arrays per
chunk; or in an unlinked temporary file (`rssm.data.statefile`), read into a work set
before a chunk's task and written back after an update (O(n p + workers x chunk)
resident).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from rssm.blocks import ColumnSet
from rssm.data.chunkset import ALL, ChunkSet, pending_after, union
from rssm.data.store import DataError, one_blas_thread
from rssm.problem import Oracle

# ALL, ChunkSet and union live in rssm.data.chunkset; kept importable from here.
__all__ = ["ALL", "ChunkSet", "DataOracle", "one_pass", "union"]

class DataOracle(Oracle):
    """The incremental oracle of every data objective, on a local store (in memory,
    memory-mapped, HDF5, Zarr, or Dask without a cluster).

    Parameters
    ----------
    problem : rssm.problems._data.DataProblem
        The objective; ``problem.sample_model(partition)`` gives its loss kernel, store,
        inputs, scale s and penalty mu.
    x : ndarray
        The solver's iterate (shared, never copied).
    partition : Partition or None
        RSSM's column partition (None for RSM).
    """

    #: f comes from the caches (a sum over chunks of kept statistics): the loop may read it
    #: at every iterate (to keep the best one).
    cheap_cost = True

    def __init__(self, problem, x: np.ndarray, partition):
        super().__init__(problem, x, partition)
        model = problem.sample_model(partition)
        store = model.store
        self.store = store
        self.n, self.m, self.p = store.n, store.m, x.shape[1]
        self.mu, self.s = model.mu, model.scale
        inputs = [{name: (None if arr is None else arr[..., lo:hi])
                   for name, arr in model.inputs.items()} for lo, hi in store.bounds]
        seen: dict = {}     # this run's record of the chunks read (`read_watched`)
        self.chunks = ChunkSet(model.kernel, self.p, self.n, store.bounds,
                               lambda i: store.read_watched(*store.bounds[i], seen), inputs,
                               model.readers,
                               place=store.cache, cache_dir=store.cache_dir,
                               serial_reads=not store.concurrent_reads)
        nb = partition.n_blocks if partition is not None else 1
        self._all = ColumnSet(np.arange(self.p), (slice(0, self.p),), tuple(range(nb)))
        self._xc = np.empty(self.n * self.p)
        self._pending: Any = ALL
        self._cost: float | None = None
        self._cost_read = False   # the cost was read since the last update ...
        self._cost_hint = False   # ... so compute it with the next pass
        self.refresh()

    # -- cache updates: deferred to the next pass ------------------------------------------
    def update(self, cols: ColumnSet | None) -> None:
        self._cost = None
        self._cost_hint, self._cost_read = self._cost_read, False
        self._pending = pending_after(self._pending, cols)

    def refresh(self) -> None:
        self._pending = ALL
        self._cost = None
        self._pass(None, True)

    def _pass(self, query: ColumnSet | None, want_cost: bool, trial=None) -> None:
        upd = self._pending
        want_cost = want_cost or (self._cost is None and self._cost_hint)
        xc = None
        if upd is not None and upd is not ALL and len(upd.runs) > 1:
            xc = self._xc[: self.n * upd.size].reshape(self.n, upd.size)
            np.take(self.x, upd.index, axis=1, out=xc)
        try:
            self.chunks.run(self.x, upd, query, want_cost, xc, trial)
        except BaseException as exc:
            # Some chunks may have run and others not (an error, Ctrl-C): recompute all.
            self._pending = ALL
            self._cost = None
            if isinstance(exc, DataError):
                if exc.x is None:
                    exc.x = self.x.copy()
            elif isinstance(exc, OSError):
                raise DataError(f"the data or the cache file could not be read or written: "
                                f"{exc}", self.x.copy()) from exc
            raise
        self._pending = None
        if want_cost:
            total = math.fsum(ch.cost for ch in self.chunks.chunks) * self.s
            if self.mu:
                total += self.mu * float(np.abs(self.x).sum())
            self._cost = total

    def _gsum(self, c: int) -> np.ndarray:
        """The chunks' |C| x n partials added in chunk order, as an n x |C| array."""
        chunks = self.chunks.chunks
        out = np.array(chunks[0].gt[:c])
        for ch in chunks[1:]:
            np.add(out, ch.gt[:c], out=out)
        return out.T

    # -- the oracle -----------------------------------------------------------------------
    def partial_subgradient(self, cols: ColumnSet) -> np.ndarray:
        self._pass(cols, False)
        g = self._gsum(cols.size)
        if self.mu:
            g = g + self.mu * np.sign(self.x[:, cols.selector])
        return g

    def subgradient(self) -> np.ndarray:
        self._pass(self._all, False)
        g = self._gsum(self.p)
        if self.mu:
            g = g + self.mu * np.sign(self.x)
        return g

    def cost(self) -> float:
        self._cost_read = True
        if self._cost is None or self._pending is not None:
            self._pass(None, True)
        return self._cost

    def cost_at(self, cols: ColumnSet | None, sel, values: np.ndarray) -> float:
        """f at X with the columns ``cols`` (index ``sel``) set to ``values``: a pure
        query, one pass over the chunks (2 m n |C| flops; X and the caches unchanged).
        Equals, bit for bit, the cost after a step that writes ``values``.

        Parameters
        ----------
        cols : ColumnSet or None
            The columns replaced (None: all of them).
        sel : slice or numpy.ndarray of int
            The same columns as an index of ``x`` (``x[:, sel]``), for the l1 penalty.
        values : numpy.ndarray, shape (n, c)
            The new columns, c the number of columns replaced (p when ``cols`` is None).

        Returns
        -------
        float
            f at the modified point.
        """
        vals = np.ascontiguousarray(values, dtype=np.float64)
        self._pass(None, False, (self._all if cols is None else cols, vals))
        total = math.fsum(ch.trial for ch in self.chunks.chunks) * self.s
        if self.mu:
            xt = self.x.copy()
            xt[:, sel] = values
            total += self.mu * float(np.abs(xt).sum())
        return total

    def close(self) -> None:
        """Close the state file (``cache="disk"``); the oracle is unusable afterwards."""
        self.chunks.close()

    # -- diagnostics: whole arrays (copies) ---------------------------------------------------
    def _state(self, name: str) -> np.ndarray:
        if self._pending is not None:
            self._pass(None, False)
        return self.chunks.gather(name)

    @property
    def zt(self) -> np.ndarray:
        """The cache Z^T = X^T Yt, p x m (a copy, after pending updates)."""
        return self._state("zt")

    @property
    def bn(self) -> np.ndarray:
        """Per-block squared row norms (norm losses), l x m (a copy)."""
        return self._state("bn")

    @property
    def inv_norm(self) -> np.ndarray:
        """The weights' scale s c_j psi'(r_j) / r_j of norm losses (DPCP: 1 / (m r_j))."""
        return self._state("scale")

    @property
    def yt(self) -> np.ndarray:
        """The data, n x m (read into memory for out-of-core stores)."""
        held = getattr(self.store, "yt", None)
        if isinstance(held, np.ndarray):
            return held
        return np.concatenate([blk for _, _, blk in self.store.chunks()], axis=1)

    # -- flop model -----------------------------------------------------------------------
    def flops_partial(self, c: int) -> float:
        return 2.0 * self.m * self.n * c + self.problem.weight_flops(c)

    def flops_subgradient(self) -> float:
        return self.flops_partial(self.p)

    def flops_update(self, c: int) -> float:
        return 2.0 * self.m * self.n * c + self.problem.stat_flops(c, self._n_blocks())

    def _n_blocks(self) -> int:
        return 1 if self.partition is None else self.partition.n_blocks


def one_pass(model, x: np.ndarray, want_grad: bool) -> tuple[float, np.ndarray | None]:
    """f(X) and (with ``want_grad``) a subgradient from scratch, one chunk at a time, on
    one BLAS thread (the problems' ``cost`` and ``subgradient``; O(n p + chunk) memory).

    Parameters
    ----------
    model : SampleModel
        The problem's sample model (``problem.sample_model(None)``): store, loss kernel,
        inputs, readers, l1 penalty mu and scale s.
    x : numpy.ndarray, shape (n, p)
        The point X.
    want_grad : bool
        Also compute a subgradient.

    Returns
    -------
    f : float
        The cost f(X).
    grad : numpy.ndarray, shape (n, p) or None
        A subgradient of f at X (C-ordered), or None without ``want_grad``.
    """
    with one_blas_thread():
        return _one_pass(model, x, want_grad)


def _one_pass(model, x: np.ndarray, want_grad: bool) -> tuple[float, np.ndarray | None]:
    store, kernel = model.store, model.kernel
    p = x.shape[1]
    every = ColumnSet(np.arange(p), (slice(0, p),), (0,))
    parts, g = [], None
    for lo, hi in store.bounds:
        inputs = [{name: (None if arr is None else arr[..., lo:hi])
                   for name, arr in model.inputs.items()}]
        cs = ChunkSet(kernel, p, store.n, [(lo, hi)], lambda _, lo=lo, hi=hi: store.read(lo, hi),
                      inputs, model.readers)
        cs.plan.x = x
        cs.plan.upd, cs.plan.query, cs.plan.want_cost = ALL, every if want_grad else None, True
        cs.task(0)
        parts.append(cs.chunks[0].cost)
        if want_grad:
            gt = cs.chunks[0].gt
            g = gt.copy() if g is None else np.add(g, gt, out=g)
    f = math.fsum(parts) * model.scale
    if model.mu:
        f += model.mu * float(np.abs(x).sum())
    grad = None
    if want_grad:
        grad = np.ascontiguousarray(g.T)
        if model.mu:
            grad += model.mu * np.sign(x)
    return f, grad
