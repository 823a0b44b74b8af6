"""Data matrices read a chunk of samples at a time, and the oracle that streams them.

The data objectives (`rssm.problems.DPCP`, `rssm.problems.ODL`, every
`rssm.problems.CompositeProblem`) are sums over samples: the row of Z = Y^T X of a sample,
its weight and its share of the cost depend on that sample alone. So the p x m cache
Z^T = X^T Yt of `rssm.problems._data.DataOracle` splits into column chunks, one per chunk
of samples, and

* a partial subgradient Yt W^T (eq. ``eq-partialRiemsubgrad``'s Euclidean part) is the sum
  over chunks of Yt_k W_k^T (n x |C| each);
* the cost is the sum of the chunks' costs;
* updating the cache after the columns C changed touches each chunk's rows C alone.

`ChunkedOracle` keeps one in-memory oracle of the problem per chunk (the problem's own
incremental oracle, built on the chunk by ``problem._sample_slice``), hands it its chunk of
data only while it works, and sums the n x |C| results. Its per-sample state (the cache
rows Z^T_k, the per-block norms of DPCP and of norm losses) lives either in memory
(``cache="memory"``, p x m floats in all) or in a temporary file (``cache="disk"``) that is
read into one chunk-sized work area before a chunk is used and written back after an
update, so that with data on disk the resident memory is O(n p + chunk) (docs/data.md has
the measurements).
"""

from __future__ import annotations

import math
import os
import tempfile
import weakref
from typing import Any

import numpy as np

from rssm.blocks import ColumnSet, Partition
from rssm.problem import Oracle

__all__ = ["ChunkedData", "samples", "is_out_of_core", "as_data_matrix", "ChunkedOracle",
           "make_data_oracle", "DEFAULT_CHUNK_BYTES"]

#: Default size of one chunk of samples, in bytes of float64 data.
DEFAULT_CHUNK_BYTES = 64 * 2**20

_LAZY_MODULES = ("h5py", "zarr", "dask")


def _lazy_kind(value: Any) -> str | None:
    """'h5py', 'zarr' or 'dask' for arrays of those packages (without importing them)."""
    mod = type(value).__module__.split(".")[0]
    if mod in _LAZY_MODULES and hasattr(value, "shape") and hasattr(value, "dtype"):
        return mod
    return None


def is_out_of_core(value: Any) -> bool:
    """True for the arrays the data objectives stream instead of copying into memory:
    `ChunkedData`, a `numpy.memmap`, an HDF5 (h5py) or Zarr dataset, or a Dask array."""
    return isinstance(value, (ChunkedData, np.memmap)) or _lazy_kind(value) is not None


