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
import queue
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from rssm.blocks import ColumnSet, _runs
from rssm.data.statefile import StateFile
from rssm.data.store import DataError, one_blas_thread
from rssm.problem import Oracle
from rssm.threads import parallel_for

__all__ = ["ALL", "ChunkSet", "DataOracle", "one_pass", "union"]

#: "Every column": a full cache update (refresh, RSM).
ALL = "all"


def union(a: ColumnSet, b: ColumnSet) -> ColumnSet:
    """The column set a u b (two pending updates that were not flushed in between)."""
    idx = np.union1d(a.index, b.index)
    return ColumnSet(idx, _runs(idx), tuple(sorted(set(a.blocks) | set(b.blocks))))


class _Chunk:
    """One chunk's arrays, named by the declarations of the engine and the kernel:
    ``zt`` (p x k) and the kernel's per-sample state, scratch (``w``: p x k and the
    kernel's), per-column arrays, inputs (``bt``, ``cw``), and the results ``gt``
    (|C| x n) and ``cost``."""

    def __init__(self, i: int, lo: int, hi: int):
        self.i, self.lo, self.hi, self.k = i, lo, hi, hi - lo
        self.bt = self.cw = None
        self.cost = math.nan
        self.gt: np.ndarray | None = None
        self.where: dict[str, int] = {}   # state offsets in the state file


class _Plan:
    __slots__ = ("upd", "query", "want_cost", "x", "xc")

    def __init__(self):
        self.upd = self.query = self.x = self.xc = None
        self.want_cost = False


