"""Data-parallel oracles on a ``dask.distributed`` cluster (optional extra ``rssm[dask]``).

When a data problem's data is a Dask array and a ``distributed.Client`` is active,
`DaskOracle` replaces the in-process oracle:

* the array is persisted on the cluster, chunked along the samples only;
* on every worker that holds chunks, one Dask actor (`ChunkActor`) keeps those chunks of
  data and, for each, the problem's own in-memory oracle: its rows of the cache
  Z^T = X^T Yt and its per-block norms (nothing of size m ever goes to the client);
* an iteration sends each actor the columns X_C that changed in the previous step and the
  columns C' of this step's partial subgradient, in **one** message; the actor updates its
  caches (2 m_w n |C| flops on its m_w samples) and returns the n x |C'| sum of its chunks'
  partial subgradients Yt_k W_k^T; the client adds the actors' sums. The cost comes back as
  one float per chunk, summed on the client with `math.fsum`.

So the iterates are those of the in-memory run up to the order of floating-point sums
(the tests check 1e-10 relative), and an iteration costs one round trip to every worker
plus the n x |C| messages.
"""

from __future__ import annotations

import math
import weakref
from typing import Any

import numpy as np

from rssm.blocks import ColumnSet, Partition
from rssm.problem import Oracle

__all__ = ["DaskOracle", "ChunkActor", "active_client", "from_npy"]

_MISSING = "the Dask oracles need dask[array,distributed]: pip install 'rssm[dask]'"


def active_client():
    """The current ``distributed.Client``, or None when there is none (or no dask)."""
    try:
        from distributed import default_client
    except ImportError:
        return None
    try:
        return default_client()
    except ValueError:
        return None


def _read_rows(path: str, lo: int, hi: int) -> np.ndarray:
    return np.array(np.load(path, mmap_mode="r")[lo:hi], dtype=np.float64)