class ChunkedData:
    """A data matrix read a chunk of samples at a time.

    Parameters
    ----------
    source : array-like
        A 2-D `numpy.memmap`, h5py or Zarr dataset, Dask array or NumPy array; anything
        that can be sliced and has ``shape`` and ``dtype``.
    rows_are_samples : bool
        True when ``source`` is m x n (one sample per row, the layout of files and of
        scikit-learn); False when it is n x m, the layout of the problems' constructors
        (samples as columns). Either way no transposed copy is made: a chunk is read in the
        file's own layout and handed to the oracles as a transposed view.
    chunk_size : int, optional
        Samples per chunk. Default: as many as fill `DEFAULT_CHUNK_BYTES` (64 MiB) of
        float64 data, or the chunking of an h5py/Zarr/Dask source along the samples when it
        is a multiple of that.
    check_finite : bool
        Read the data once and refuse NaN or infinite entries (naming how many samples have
        them and the first one). Default True.
    cache : {"auto", "memory", "disk"}
        Where `ChunkedOracle` keeps the per-sample state (the p x m cache Z^T and the
        per-block norms): "memory", or a temporary file in ``cache_dir`` ("disk"), which
        bounds the resident memory by O(n p + chunk). "auto" (default): "disk" for data
        on disk (memmap, HDF5, Zarr), "memory" otherwise.
    cache_dir : str, optional
        Folder of the temporary cache file (default: the system's temporary folder).
    name : str
        Argument name used in error messages.

    Attributes
    ----------
    n, m : int
        Dimension and number of samples.
    bounds : list of (int, int)
        Sample ranges [lo, hi) of the chunks.
    """

    def __init__(self, source: Any, *, rows_are_samples: bool, chunk_size: int | None = None,
                 check_finite: bool = True, cache: str = "auto", cache_dir: str | None = None,
                 name: str = "data"):
        if cache not in ("auto", "memory", "disk"):
            raise ValueError(f"cache must be 'auto', 'memory' or 'disk', got {cache!r}")
        if isinstance(source, ChunkedData):
            raise TypeError(f"{name} is already a ChunkedData")
        shape = getattr(source, "shape", None)
        dtype = getattr(source, "dtype", None)
        if shape is None or dtype is None:
            raise TypeError(f"{name} must be an array with shape and dtype, got "
                            f"{type(source).__name__}")
        dtype = np.dtype(dtype)
        if dtype.kind not in "iuf":
            raise TypeError(f"{name} must hold real numbers (int or float dtypes), got dtype "
                            f"{dtype}")
        if len(shape) != 2:
            raise ValueError(f"{name} must be 2-D, got an array with shape {tuple(shape)}")
        if 0 in shape:
            raise ValueError(f"{name} must not be empty, got shape {tuple(shape)}")
        self.source = source
        self.rows_are_samples = bool(rows_are_samples)
        self.name = name
        self.m, self.n = (int(shape[0]), int(shape[1])) if rows_are_samples else (
            int(shape[1]), int(shape[0]))
        self.kind = _lazy_kind(source) or ("memmap" if isinstance(source, np.memmap)
                                           else "numpy")
        if cache == "auto":
            cache = "disk" if self.kind in ("memmap", "h5py", "zarr") else "memory"
        self.cache, self.cache_dir = cache, cache_dir
        if chunk_size is None:
            chunk_size = max(1, DEFAULT_CHUNK_BYTES // (8 * self.n))
            native = self._native_chunk()
            if native:
                chunk_size = max(native, (chunk_size // native) * native)
        if isinstance(chunk_size, bool) or not isinstance(chunk_size, (int, np.integer)) \
                or chunk_size < 1:
            raise ValueError(f"chunk_size must be an integer >= 1, got {chunk_size!r}")
        k = min(int(chunk_size), self.m)
        self.chunk_size = k
        self.bounds = [(lo, min(lo + k, self.m)) for lo in range(0, self.m, k)]
        if check_finite:
            self.check_finite()

    def _native_chunk(self) -> int | None:
        chunks = getattr(self.source, "chunks", None)
        if not chunks:
            return None
        ax = 0 if self.rows_are_samples else 1
        c = chunks[ax]
        if isinstance(c, tuple):  # dask: a tuple of chunk sizes per axis
            c = c[0] if c else None
        return int(c) if c else None

    def __repr__(self) -> str:
        layout = "rows" if self.rows_are_samples else "columns"
        return (f"ChunkedData({self.kind}, n={self.n}, m={self.m}, samples as {layout}, "
                f"{len(self.bounds)} chunks of {self.chunk_size})")

    @property
    def shape(self) -> tuple[int, int]:
        """(n, m): the layout of the problems' constructors."""
        return (self.n, self.m)

    def read(self, lo: int, hi: int) -> np.ndarray:
        """Samples lo..hi-1 as an n x (hi - lo) float64 array (a transposed view when the
        source has samples as rows; no copy of a float64 memmap or NumPy source)."""
        src = self.source
        blk = src[lo:hi] if self.rows_are_samples else src[:, lo:hi]
        if self.kind == "dask":
            blk = blk.compute()
        arr = np.asarray(blk)
        if arr.dtype != np.float64:
            arr = arr.astype(np.float64)
        return arr.T if self.rows_are_samples else arr

    def chunks(self):
        """Iterate over (lo, hi, chunk) with chunk = `read(lo, hi)`."""
        for lo, hi in self.bounds:
            yield lo, hi, self.read(lo, hi)

    def _dask_rows(self):
        """The Dask source as m x n (a lazy transpose when needed)."""
        return self.source if self.rows_are_samples else self.source.T

    def check_finite(self) -> None:
        """Raise ValueError if any sample has a NaN or infinite entry (one pass)."""
        bad = 0
        first = None
        if self.kind == "dask":
            import dask
            import dask.array as da

            badrow = ~da.isfinite(self._dask_rows()).all(axis=1)
            bad, first = (int(v) for v in dask.compute(badrow.sum(), da.argmax(badrow)))
            self._raise_nonfinite(bad, first)
            return
        for lo, _, blk in self.chunks():
            ok = np.isfinite(blk).all(axis=0)
            nb = int(ok.size - np.count_nonzero(ok))
            if nb and first is None:
                first = lo + int(np.argmin(ok))
            bad += nb
        self._raise_nonfinite(bad, first)

    def _raise_nonfinite(self, bad: int, first: int | None) -> None:
        if bad:
            raise ValueError(
                f"{self.name} has {bad} sample(s) with NaN or infinite entries (the first is "
                f"sample {first}, counting from 0); all entries must be finite")

    def gram(self) -> np.ndarray:
        """Yt Yt^T (n x n), summed over chunks."""
        if self.kind == "dask":
            a = self._dask_rows()
            return np.asarray((a.T @ a).compute(), dtype=np.float64)
        g = np.zeros((self.n, self.n))
        for _, _, blk in self.chunks():
            g += blk @ blk.T
        return g


def samples(source: Any, *, chunk_size: int | None = None, check_finite: bool = True,
            cache: str = "auto", cache_dir: str | None = None) -> ChunkedData:
    """Mark an m x n array with **one sample per row** (the layout of files) as data for
    `rssm.problems.DPCP`, `rssm.problems.ODL` or `rssm.problems.CompositeProblem`, which
    otherwise take samples as columns. Nothing is read or copied except by the finiteness
    check; the problems stream the array a chunk at a time.

    Parameters
    ----------
    source : array-like
        numpy.memmap, h5py/Zarr dataset, Dask or NumPy array of shape (m, n).
    chunk_size, check_finite, cache, cache_dir
        See `ChunkedData`.

    Examples
    --------
    >>> import numpy as np, rssm
    >>> a = np.random.default_rng(0).standard_normal((500, 6))   # 500 samples in R^6
    >>> prob = rssm.problems.DPCP(rssm.data.samples(a, chunk_size=128), p=4)
    >>> prob.shape, prob.m
    ((6, 4), 500)
    """
    return ChunkedData(source, rows_are_samples=True, chunk_size=chunk_size,
                       check_finite=check_finite, cache=cache, cache_dir=cache_dir, name="data")


def as_data_matrix(value: Any, name: str):
    """A problem's data argument (n x m, samples as columns): out-of-core arrays become a
    `ChunkedData` (nothing read into memory); anything else goes through
    `rssm._validation.as_float_matrix` (a float64 copy in memory, as before)."""
    from rssm._validation import as_float_matrix

    if isinstance(value, ChunkedData):
        return value
    if is_out_of_core(value):
        return ChunkedData(value, rows_are_samples=False, name=name)
    return as_float_matrix(value, name, copy=True)


# -- problem-level oracles on chunked data ----------------------------------------------------
def _penalty(problem) -> float:
    return float(getattr(problem, "l1_penalty", 0.0) or 0.0)


def make_data_oracle(problem, x: np.ndarray, partition: Partition | None) -> Oracle:
    """The oracle of a data problem with out-of-core data: `rssm.data.distributed.DaskOracle`
    for a Dask array when a ``dask.distributed`` client is running, else `ChunkedOracle`."""
    data = problem._data
    if data.kind == "dask":
        from rssm.data.distributed import DaskOracle, active_client

        client = active_client()
        if client is not None:
            return DaskOracle(problem, x, partition, client)
    return ChunkedOracle(problem, x, partition)


def chunked_cost(problem, x: np.ndarray) -> float:
    """f(X) of a data problem whose data is a `ChunkedData`: the sum of its chunks'."""
    data = problem._data
    total = math.fsum(problem._sample_slice(blk, lo, hi).cost(x)
                      for lo, hi, blk in data.chunks())
    mu = _penalty(problem)
    return total + mu * float(np.abs(x).sum()) if mu else total


def chunked_subgradient(problem, x: np.ndarray) -> np.ndarray:
    """A subgradient of a data problem whose data is a `ChunkedData` (sum over chunks)."""
    g = np.zeros(problem.shape)
    for lo, hi, blk in problem._data.chunks():
        g += problem._sample_slice(blk, lo, hi).subgradient(x)
    mu = _penalty(problem)
    if mu:
        g += mu * np.sign(x)
    return g


# -- the streaming oracle -------------------------------------------------------------------
class _StateFile:
    """A temporary file holding the per-sample state of every chunk; one chunk's state is
    read into shared work buffers before use and written back after an update."""

    def __init__(self, directory: str | None):
        fd, self.path = tempfile.mkstemp(prefix="rssm-cache-", suffix=".bin", dir=directory)
        self.fd = fd
        self.size = 0
        self.work: dict[str, np.ndarray] = {}
        # The file is deleted when the oracle goes away (or the interpreter exits).
        self._fin = weakref.finalize(self, _StateFile._remove, fd, self.path)

    @staticmethod
    def _remove(fd: int, path: str) -> None:
        try:
            os.close(fd)
        finally:
            if os.path.exists(path):
                os.unlink(path)

    def close(self) -> None:
        self._fin()

    def reserve(self, nbytes: int) -> int:
        off = self.size
        self.size += nbytes
        os.ftruncate(self.fd, self.size)
        return off

    def buffer(self, name: str, shape: tuple[int, ...]) -> np.ndarray:
        """A C-contiguous view of the shared work buffer ``name`` with ``shape``."""
        size = int(np.prod(shape))
        buf = self.work.get(name)
        if buf is None or buf.size < size:
            buf = np.empty(size)
            self.work[name] = buf
        return buf[:size].reshape(shape)

    def write(self, arr: np.ndarray, off: int) -> None:
        mv = memoryview(np.ascontiguousarray(arr)).cast("B")
        done = 0
        while done < len(mv):
            done += os.pwrite(self.fd, mv[done:], off + done)

    def read(self, out: np.ndarray, off: int) -> None:
        mv = memoryview(out).cast("B")
        done = 0
        while done < len(mv):
            got = os.preadv(self.fd, [mv[done:]], off + done)
            if got <= 0:
                raise OSError(f"short read from the cache file {self.path}")
            done += got


_NOT_STATE = frozenset({"yt", "_w", "x", "bt", "cw"})


class ChunkedOracle(Oracle):
    """Incremental oracle of a data problem whose data is a `ChunkedData`.

    Holds one in-memory oracle per chunk of samples (built by the problem itself on the
    chunk) and streams the chunks of data through them: every ``partial_subgradient``,
    ``subgradient``, ``update`` and ``refresh`` reads the data once; ``cost`` reads only
    the state. The results are the sums over chunks, so the iterates equal those of the
    in-memory oracle up to the order of the floating-point sums.

    Parameters
    ----------
    problem : Problem
        A data problem (``problem._data`` is a `ChunkedData`).
    x : ndarray
        The solver's iterate (shared, never copied).
    partition : Partition or None
        RSSM's column partition (None for RSM).

    The state's place ("memory" or "disk") is the data's ``cache`` (see `ChunkedData`).
    """

    def __init__(self, problem, x: np.ndarray, partition: Partition | None):
        super().__init__(problem, x, partition)
        data: ChunkedData = problem._data
        cache, cache_dir = data.cache, data.cache_dir
        self.data = data
        self.n, self.m, self.p = data.n, data.m, x.shape[1]
        self.mu = _penalty(problem)
        self.cache = cache
        self._file = _StateFile(cache_dir) if cache == "disk" else None
        self._scratch = np.empty(self.p * data.chunk_size)
        self.subs: list[Oracle] = []
        self._state: list[dict[str, tuple[int, tuple[int, ...]]]] = []
        for lo, hi, blk in data.chunks():
            sub = problem._sample_slice(blk, lo, hi).make_oracle(x, partition)
            k = hi - lo
            # One scratch buffer for every chunk's weights (p x k): the chunks run one at a
            # time, so p x m of scratch would be wasted memory.
            sub._w = self._scratch[: self.p * k].reshape(self.p, k)
            sub.yt = None
            self.subs.append(sub)
            self._state.append(self._spill(sub, k) if self._file is not None else {})

    # -- state on disk ----------------------------------------------------------------------
    def _spill(self, sub, k: int) -> dict:
        """Move the chunk's per-sample arrays to the state file; leave shared work views."""
        where = {}
        for name, val in list(vars(sub).items()):
            if name in _NOT_STATE or not isinstance(val, np.ndarray) or val.ndim == 0 \
                    or val.shape[-1] != k or val.dtype != np.float64:
                continue
            off = self._file.reserve(val.nbytes)
            self._file.write(val, off)
            where[name] = (off, val.shape)
            setattr(sub, name, self._file.buffer(name, val.shape))
        return where

    def _load(self, i: int) -> None:
        for name, (off, shape) in self._state[i].items():
            buf = self._file.buffer(name, shape)
            self._file.read(buf, off)
            setattr(self.subs[i], name, buf)

    def _store(self, i: int) -> None:
        sub = self.subs[i]
        for name, (off, shape) in self._state[i].items():
            self._file.write(getattr(sub, name), off)
            setattr(sub, name, self._file.buffer(name, shape))

    def close(self) -> None:
        """Delete the state file (``cache="disk"``); the oracle is unusable afterwards."""
        if self._file is not None:
            self._file.close()

    # -- passes over the data ---------------------------------------------------------------
    def _pass(self, method: str, *args, write: bool = False, data: bool = True):
        out = []
        disk = self._file is not None
        for i, (lo, hi) in enumerate(self.data.bounds):
            sub = self.subs[i]
            if disk:
                self._load(i)
            if data:
                sub.yt = self.data.read(lo, hi)
            try:
                out.append(getattr(sub, method)(*args))
            finally:
                sub.yt = None
            if disk and write:
                self._store(i)
        return out

    def partial_subgradient(self, cols: ColumnSet) -> np.ndarray:
        parts = self._pass("partial_subgradient", cols)
        g = parts[0].copy() if len(parts) == 1 else np.add.reduce(parts)
        if self.mu:
            g += self.mu * np.sign(self.x[:, cols.selector])
        return g

    def subgradient(self) -> np.ndarray:
        parts = self._pass("subgradient")
        g = parts[0].copy() if len(parts) == 1 else np.add.reduce(parts)
        if self.mu:
            g += self.mu * np.sign(self.x)
        return g

    def update(self, cols: ColumnSet | None) -> None:
        self._pass("update", cols, write=True)

    def refresh(self) -> None:
        self._pass("refresh", write=True)

    def cost(self) -> float:
        total = math.fsum(self._pass("cost", data=False))
        return total + self.mu * float(np.abs(self.x).sum()) if self.mu else total

    # -- flop model: the chunks' sums --------------------------------------------------------
    def flops_partial(self, c: int) -> float:
        return sum(s.flops_partial(c) for s in self.subs) + (2.0 * self.n * c if self.mu else 0)

    def flops_subgradient(self) -> float:
        return self.flops_partial(self.p)

    def flops_update(self, c: int) -> float:
        return sum(s.flops_update(c) for s in self.subs)
