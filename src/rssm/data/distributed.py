"""The data oracle on a ``dask.distributed`` cluster (optional extra ``rssm[dask]``).

When a data problem's samples are a Dask array and a ``distributed.Client`` is active,
`DaskOracle` replaces the in-process oracle:

* the array is persisted on the cluster, cut along the samples only, in the partition of
  its `rssm.data.ChunkedData` (the Dask array's own chunks);
* on every worker that holds chunks, one Dask actor (`ChunkActor`) keeps those chunks and
  their state in a `rssm.data.chunkset.ChunkSet`, the same per-chunk code as in memory;
* an iteration sends each actor, in **one** message, the columns X_C the previous step
  changed and the columns C' of this step; the actor updates its chunks and returns each
  chunk's n x |C'| partial product (and, when asked, its share of the cost); the client
  adds the chunks' partials in chunk order 0, 1, 2, ... So the result does not depend on
  which worker holds which chunk, and equals the in-process oracle's bit for bit when the
  partitions and the layouts are the same. A trial cost (`DaskOracle.cost_at`) is one
  round as well.

Failures (docs/data.md, "When workers fail"): every round waits at most the data's
``timeout`` (default 60 s). A worker that does not answer in time (stopped, overloaded)
ends the run with `rssm.data.store.DataError`, which carries the iterate so far; a worker
that died is replaced: its chunks are reloaded from the array's graph (the scheduler
recomputes lost chunks where it can: ``from_array``, `from_npy`, ``from_zarr``) onto a
live worker, a new actor rebuilds their caches from X, and the run goes on. A closed client
ends the run with a `DataError` that says so.
"""

from __future__ import annotations

import asyncio
import math
import time
import warnings
from typing import Any

import numpy as np

from rssm.blocks import ColumnSet, Partition
from rssm.data.chunkset import ALL, ChunkSet, pending_after
from rssm.data.dask_files import from_npy
from rssm.data.store import DataError, aligned, one_blas_thread
from rssm.problem import Oracle

__all__ = ["DaskOracle", "ChunkActor", "active_client", "from_npy"]

_MISSING = "the Dask oracles need dask[array,distributed]: pip install 'rssm[dask]'"
#: Seconds a round may take after a Ctrl-C (the run is then returned as it is).
INTERRUPT_TIMEOUT = 2.0
#: Lost workers replaced per run before the run ends with a `DataError`.
MAX_REBUILDS = 8


def active_client():
    """The current ``distributed.Client``, or None when there is none (or no dask)."""
    try:
        from distributed import default_client
    except ImportError:
        return None
    try:
        client = default_client()
    except ValueError:
        return None
    return client if getattr(client, "status", "running") == "running" else None


class ChunkActor:
    """Per-worker state of `DaskOracle`: the worker's chunks and their `ChunkSet`, and the
    worker's copy of the iterate X.

    Parameters
    ----------
    kernel : EntrywiseKernel or NormKernel
        The loss on a chunk, bound to the partition.
    bounds : list of (int, int)
        The chunks' sample ranges.
    inputs : list of dict
        Per chunk, its per-sample inputs (``bt``, ``cw``).
    blocks : list of ndarray
        The chunks, n x k (samples as columns) or k x n when ``rows_are_samples``.
    x : ndarray
        The iterate.
    rows_are_samples : bool
        Layout of ``blocks``.
    """

    def __init__(self, kernel, bounds: list, inputs: list, blocks: list, x: np.ndarray,
                 rows_are_samples: bool):
        self.x = np.array(x, dtype=np.float64, order="C", copy=True)
        # (aligned once here: a chunk unpickled on a worker process can sit at any byte)
        arrs = [aligned(np.asarray(b, dtype=np.float64)) for b in blocks]
        self._arrs = [a.T if rows_are_samples else a for a in arrs]
        n, p = self.x.shape
        self._xc = np.empty(n * p)
        self._set = ChunkSet(kernel, p, n, bounds, self._arrs.__getitem__, inputs)
        with self._one_blas():
            self._set.run(self.x, ALL, None, False)

    @staticmethod
    def _one_blas():
        return one_blas_thread()

    def run(self, changed: str, cols: ColumnSet | None, values: np.ndarray | None,
            qcols: ColumnSet | None, want_cost: bool, trial: tuple | None = None):
        """Apply the pending change of X, then answer: (partials, costs).

        ``changed`` is "none", "cols" (X[:, cols] = values) or "all" (X = values).
        ``partials`` is the list of the chunks' c x n partial products, c the size of
        ``qcols`` (None without ``qcols``), ``costs`` the list of their shares of the cost
        (None unless ``want_cost``); with ``trial`` = (C, V), ``costs`` are instead their
        shares of f at X with the columns C set to V (X unchanged).

        Parameters
        ----------
        changed : {"none", "cols", "all"}
            The pending change of the worker's copy of X.
        cols : ColumnSet or None
            The columns changed (``changed="cols"``).
        values : numpy.ndarray or None
            The new columns X[:, cols] (n x |C|), or all of X (``changed="all"``).
        qcols : ColumnSet or None
            The columns of the partial products to return, or None.
        want_cost : bool
            Return the chunks' shares of the cost.
        trial : tuple (ColumnSet, numpy.ndarray), optional
            (C, V) for a trial cost.

        Returns
        -------
        partials : list of numpy.ndarray or None
            The chunks' c x n partial products, in chunk order.
        costs : list of float or None
            The chunks' shares of the cost (or of the trial cost).
        """
        upd: Any = None
        if changed == "all":
            self.x[...] = values
            upd = ALL
        elif changed == "cols":
            self.x[:, cols.selector] = values
            upd = cols
        xc = None
        if upd is not None and upd is not ALL and len(upd.runs) > 1:
            xc = self._xc[: self.x.shape[0] * upd.size].reshape(self.x.shape[0], upd.size)
            np.take(self.x, upd.index, axis=1, out=xc)
        with self._one_blas():
            self._set.run(self.x, upd, qcols, want_cost, xc, trial)
        chunks = self._set.chunks
        parts = None if qcols is None else [ch.gt[: qcols.size].copy() for ch in chunks]
        costs = None
        if trial is not None:
            costs = [ch.trial for ch in chunks]
        elif want_cost:
            costs = [ch.cost for ch in chunks]
        return parts, costs