def from_npy(path, chunk_size: int | None = None):
    """A Dask array over an ``.npy`` file of m samples as rows (m x n), read by the workers.

    Every worker opens the file itself and reads only its chunks, so the data never passes
    through the client; the file must be visible to every worker at the same path (a
    shared file system). Pass the result to `rssm.data.samples`.

    Parameters
    ----------
    path : str or path-like
        The ``.npy`` file (C order, 2-D, real).
    chunk_size : int, optional
        Samples per chunk (default: 64 MiB of float64 data).
    """
    try:
        import dask
        import dask.array as da
    except ImportError:
        raise ImportError(_MISSING) from None
    from rssm.data.chunked import DEFAULT_CHUNK_BYTES

    path = str(path)
    mm = np.load(path, mmap_mode="r")
    if mm.ndim != 2:
        raise ValueError(f"path must hold a 2-D array, got shape {mm.shape}")
    m, n = mm.shape
    k = int(chunk_size) if chunk_size else max(1, DEFAULT_CHUNK_BYTES // (8 * n))
    blocks = [da.from_delayed(dask.delayed(_read_rows, pure=True)(path, lo, min(lo + k, m)),
                              shape=(min(lo + k, m) - lo, n), dtype=np.float64)
              for lo in range(0, m, k)]
    return da.concatenate(blocks, axis=0)


class ChunkActor:
    """Per-worker state of `DaskOracle`: the worker's chunks of data, one in-memory oracle
    per chunk, and the worker's copy of the iterate X.

    Parameters
    ----------
    parts : list of Problem
        The problem restricted to each chunk (``problem._sample_slice``), without data.
    blocks : list of ndarray
        The chunks, n x k (samples as columns) or k x n when ``rows_are_samples``.
    x : ndarray
        The iterate at the start.
    partition : Partition or None
        RSSM's column partition.
    rows_are_samples : bool
        Layout of ``blocks``.
    """

    def __init__(self, parts: list, blocks: list, x: np.ndarray, partition: Partition | None,
                 rows_are_samples: bool):
        self.x = np.array(x, dtype=np.float64, order="C", copy=True)
        self.subs = []
        for part, blk in zip(parts, blocks, strict=True):
            arr = np.asarray(blk, dtype=np.float64)
            arr = arr.T if rows_are_samples else arr
            k = arr.shape[1]
            self.subs.append(part._sample_slice(arr, 0, k).make_oracle(self.x, partition))

    def flop_table(self) -> dict[str, list[float]]:
        """Flop counts of the worker's chunks, for c = 0..p columns."""
        p = self.x.shape[1]
        return {
            "partial": [sum(s.flops_partial(c) for s in self.subs) for c in range(p + 1)],
            "update": [sum(s.flops_update(c) for s in self.subs) for c in range(p + 1)],
        }

    def run(self, changed: str, cols: ColumnSet | None, values: np.ndarray | None,
            query: str, qcols: ColumnSet | None):
        """Apply the pending change of X, then answer ``query``.

        ``changed`` is "none", "cols" (X[:, cols] = values) or "all" (X = values); the
        caches are then updated. ``query`` is "partial" (sum of the chunks' partial
        subgradients on ``qcols``), "full" (sum of their subgradients), "cost" (the list of
        the chunks' costs), "refresh" (recompute every cache) or "none".
        """
        if changed == "all":
            self.x[...] = values
            for s in self.subs:
                s.update(None)
        elif changed == "cols":
            self.x[:, cols.selector] = values
            for s in self.subs:
                s.update(cols)
        if query == "partial":
            return np.add.reduce([s.partial_subgradient(qcols) for s in self.subs])
        if query == "full":
            return np.add.reduce([s.subgradient() for s in self.subs])
        if query == "cost":
            return [s.cost() for s in self.subs]
        if query == "refresh":
            for s in self.subs:
                s.refresh()
        return None


def _release(client, futures: list) -> None:
    try:
        client.cancel(futures)
    except Exception:  # the client or cluster may be gone already
        pass


class DaskOracle(Oracle):
    """Incremental oracle of a data problem whose data is a Dask array on a cluster.

    Built by the problem's ``make_oracle`` when its data is a Dask array and
    `active_client` finds a client; see the module docstring for the protocol.

    Parameters
    ----------
    problem : Problem
        A data problem whose ``_data`` is a `rssm.data.ChunkedData` over a Dask array.
    x : ndarray
        The solver's iterate.
    partition : Partition or None
        RSSM's column partition.
    client : distributed.Client
        The cluster's client.
    """

    def __init__(self, problem, x: np.ndarray, partition: Partition | None, client: Any):
        try:
            from distributed import futures_of, wait
        except ImportError:  # pragma: no cover - make_data_oracle checked for a client
            raise ImportError(_MISSING) from None
        super().__init__(problem, x, partition)
        data = problem._data
        self.client = client
        self.n, self.m, self.p = data.n, data.m, x.shape[1]
        self.mu = float(getattr(problem, "l1_penalty", 0.0) or 0.0)
        rows = data.rows_are_samples
        arr = data.source.rechunk({1 if rows else 0: -1})
        arr = client.persist(arr)
        by_key = {f.key: f for f in futures_of(arr)}
        dk = arr.__dask_keys__()
        keys = [row[0] for row in dk] if rows else list(dk[0])
        futs = [by_key[k] for k in keys]
        sizes = arr.chunks[0 if rows else 1]
        bounds, lo = [], 0
        for s in sizes:
            bounds.append((lo, lo + int(s)))
            lo += int(s)
        self.bounds = bounds
        wait(futs)
        holders = client.who_has(futs)
        groups: dict[str, list[int]] = {}
        for i, f in enumerate(futs):
            addr = sorted(holders[f.key])[0]
            groups.setdefault(addr, []).append(i)
        self.workers = sorted(groups)
        self._data_futures = futs
        self._actor_futures = []
        self.actors = []
        for addr in self.workers:
            idx = groups[addr]
            parts = [problem._sample_slice(None, *bounds[i]) for i in idx]
            fut = client.submit(ChunkActor, parts, [futs[i] for i in idx], x, partition, rows,
                                actor=True, workers=[addr], allow_other_workers=False,
                                pure=False)
            self._actor_futures.append(fut)
        self.actors = [f.result() for f in self._actor_futures]
        self.chunks_per_worker = {a: len(groups[a]) for a in self.workers}
        tables = [a.flop_table().result() for a in self.actors]
        self._fl_partial = np.sum([t["partial"] for t in tables], axis=0)
        self._fl_update = np.sum([t["update"] for t in tables], axis=0)
        self._pending: str | ColumnSet | None = None
        self._fin = weakref.finalize(self, _release, client,
                                     self._actor_futures + self._data_futures)

    def close(self) -> None:
        """Release the actors and the persisted data on the cluster."""
        self.actors = []
        self._fin()

    def _ask(self, query: str, qcols: ColumnSet | None = None) -> list:
        pend = self._pending
        if pend is None:
            changed, cols, values = "none", None, None
        elif pend == "all":
            changed, cols, values = "all", None, self.x.copy()
        else:
            changed, cols, values = "cols", pend, np.ascontiguousarray(self.x[:, pend.selector])
        futs = [a.run(changed, cols, values, query, qcols) for a in self.actors]
        out = [f.result() for f in futs]
        self._pending = None
        return out

    # -- the oracle ---------------------------------------------------------------------
    def update(self, cols: ColumnSet | None) -> None:
        # Sent with the next request (one round trip per iteration). Two updates in a row
        # (no request between them) become one update of every column.
        self._pending = "all" if (cols is None or self._pending is not None) else cols

    def refresh(self) -> None:
        self._pending = "all"
        self._ask("refresh")

    def partial_subgradient(self, cols: ColumnSet) -> np.ndarray:
        g = np.add.reduce(self._ask("partial", cols))
        if self.mu:
            g = g + self.mu * np.sign(self.x[:, cols.selector])
        return g

    def subgradient(self) -> np.ndarray:
        g = np.add.reduce(self._ask("full"))
        if self.mu:
            g = g + self.mu * np.sign(self.x)
        return g

    def cost(self) -> float:
        total = math.fsum(c for part in self._ask("cost") for c in part)
        return total + self.mu * float(np.abs(self.x).sum()) if self.mu else total

    def flops_partial(self, c: int) -> float:
        return float(self._fl_partial[c]) + (2.0 * self.n * c if self.mu else 0.0)

    def flops_subgradient(self) -> float:
        return self.flops_partial(self.p)

    def flops_update(self, c: int) -> float:
        return float(self._fl_update[c])
