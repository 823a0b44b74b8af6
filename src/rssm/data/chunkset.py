"""The chunks of a data oracle: their arrays and the fused task that updates and queries
them (`ChunkSet`), shared by the in-process oracle (`rssm.data.engine.DataOracle`) and the
Dask actors (`rssm.data.distributed.ChunkActor`).

A chunk's arrays are named by declarations, never guessed from shapes: the engine's own
``zt`` (the cache rows Z_k^T, p x k) and ``w`` (scratch, p x k), and the loss kernel's
``state`` (per-sample arrays kept between calls), ``scratch`` (per-sample work arrays) and
``columns`` (one value per column of X, kept in memory; `rssm.problems.losses`). With the
state in a file (``place="disk"``) exactly the declared state moves to and from the file.
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
from rssm.data.store import DataError, aligned
from rssm.threads import parallel_for

__all__ = ["ALL", "ChunkSet", "union"]

#: "Every column": a full cache update (refresh, RSM).
ALL = "all"


def union(a: ColumnSet, b: ColumnSet) -> ColumnSet:
    """The column set a u b (two pending updates that were not flushed in between).

    Parameters
    ----------
    a, b : ColumnSet
        The two column sets.

    Returns
    -------
    ColumnSet
        Their union: sorted indices, their runs, and the blocks of both.
    """
    idx = np.union1d(a.index, b.index)
    return ColumnSet(idx, _runs(idx), tuple(sorted(set(a.blocks) | set(b.blocks))))


def pending_after(pend: Any, cols: ColumnSet | None) -> Any:
    """The columns whose cache rows are stale after the step on ``cols`` (None: all of X),
    given those already pending (None, `ALL` or a ColumnSet): what an oracle sends with
    its next pass.

    Parameters
    ----------
    pend : None, ALL or ColumnSet
        The columns already pending.
    cols : ColumnSet or None
        The columns of the step (None: all of X).

    Returns
    -------
    ALL or ColumnSet
        `ALL`, ``cols`` (when nothing else is pending, or the same blocks are), or the
        union of both.
    """
    if cols is None or pend is ALL:
        return ALL
    if pend is None or pend.blocks == cols.blocks:
        return cols
    return union(pend, cols)


class _Chunk:
    """One chunk's arrays, named by the declarations of the engine and the kernel:
    ``zt`` (p x k) and the kernel's per-sample state, scratch (``w``: p x k and the
    kernel's), per-column arrays, inputs (``bt``, ``cw``), and the results ``gt``
    (|C| x n) and ``cost``."""

    def __init__(self, i: int, lo: int, hi: int):
        self.i, self.lo, self.hi, self.k = i, lo, hi, hi - lo
        self.bt = self.cw = None
        self.cost = self.trial = math.nan
        self.gt: np.ndarray | None = None
        self.where: dict[str, int] = {}   # state offsets in the state file


class _Plan:
    __slots__ = ("upd", "query", "want_cost", "x", "xc", "trial")

    def __init__(self):
        self.upd = self.query = self.x = self.xc = self.trial = None
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
            return aligned(self._read(ch.i))
        with self._lock:
            return aligned(self._read(ch.i))

    def task(self, i: int) -> None:
        """Chunk i's share of the plan: cache update, statistics, cost, weights, product.

        Parameters
        ----------
        i : int
            The chunk's index in ``chunks``.
        """
        ch = self.chunks[i]
        plan = self.plan
        work = None
        if self.file is not None:
            work = self._checkout(ch, load=plan.upd is not ALL)
        try:
            need = plan.upd is not None or plan.query is not None or plan.trial is not None
            yt = self._data(ch) if need else None
            for name, reader in self._readers.items():
                setattr(ch, name, reader(ch.lo, ch.hi))
            if plan.upd is not None:
                self._update(ch, yt, plan)
            if plan.want_cost or plan.trial is not None:
                ch.cost = self.kernel.cost(ch)   # (also brings per-column costs up to date)
            if plan.trial is not None:
                # f with the columns C replaced by V, a pure query: Z_C'^T = V^T Yt_k into
                # scratch rows, then the kernel's cost with those rows (bits equal to the
                # cost after a step that writes V: the same products and sums).
                cols, vals = plan.trial
                zc = ch.w[: cols.size]
                np.matmul(vals.T, yt, out=zc)
                ch.trial = self.kernel.trial_cost(ch, cols, zc)
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
        """Z^T[run] = X[:, run]^T Yt_k on the chunk: 2 k n c flops for c columns."""
        np.matmul(x[:, run].T, yt, out=ch.zt[run])

    def run(self, x: np.ndarray, upd, query: ColumnSet | None, want_cost: bool,
            xc: np.ndarray | None = None, trial: tuple | None = None) -> None:
        """One dispatch of every chunk's task (results in ``chunks[i].gt``, ``.cost`` and
        ``.trial``). ``xc`` holds x[:, upd.index] when ``upd`` has several runs; ``trial``
        is (C, V): the cost with the columns C set to V (n x |C|, C order), X unchanged.

        Parameters
        ----------
        x : numpy.ndarray, shape (n, p)
            The iterate X.
        upd : None, ALL or ColumnSet
            The columns whose cache rows Z^T are recomputed first: none, every column
            (`ALL`), or the column set C.
        query : ColumnSet or None
            The columns C of a partial subgradient to compute (into ``chunks[i].gt``), or
            None.
        want_cost : bool
            Compute each chunk's cost (into ``chunks[i].cost``).
        xc : numpy.ndarray, shape (n, |C|), optional
            ``x[:, upd.index]``, needed when ``upd`` has several runs.
        trial : tuple (ColumnSet, numpy.ndarray), optional
            (C, V) for a trial cost (into ``chunks[i].trial``).
        """
        plan = self.plan
        plan.upd, plan.query, plan.want_cost, plan.x, plan.xc = upd, query, want_cost, x, xc
        plan.trial = trial
        try:
            parallel_for(self.task, len(self.chunks))
        finally:
            plan.x = plan.xc = plan.trial = None

    def gather(self, name: str) -> np.ndarray:
        """The state array ``name`` of all chunks side by side (a copy; diagnostics).

        Parameters
        ----------
        name : str
            A state array: ``"zt"`` or one of the kernel's ``state``.

        Returns
        -------
        numpy.ndarray, shape (..., m)
            The chunks' arrays concatenated along their last (sample) axis.
        """
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