class DaskOracle(Oracle):
    """The data oracle of a problem whose samples are a Dask array on a cluster.

    Built by the problem's ``make_oracle`` when its data is a Dask array and
    `active_client` finds a client; see the module docstring for the protocol.

    Parameters
    ----------
    problem : rssm.problems._data.DataProblem
        A data problem whose store is a `rssm.data.ChunkedData` over a Dask array.
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
        except ImportError:  # pragma: no cover - make_oracle checked for a client
            raise ImportError(_MISSING) from None
        super().__init__(problem, x, partition)
        model = problem.sample_model(partition)
        data = model.store
        self.client, self.kernel = client, model.kernel
        self._store = data
        self.n, self.m, self.p = data.n, data.m, x.shape[1]
        self.mu, self.s = model.mu, model.scale
        self.timeout = data.timeout
        self.rows = data.rows_are_samples
        self.bounds = list(data.bounds)
        ax = 0 if self.rows else 1
        sizes = tuple(hi - lo for lo, hi in self.bounds)
        arr = client.persist(data.source.rechunk({ax: sizes, 1 - ax: -1}))
        by_key = {f.key: f for f in futures_of(arr)}
        dk = arr.__dask_keys__()
        keys = [row[0] for row in dk] if self.rows else list(dk[0])
        # Kept until the oracle goes; released by dropping them, never cancelled: another
        # oracle built on the same array holds futures of the same keys (cancelling is by
        # key, so it would cancel that oracle's data and the actors that depend on it).
        self._data_futures = [by_key[k] for k in keys]
        self._inputs = []
        for lo, hi in self.bounds:
            inp = {name: (None if a is None else np.ascontiguousarray(a[..., lo:hi]))
                   for name, a in model.inputs.items()}
            inp.update({name: np.ascontiguousarray(r(lo, hi)) for name, r in model.readers.items()})
            self._inputs.append(inp)
        try:
            wait(self._data_futures, timeout=self.timeout)
        except (TimeoutError, asyncio.TimeoutError):
            raise DataError(f"the Dask cluster did not load the data's {len(self.bounds)} "
                            f"chunks within {self.timeout:g} s") from None
        holders = client.who_has(self._data_futures)
        groups: dict[str, list[int]] = {}
        for i, f in enumerate(self._data_futures):
            groups.setdefault(sorted(holders[f.key])[0], []).append(i)
        self.workers = sorted(groups)
        self._groups = [groups[a] for a in self.workers]
        self._actor_futures = [self._submit(idx, [a]) for idx, a in zip(self._groups,
                                                                         self.workers,
                                                                         strict=True)]
        self.actors = [self._result(f, "starting the actors") for f in self._actor_futures]
        self.chunks_per_worker = {a: len(g) for a, g in zip(self.workers, self._groups,
                                                            strict=True)}
        self._all = ColumnSet(np.arange(self.p), (slice(0, self.p),),
                              tuple(range(1 if partition is None else partition.n_blocks)))
        self._pending: Any = None
        self._cost: float | None = None
        self._cost_read = self._cost_hint = False
        self._interrupted = False
        self._rebuilds = 0
        self._dead = False   # a round failed after a Ctrl-C: answer NaN at once

    # -- the actors ---------------------------------------------------------------------
    def _submit(self, idx: list[int], where: list[str] | None):
        pin = {} if where is None else {"workers": where, "allow_other_workers": False}
        return self.client.submit(
            ChunkActor, self.kernel, [self.bounds[i] for i in idx],
            [self._inputs[i] for i in idx], [self._data_futures[i] for i in idx], self.x,
            self.rows, actor=True, pure=False, **pin)

    def _result(self, fut, what: str, timeout: float | None = None,
                stated: float | None = None):
        """``fut.result()`` within ``timeout`` (default the data's), failures as
        `DataError` naming ``stated`` seconds (default the timeout)."""
        limit = self.timeout if timeout is None else timeout
        try:
            return fut.result(timeout=limit)
        except (TimeoutError, asyncio.TimeoutError):
            said = limit if stated is None else stated
            raise DataError(
                f"a Dask worker did not answer within {said:g} s while {what} (stopped, "
                "hung or overloaded); the run stops with the iterate so far (raise "
                "rssm.data.samples(..., timeout=) for slow clusters)", self.x.copy()) from None

    def close(self) -> None:
        """Release the actors and the persisted data on the cluster (by dropping this
        oracle's futures: the scheduler forgets a key when no future holds it)."""
        self.actors = []
        self._actor_futures = []
        self._data_futures = []

    def _client_gone(self) -> bool:
        return getattr(self.client, "status", "running") != "running"

    def _closed_error(self) -> DataError:
        return DataError("the Dask client was closed during the run (client.close() or the "
                         "scheduler went away); the run stops with the iterate so far",
                         self.x.copy())

    def _rebuild(self, j: int, exc: BaseException, qcols, want_cost, trial=None):
        """Replace actor j after its worker was lost; return its answer to this round."""
        addr = self.workers[j]
        if self._client_gone():
            raise self._closed_error() from exc
        if self._rebuilds >= MAX_REBUILDS:
            raise DataError(f"Dask workers were lost {self._rebuilds} times in this run (last "
                            f"{addr}: {exc}); the run stops with the iterate so far",
                            self.x.copy()) from exc
        self._rebuilds += 1
        try:
            fut = self._submit(self._groups[j], None)
            actor = self._result(fut, f"reloading the chunks of lost worker {addr}")
            ans = self._result(actor.run("none", None, None, qcols, want_cost, trial),
                               f"rebuilding the caches of lost worker {addr}")
        except DataError:
            raise
        except Exception as exc2:
            if self._client_gone():
                raise self._closed_error() from exc2
            raise DataError(f"Dask worker {addr} was lost ({type(exc).__name__}: {exc}) and "
                            f"its chunks could not be reloaded ({type(exc2).__name__}: {exc2});"
                            " the run stops with the iterate so far", self.x.copy()) from exc2
        self._actor_futures.append(fut)
        self.actors[j] = actor
        warnings.warn(f"rssm: Dask worker {addr} was lost ({type(exc).__name__}); its "
                      f"{len(self._groups[j])} chunk(s) were reloaded on another worker and "
                      "their caches rebuilt from X", RuntimeWarning, stacklevel=5)
        return ans

    # -- one round: the pending change and a query, one message per actor --------------------
    def _round(self, qcols: ColumnSet | None, want_cost: bool, timeout: float | None = None,
               trial: tuple | None = None):
        pend = self._pending
        if pend is None:
            changed, cols, values = "none", None, None
        elif pend is ALL:
            changed, cols, values = "all", None, self.x.copy()
        else:
            changed, cols, values = "cols", pend, np.ascontiguousarray(self.x[:, pend.selector])
        if self._client_gone():
            raise self._closed_error()
        limit = self.timeout if timeout is None else timeout
        futs = [a.run(changed, cols, values, qcols, want_cost, trial) for a in self.actors]
        deadline = time.monotonic() + limit
        answers: list = [None] * len(futs)
        try:
            for j, f in enumerate(futs):
                try:
                    answers[j] = self._result(f, "computing an iteration",
                                              max(0.0, deadline - time.monotonic()), limit)
                except DataError:
                    self._pending = ALL   # the actors may hold different X now
                    self._store.stalled = True
                    raise
                except Exception as exc:
                    answers[j] = self._rebuild(j, exc, qcols, want_cost, trial)
        except KeyboardInterrupt:
            self._interrupted = True
            self._store.stalled = True   # later reads of these chunks wait briefly
            self._pending = ALL
            raise
        self._pending = None
        parts: list = [None] * len(self.bounds)
        costs: list = [0.0] * len(self.bounds)
        for idx, (gp, cp) in zip(self._groups, answers, strict=True):
            for pos, i in enumerate(idx):
                if gp is not None:
                    parts[i] = gp[pos]
                if cp is not None:
                    costs[i] = cp[pos]
        return parts, costs

    def _sum(self, parts: list) -> np.ndarray:
        out = np.array(parts[0])
        for g in parts[1:]:
            np.add(out, g, out=out)
        return out.T

    # -- the oracle ---------------------------------------------------------------------
    def update(self, cols: ColumnSet | None) -> None:
        # Sent with the next request (one round trip per iteration).
        self._cost = None
        self._cost_hint, self._cost_read = self._cost_read, False
        self._pending = pending_after(self._pending, cols)

    def refresh(self) -> None:
        self._pending = ALL
        self._cost = None
        if not self._interrupted:   # after a Ctrl-C the next request carries it
            self._ask(None, True)

    def _ask(self, qcols: ColumnSet | None, want_cost: bool) -> list | None:
        """A round; the cost is computed in it when asked or when the step-size rule read
        it since the last update (it will read it again: no second round trip)."""
        want_cost = want_cost or (self._cost is None and self._cost_hint)
        timeout = INTERRUPT_TIMEOUT if self._interrupted else None
        parts, costs = self._round(qcols, want_cost, timeout)
        if want_cost:
            total = math.fsum(costs) * self.s
            self._cost = total + self.mu * float(np.abs(self.x).sum()) if self.mu else total
        return parts

    def partial_subgradient(self, cols: ColumnSet) -> np.ndarray:
        g = self._sum(self._ask(cols, False))
        if self.mu:
            g = g + self.mu * np.sign(self.x[:, cols.selector])
        return g

    def _degraded(self, what: str, exc: DataError):
        self._dead = True
        warnings.warn(f"rssm: after the interrupt the Dask workers did not answer ({exc}); "
                      f"the {what} at the returned X is reported as NaN", RuntimeWarning,
                      stacklevel=4)

    def subgradient(self) -> np.ndarray:
        if self._dead:
            return np.full((self.n, self.p), np.nan)
        try:
            parts = self._ask(self._all, False)
        except DataError as exc:
            if not self._interrupted:
                raise
            self._degraded("subgradient", exc)
            return np.full((self.n, self.p), np.nan)
        g = self._sum(parts)
        if self.mu:
            g = g + self.mu * np.sign(self.x)
        return g

    def cost_at(self, cols: ColumnSet | None, sel, values: np.ndarray) -> float:
        """f at X with the columns ``cols`` set to ``values``: a pure query, one round (the
        pending update rides along); NaN after a Ctrl-C when the workers do not answer.

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
            f at the modified point, or NaN (see above).

        Raises
        ------
        DataError
            When the workers do not answer in time (and no Ctrl-C came) or the client is
            closed.
        """
        if self._dead:
            return math.nan
        trial = (self._all if cols is None else cols,
                 np.ascontiguousarray(values, dtype=np.float64))
        try:
            costs = self._round(None, False, INTERRUPT_TIMEOUT if self._interrupted else None,
                                trial)[1]
        except DataError as exc:
            if not self._interrupted:
                raise
            self._degraded("cost", exc)
            return math.nan
        total = math.fsum(costs) * self.s
        if self.mu:
            xt = self.x.copy()
            xt[:, sel] = values
            total += self.mu * float(np.abs(xt).sum())
        return total

    def cost(self) -> float:
        self._cost_read = True
        if self._dead:
            return math.nan
        if self._cost is not None and self._pending is None:
            return self._cost
        try:
            self._ask(None, True)
        except DataError as exc:
            if not self._interrupted:
                raise
            self._degraded("cost", exc)
            return math.nan
        return self._cost

    # -- flop model: that of the problem (linear in m) --------------------------------------
    def flops_partial(self, c: int) -> float:
        return 2.0 * self.m * self.n * c + self.problem.weight_flops(c)

    def flops_subgradient(self) -> float:
        return self.flops_partial(self.p)

    def flops_update(self, c: int) -> float:
        nb = 1 if self.partition is None else self.partition.n_blocks
        return 2.0 * self.m * self.n * c + self.problem.stat_flops(c, nb)
