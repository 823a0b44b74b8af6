"""The storage protocol of the data objectives: samples in a fixed partition of chunks.

Every data objective (`rssm.problems.DPCP`, `rssm.problems.ODL`, every
`rssm.problems.CompositeProblem`) is a sum over samples, so its oracle works chunk by
chunk: the cache Z^T = X^T Yt, the per-sample statistics and the partial products of a
chunk depend on that chunk's samples alone (`rssm.data.engine`). A *store* says where the
samples are and how they are cut:

* ``n``, ``m``: features and samples; ``bounds``: the chunks, as sample ranges [lo, hi);
* ``read(lo, hi)``: samples lo..hi-1 as an n x (hi - lo) float64 array (a view where the
  storage allows one);
* ``cache``: where the oracle keeps the per-sample state ("memory" or "disk");
* ``kind``: "memory", "numpy", "memmap", "h5py", "zarr" or "dask".

`InMemory` holds a NumPy array; `rssm.data.chunked.ChunkedData` reads memory-mapped,
HDF5, Zarr and Dask arrays. Both cut the samples by `default_chunk_size` unless told
otherwise, a rule that depends on the data's size (m, n) alone, never on the number of
threads: a run's bits then do not depend on how many workers compute its chunks, and an
in-memory and an out-of-core run of the same data share their partition.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from rssm._validation import is_quiet

__all__ = ["SampleStore", "InMemory", "Standardized", "DataError", "LayoutWarning",
           "default_chunk_size", "chunk_bounds", "as_store", "warn_if_transposed",
           "DEFAULT_CHUNK_BYTES", "MIN_CHUNK_SAMPLES", "MIN_CHUNK_ENTRIES", "MAX_CHUNKS",
           "STALLED_TIMEOUT"]

#: Largest chunk of the default partition, in bytes of float64 data (64 MiB).
DEFAULT_CHUNK_BYTES = 64 * 2**20
#: Smallest chunk of the default partition, in samples ... (2048: on 2 cores the paper's
#: DPCP and ODL ran 2-7% faster in 2 chunks than in 4 at every block size, quiet machine,
#: default threads: a chunk's fixed cost, ~25-50 us of Python and dispatch, is then paid
#: twice instead of four times; larger data keep up to `MAX_CHUNKS` chunks)
MIN_CHUNK_SAMPLES = 2048
#: ... and in entries (samples x features): a chunk must carry enough work to be worth a
#: task (a task costs ~20-50 us to dispatch; 2^16 entries are ~0.1 ms of GEMM at |C| = 8).
MIN_CHUNK_ENTRIES = 2**16
#: Most chunks of the default partition, unless `DEFAULT_CHUNK_BYTES` needs more.
MAX_CHUNKS = 16
#: Seconds a read of remote chunks waits once the store is marked ``stalled``.
STALLED_TIMEOUT = 2.0


def default_chunk_size(m: int, n: int) -> int:
    """Samples per chunk of the default partition of m samples in R^n.

    As many chunks as fit ``max(MIN_CHUNK_SAMPLES, MIN_CHUNK_ENTRIES / n)`` samples each,
    at most `MAX_CHUNKS`, and at least as many as keep a chunk within
    `DEFAULT_CHUNK_BYTES`; the samples are then split evenly. One chunk for small m
    (paper DPCP, n = 100, m = 5000: 2 chunks of 2500; m = 2e6: 24 chunks of 64 MiB).
    A function of (m, n) alone: never of the machine or the thread count.

    Parameters
    ----------
    m : int
        Number of samples.
    n : int
        Dimension of a sample (features), >= 1.

    Returns
    -------
    int
        Samples per chunk, >= 1 (the last chunk of `chunk_bounds` may be shorter).
    """
    m, n = int(m), int(n)
    k_min = max(MIN_CHUNK_SAMPLES, -(-MIN_CHUNK_ENTRIES // n))
    count = min(MAX_CHUNKS, max(1, m // k_min))
    k_cap = max(1, DEFAULT_CHUNK_BYTES // (8 * n))
    count = max(count, -(-m // k_cap))
    return max(1, -(-m // count))


def aligned(a: np.ndarray) -> np.ndarray:
    """``a`` itself where its entries are aligned in memory, else a copy in the same
    layout. NumPy hands a product to BLAS only for aligned operands and computes it with
    its own loops otherwise, in another order of additions: a chunk of a file opened at
    an offset that is not a multiple of 8 bytes, or one unpickled on a Dask worker
    process, gave other bits than the same samples in memory (a user's audit: 7e-14
    after a default DPCP run).

    Parameters
    ----------
    a : numpy.ndarray
        Any array.

    Returns
    -------
    numpy.ndarray
        ``a``, or an aligned copy of it.
    """
    return a if a.flags.aligned else np.array(a, order="K", copy=True)


def chunk_bounds(m: int, k: int) -> tuple[tuple[int, int], ...]:
    """[lo, hi) ranges of consecutive chunks of k samples (the last may be shorter).

    Parameters
    ----------
    m : int
        Number of samples.
    k : int
        Samples per chunk, >= 1.

    Returns
    -------
    tuple of (int, int)
        The ranges (0, k), (k, 2k), ..., the last ending at m; empty when m = 0.
    """
    return tuple((lo, min(lo + k, m)) for lo in range(0, m, k))




def one_blas_thread():
    """A context that limits NumPy's BLAS (and the pools loaded with it) to one thread, for
    products whose bits must not depend on the machine's thread count
    (`rssm.threads.single_blas`: shared with the runs' limit, safe in concurrent threads)."""
    from rssm.threads import single_blas

    return single_blas()


class DataError(RuntimeError):
    """The data or the workers that hold it became unavailable during a run (a data file
    truncated, a cache file that cannot be written, a Dask worker that does not answer or
    a closed client).

    Parameters
    ----------
    message : str
        What became unavailable, and why (the exception's text).
    x : ndarray, optional
        Stored as the attribute ``x``.

    Attributes
    ----------
    x : ndarray or None
        A copy of the iterate when the oracle noticed (on St(n, p)): the run so far.
    """

    def __init__(self, message: str, x: np.ndarray | None = None):
        super().__init__(message)
        self.x = x


class LayoutWarning(UserWarning):
    """The data's shape suggests that samples and features were swapped."""


def warn_if_transposed(n: int, m: int, what: str, arg: str, stacklevel: int = 3) -> None:
    """Warn (`LayoutWarning`) when a data matrix of n features and m samples has fewer
    samples than features, m < n: for DPCP and ODL such data determine nothing (with
    m <= n - p a DPCP X orthogonal to every sample has f = 0), and the usual cause is a
    matrix with samples as rows passed where samples are columns.

    Parameters
    ----------
    n : int
        Number of features (rows of the data matrix).
    m : int
        Number of samples (its columns).
    what : str
        The problem's name in the message (``"DPCP"``).
    arg : str
        The data argument's name in the message (``"yt"``).
    stacklevel : int
        Passed to `warnings.warn`: the frame the warning names.
    """
    if m < n and not is_quiet(LayoutWarning):
        warnings.warn(
            f"{what}: {arg} is {n} x {m}, read as {m} samples in R^{n}; fewer samples than "
            f"features usually means samples as rows were passed where {what} takes them "
            f"as columns: pass {arg}.T, or rssm.data.samples(array) for an m x n array "
            "with one sample per row",
            LayoutWarning, stacklevel=stacklevel)


class SampleStore:
    """Base of the stores: m samples in R^n, cut into the chunks ``bounds``.

    Subclasses set ``n``, ``m``, ``bounds``, ``kind``, ``cache``, ``cache_dir`` and
    implement `read`. ``concurrent_reads`` says whether `read` may run in several
    threads at once (the oracle serializes reads otherwise).
    """

    n: int
    m: int
    bounds: tuple[tuple[int, int], ...]
    kind: str = "memory"
    cache: str = "memory"
    cache_dir: str | None = None
    concurrent_reads: bool = True
    #: Seconds a remote chunk (a Dask worker) may take to answer (`rssm.data.distributed`).
    timeout: float = 60.0
    #: Set by an oracle whose workers did not answer (or a Ctrl-C while waiting for them):
    #: later reads of remote chunks wait at most `STALLED_TIMEOUT` seconds.
    stalled: bool = False

    @property
    def shape(self) -> tuple[int, int]:
        """(n, m): features and samples (the problems' layout, samples as columns)."""
        return (self.n, self.m)

    def read(self, lo: int, hi: int) -> np.ndarray:
        """Samples lo..hi-1 as an n x (hi - lo) float64 array (each store implements it).

        Parameters
        ----------
        lo, hi : int
            The range [lo, hi) of samples, 0 <= lo <= hi <= m.

        Returns
        -------
        numpy.ndarray, shape (n, hi - lo)
            The samples as columns, float64 (a view where the storage allows one).
        """
        raise NotImplementedError(f"{type(self).__name__} must implement read(lo, hi)")

    def read_watched(self, lo: int, hi: int, seen: dict) -> np.ndarray:
        """`read` for one run's oracle, which keeps ``seen`` for the run: a store that can
        tell data gone during the run from data (`rssm.data.ChunkedData` on Zarr) checks
        it there; others just read.

        Parameters
        ----------
        lo, hi : int
            The range [lo, hi) of samples, 0 <= lo <= hi <= m.
        seen : dict
            The run's record of the chunks read so far, kept by the oracle (empty at the
            run's start) and updated by the stores that check it.

        Returns
        -------
        numpy.ndarray, shape (n, hi - lo)
            The samples as columns, as `read` gives them.

        Raises
        ------
        DataError
            When the store tells that its data became unavailable during the run.
        """
        return self.read(lo, hi)

    def chunks(self):
        """Iterate over (lo, hi, chunk) with chunk = `read(lo, hi)`."""
        for lo, hi in self.bounds:
            yield lo, hi, aligned(self.read(lo, hi))

    def gram(self) -> np.ndarray:
        """Yt Yt^T (n x n): the chunks' grams, each on one BLAS thread, added in chunk order
        (so every store with the same partition gives the same bits, on any machine)."""
        g = None
        with one_blas_thread():
            for _, _, blk in self.chunks():
                part = blk @ blk.T
                g = part if g is None else np.add(g, part, out=g)
        return g

    def sum_squares(self) -> float:
        """||Yt||_F^2, summed over the chunks in order."""
        total = 0.0
        for _, _, blk in self.chunks():
            total += float(np.vdot(blk, blk))
        return total


class InMemory(SampleStore):
    """A NumPy array held in memory (n x m float64, samples as columns; not copied).

    Parameters
    ----------
    yt : ndarray, shape (n, m)
        The samples as columns (float64).
    chunk_size : int, optional
        Samples per chunk; default `default_chunk_size`.
    """

    kind = "memory"

    def __init__(self, yt: np.ndarray, chunk_size: int | None = None):
        if not isinstance(yt, np.ndarray) or yt.ndim != 2 or yt.dtype != np.float64:
            raise TypeError("InMemory needs a 2-D float64 NumPy array (n x m)")
        self.yt = yt
        self.n, self.m = (int(s) for s in yt.shape)
        k = default_chunk_size(self.m, self.n) if chunk_size is None else int(chunk_size)
        self.chunk_size = min(max(1, k), self.m)
        self.bounds = chunk_bounds(self.m, self.chunk_size)

    def read(self, lo: int, hi: int) -> np.ndarray:
        return self.yt[:, lo:hi]

    def __repr__(self) -> str:
        c = len(self.bounds)
        return (f"InMemory(n={self.n}, m={self.m}, {c} chunk{'s' if c > 1 else ''} of "
                f"{self.chunk_size})")


def check_feature_norms(nrm: np.ndarray, top: np.ndarray) -> None:
    """Refuse centred features whose norm left float64's range (sums of squares of entries
    beyond about 1e154 overflow, below 1e-154 underflow to 0, and the feature would be
    scaled to 0 or by inf); ``top`` holds each feature's largest magnitude.

    Parameters
    ----------
    nrm : numpy.ndarray, shape (n,)
        The norms of the centred features.
    top : numpy.ndarray, shape (n,)
        Each centred feature's largest magnitude.

    Raises
    ------
    ValueError
        When a feature with a nonzero entry has a norm that is 0 or not finite.
    """
    bad = (top > 0) & ~((nrm > 0) & np.isfinite(nrm))
    if bad.any():
        raise ValueError(
            f"a: {int(bad.sum())} centred feature(s) (the first: {int(np.argmax(bad))}, "
            f"largest entry {float(top[bad][0]):.3g}) have a norm outside float64's range, "
            "so they cannot be scaled to unit norm; scale the data first (e.g. by its "
            "largest entry)")


class Standardized(SampleStore):
    """Another store's samples with every feature centred (mean 0 over the samples) and,
    with ``normalize``, scaled to unit Euclidean norm (constant features left at 0), on
    read: ManPG's preprocessing of sparse PCA, without a copy of the data. Two passes over
    the data at construction (the mean, then the norms of the centred features).

    Parameters
    ----------
    base : SampleStore
        The samples.
    normalize : bool
        Scale the centred features to unit norm.
    """

    def __init__(self, base: SampleStore, normalize: bool = True):
        self.base = base
        self.n, self.m, self.bounds = base.n, base.m, base.bounds
        self.kind, self.cache, self.cache_dir = base.kind, base.cache, base.cache_dir
        self.concurrent_reads, self.timeout = base.concurrent_reads, base.timeout
        total = np.zeros(self.n)
        hi = np.full(self.n, -np.inf)
        lo = np.full(self.n, np.inf)
        for _, _, blk in base.chunks():
            total += blk.sum(axis=1)
            if blk.size:
                np.maximum(hi, blk.max(axis=1), out=hi)
                np.minimum(lo, blk.min(axis=1), out=lo)
        # a constant feature's mean is its value exactly: the sum's rounding left a residue
        # of 1e-14 that the scaling made a unit feature (an audit)
        self.mean = np.where(hi == lo, hi, total / self.m)
        self.scale = None
        if normalize:
            sq = np.zeros(self.n)
            top = np.zeros(self.n)
            for _, _, blk in base.chunks():
                c = blk - self.mean[:, None]
                with np.errstate(over="ignore", under="ignore"):
                    sq += np.einsum("ij,ij->i", c, c)
                if c.size:
                    np.maximum(top, np.abs(c).max(axis=1), out=top)
            nrm = np.sqrt(sq)
            check_feature_norms(nrm, top)
            self.scale = np.where(nrm > 0, nrm, 1.0)

    def read(self, lo: int, hi: int) -> np.ndarray:
        return self._standardize(self.base.read(lo, hi))

    def read_watched(self, lo: int, hi: int, seen: dict) -> np.ndarray:
        return self._standardize(self.base.read_watched(lo, hi, seen))

    def _standardize(self, blk: np.ndarray) -> np.ndarray:
        out = np.subtract(blk, self.mean[:, None])
        if self.scale is not None:
            out /= self.scale[:, None]
        return out

    def __repr__(self) -> str:
        what = "centred and scaled" if self.scale is not None else "centred"
        return f"Standardized({self.base!r}, {what})"


def as_store(value: Any) -> SampleStore:
    """``value`` as a store: a store as it is, a 2-D float64 array as `InMemory`.

    Parameters
    ----------
    value : SampleStore or numpy.ndarray, shape (n, m)
        A store, or the samples as columns in a 2-D float64 NumPy array (not copied).

    Returns
    -------
    SampleStore
        ``value`` itself, or an `InMemory` store of it with the default partition.

    Raises
    ------
    TypeError
        When ``value`` is neither a store nor a 2-D float64 NumPy array.
    """
    if isinstance(value, SampleStore):
        return value
    return InMemory(value)