class ChunkSet:
    """The chunks of one oracle: their arrays and the fused task that updates and queries
    them. Used by `DataOracle` (all chunks of a local store) and by the Dask actors
    (`rssm.data.distributed`, the chunks one worker holds).

    Parameters
    ----------
    kernel : EntrywiseKernel or NormKernel
        The loss on a chunk (`rssm.problems.losses`).
    p, n : int
        Columns of X and features.
    bounds : sequence of (int, int)
        The chunks' sample ranges.
    read : callable
        ``read(i)``: chunk i's samples, n x k float64.
    inputs : list of dict, optional
        Per chunk, its per-sample inputs (``bt``: p x k, ``cw``: k) that stay in memory.
    readers : dict, optional
        Per-sample inputs read at each pass: name -> ``reader(lo, hi)``.
    place : {"memory", "disk"}
        Where the per-sample state lives.
    cache_dir : str, optional
        Folder of the state file (``place="disk"``).
    serial_reads : bool
        Serialize ``read`` calls (sources that are not thread-safe).
    """

    def __init__(self, kernel: Any, p: int, n: int, bounds, read: Callable[[int], np.ndarray],
                 inputs: list[dict] | None = None, readers: dict | None = None,
                 place: str = "memory", cache_dir: str | None = None,
                 serial_reads: bool = False):
        self.kernel, self.p, self.n = kernel, p, n
        self._read = read
        self._readers = readers or {}
        self._lock = threading.Lock() if serial_reads else None
        self.state = {"zt": (p,), **kernel.state}
        self.scratch = {"w": ((p,), np.float64), **kernel.scratch}
        self.chunks = [_Chunk(i, lo, hi) for i, (lo, hi) in enumerate(bounds)]
        self.kmax = max(ch.k for ch in self.chunks)
        self.file = StateFile(cache_dir) if place == "disk" else None
        self._pool: queue.SimpleQueue = queue.SimpleQueue()
        self.plan = _Plan()
        for ch in self.chunks:
            for name, value in (inputs[ch.i] if inputs else {}).items():
                setattr(ch, name, value)
            for name, (shape, dtype, fill) in kernel.columns.items():
                setattr(ch, name, np.full(shape, fill, dtype=dtype))
            ch.gt = np.empty((p, n))
            if self.file is None:
                self._allocate(ch)
            else:
                for name, lead in self.state.items():
                    ch.where[name] = self.file.reserve(8 * int(np.prod(lead)) * ch.k)
                    setattr(ch, name, None)
        if self.file is not None:
            try:
                self.file.allocate()
            except OSError as exc:
                self.file.close()
                raise DataError(
                    f"the cache file ({self.file.size / 2**20:.1f} MiB for the per-sample "
                    f"state) could not be made in {cache_dir or 'the temporary folder'}: "
                    f"{exc}; free space there, pass cache_dir= another folder, or "
                    "cache='memory'") from exc

    def _allocate(self, ch: _Chunk) -> None:
        """In-memory arrays of one chunk (state and scratch)."""
        for name, lead in self.state.items():
            setattr(ch, name, np.empty(lead + (ch.k,)))
        for name, (lead, dtype) in self.scratch.items():
            setattr(ch, name, np.empty(lead + (ch.k,), dtype=dtype))

    # -- the state file: a work set per chunk in flight ----------------------------------------
    def _checkout(self, ch: _Chunk, load: bool) -> dict:
        try:
            work = self._pool.get_nowait()
        except queue.Empty:
            work = {name: np.empty(int(np.prod(lead)) * self.kmax)
                    for name, lead in self.state.items()}
            work.update({name: np.empty(int(np.prod(lead)) * self.kmax, dtype=dtype)
                         for name, (lead, dtype) in self.scratch.items()})
        for name, lead in self.state.items():
            view = work[name][: int(np.prod(lead)) * ch.k].reshape(lead + (ch.k,))
            if load:
                self.file.read(view, ch.where[name])
            setattr(ch, name, view)
        for name, (lead, _) in self.scratch.items():
            setattr(ch, name, work[name][: int(np.prod(lead)) * ch.k].reshape(lead + (ch.k,)))
        return work

    def _checkin(self, ch: _Chunk, work: dict, write: bool) -> None:
        for name in self.state:
            if write:
                self.file.write(getattr(ch, name), ch.where[name])
            setattr(ch, name, None)
        for name in self.scratch:
            setattr(ch, name, None)
        self._pool.put(work)

    def close(self) -> None:
        """Close the state file (``place="disk"``)."""
        if self.file is not None:
            self.file.close()

    # -- the fused task -----------------------------------------------------------------------
    def _data(self, ch: _Chunk) -> np.ndarray:
        if self._lock is None:
            return self._read(ch.i)
        with self._lock:
            return self._read(ch.i)

    def task(self, i: int) -> None:
        """Chunk i's share of the plan: cache update, statistics, cost, weights, product."""
        ch = self.chunks[i]
        plan = self.plan
        work = None
        if self.file is not None:
            work = self._checkout(ch, load=plan.upd is not ALL)
        try:
            yt = self._data(ch) if (plan.upd is not None or plan.query is not None) else None
            for name, reader in self._readers.items():
                setattr(ch, name, reader(ch.lo, ch.hi))
            if plan.upd is not None:
                self._update(ch, yt, plan)
            if plan.want_cost:
                ch.cost = self.kernel.cost(ch)
            if plan.query is not None:
                c = plan.query.size
                w = ch.w[:c]
                self.kernel.weights(ch, plan.query.runs, w)
                # G_k^T = W_k Yt_k^T (|C| x n): 2 k n |C| flops into the chunk's own buffer.
                np.matmul(w, yt.T, out=ch.gt[:c])
        finally:
            for name in self._readers:
                setattr(ch, name, None)
            if work is not None:
                self._checkin(ch, work, write=plan.upd is not None)

    def _update(self, ch: _Chunk, yt: np.ndarray, plan: _Plan) -> None:
        upd, x = plan.upd, plan.x
        if upd is ALL:
            np.matmul(x.T, yt, out=ch.zt)
            self.kernel.after_update(ch, None)
            return
        if len(upd.runs) == 1:
            self._recompute_rows(ch, yt, x, upd.runs[0])
        else:
            # Several runs (a pair of non-adjacent blocks): one GEMM over all of C (the
            # columns gathered once, in plan.xc) into scratch rows, then row copies.
            c = upd.size
            buf = ch.w[:c]
            np.matmul(plan.xc.T, yt, out=buf)
            off = 0
            for run in upd.runs:
                k = run.stop - run.start
                ch.zt[run] = buf[off : off + k]
                off += k
        self.kernel.after_update(ch, upd)

    @staticmethod
    def _recompute_rows(ch: _Chunk, yt: np.ndarray, x: np.ndarray, run: slice) -> None:
        """Z^T[run] = X[:, run]^T Yt_k on the chunk: 2 k n |run| flops."""
        np.matmul(x[:, run].T, yt, out=ch.zt[run])

    def run(self, x: np.ndarray, upd, query: ColumnSet | None, want_cost: bool,
            xc: np.ndarray | None = None) -> None:
        """One dispatch of every chunk's task (results in ``chunks[i].gt`` / ``.cost``).
        ``xc`` holds x[:, upd.index] when ``upd`` has several runs."""
        plan = self.plan
        plan.upd, plan.query, plan.want_cost, plan.x, plan.xc = upd, query, want_cost, x, xc
        try:
            parallel_for(self.task, len(self.chunks))
        finally:
            plan.x = plan.xc = None

    def gather(self, name: str) -> np.ndarray:
        """The state array ``name`` of all chunks side by side (a copy; diagnostics)."""
        parts = []
        for ch in self.chunks:
            if self.file is None:
                parts.append(getattr(ch, name).copy())
            else:
                lead = self.state[name]
                buf = np.empty(lead + (ch.k,))
                self.file.read(buf, ch.where[name])
                parts.append(buf)
        return np.concatenate(parts, axis=-1)


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

    def __init__(self, problem, x: np.ndarray, partition):
        super().__init__(problem, x, partition)
        model = problem.sample_model(partition)
        store = model.store
        self.store = store
        self.n, self.m, self.p = store.n, store.m, x.shape[1]
        self.mu, self.s = model.mu, model.scale
        inputs = [{name: (None if arr is None else arr[..., lo:hi])
                   for name, arr in model.inputs.items()} for lo, hi in store.bounds]
        self.chunks = ChunkSet(model.kernel, self.p, self.n, store.bounds,
                               lambda i: store.read(*store.bounds[i]), inputs, model.readers,
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
        pend = self._pending
        if cols is None or pend is ALL:
            self._pending = ALL
        elif pend is None or pend.blocks == cols.blocks:
            self._pending = cols
        else:
            self._pending = union(pend, cols)

    def refresh(self) -> None:
        self._pending = ALL
        self._cost = None
        self._pass(None, True)

    def _pass(self, query: ColumnSet | None, want_cost: bool) -> None:
        upd = self._pending
        want_cost = want_cost or (self._cost is None and self._cost_hint)
        xc = None
        if upd is not None and upd is not ALL and len(upd.runs) > 1:
            xc = self._xc[: self.n * upd.size].reshape(self.n, upd.size)
            np.take(self.x, upd.index, axis=1, out=xc)
        try:
            self.chunks.run(self.x, upd, query, want_cost, xc)
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
        return 2.0 * self.m * self.n * c + self.problem._weight_flops(c)

    def flops_subgradient(self) -> float:
        return self.flops_partial(self.p)

    def flops_update(self, c: int) -> float:
        return 2.0 * self.m * self.n * c + self.problem._stat_flops(c, self._n_blocks())

    def _n_blocks(self) -> int:
        return 1 if self.partition is None else self.partition.n_blocks


def one_pass(model, x: np.ndarray, want_grad: bool) -> tuple[float, np.ndarray | None]:
    """f(X) and (with ``want_grad``) a subgradient from scratch, one chunk at a time, on
    one BLAS thread (the problems' ``cost`` and ``subgradient``; O(n p + chunk) memory)."""
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
