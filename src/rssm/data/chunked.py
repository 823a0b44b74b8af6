"""Data matrices read a chunk of samples at a time (memory-mapped, HDF5, Zarr, Dask).

`ChunkedData` is the out-of-core store of the data objectives (`rssm.data.store` has the
protocol): it reads chunk i of its fixed partition when the oracle
(`rssm.data.engine.DataOracle`) works on it, and never holds the whole matrix. `samples`
marks an m x n array with one sample per row; `as_data_matrix` turns a problem's data
argument into a `ChunkedData` when it is out of core.

The partition is `rssm.data.store.default_chunk_size` (as in memory, so the same data in
memory and on disk give the same bits), a Dask array's own chunks along the samples (so
the local and the distributed oracles share it), a multiple of an HDF5/Zarr dataset's
storage chunks when the data spans several default chunks, or ``chunk_size``.
"""

from __future__ import annotations

import math
import mmap
import os
from typing import Any

import numpy as np

from rssm._validation import (
    check_bool,
    check_data_scale,
    check_float64_range,
    max_abs,
    refuse_sparse_or_missing,
)
from rssm.data.store import (
    DEFAULT_CHUNK_BYTES,
    STALLED_TIMEOUT,
    DataError,
    SampleStore,
    aligned,
    chunk_bounds,
    default_chunk_size,
    one_blas_thread,
)

# (ChunkedOracle, the former name of rssm.data.engine.DataOracle, is served by __getattr__.)
__all__ = ["ChunkedData", "samples", "is_out_of_core", "as_data_matrix", "as_rows_matrix",
           "make_data_oracle", "DEFAULT_CHUNK_BYTES"]

_LAZY_MODULES = ("h5py", "zarr", "dask")


def __getattr__(name: str):
    # The oracle moved to rssm.data.engine (one oracle for every store); the old name is
    # kept. Imported on first use: this module does not need the engine.
    if name == "ChunkedOracle":
        from rssm.data.engine import DataOracle

        return DataOracle
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def make_data_oracle(problem, x: np.ndarray, partition):
    """The oracle of a data problem: ``problem.make_oracle(x, partition)`` (kept name).

    Parameters
    ----------
    problem : Problem
        The data problem.
    x : numpy.ndarray, shape (n, p)
        The solver's working iterate, passed to `Problem.make_oracle`.
    partition : Partition or None
        The column blocks of an RSSM run, or None for RSM.

    Returns
    -------
    Oracle
        The problem's oracle bound to ``x``.
    """
    return problem.make_oracle(x, partition)


def _lazy_kind(value: Any) -> str | None:
    """'h5py', 'zarr' or 'dask' for arrays of those packages (without importing them)."""
    mod = type(value).__module__.split(".")[0]
    if mod in _LAZY_MODULES and hasattr(value, "shape") and hasattr(value, "dtype"):
        return mod
    return None


def is_out_of_core(value: Any) -> bool:
    """True for the arrays the data objectives stream instead of copying into memory:
    `ChunkedData`, a `numpy.memmap`, an HDF5 (h5py) or Zarr dataset, or a Dask array.

    Not for a memmap joblib made of an in-memory array to hand it to its workers
    (`joblib_shared`): the user passed an array in memory, and the same call gives the
    same result, at the same cost, whatever ``n_jobs``.

    Parameters
    ----------
    value : object
        Any argument.

    Returns
    -------
    bool
        True when ``value`` is out of core in the sense above.
    """
    if isinstance(value, np.memmap):
        return not joblib_shared(value)
    return isinstance(value, ChunkedData) or _lazy_kind(value) is not None


def joblib_shared(value: Any) -> bool:
    """Whether ``value`` is a memmap joblib made of an in-memory array (arrays over
    ``max_nbytes``, 1 MB by default, reach a worker of ``Parallel(n_jobs=2)``, and so of
    scikit-learn's ``FeatureUnion`` or ``cross_validate``, as read-only memmaps of a file
    in joblib's temporary folder). They went out of core: 15 times slower on wide data, a
    Dask requirement for ``RobustSubspace(center=True)``, bool data refused (a user's
    audit).

    Parameters
    ----------
    value : object
        Any argument.

    Returns
    -------
    bool
        True for a `numpy.memmap` of a file in joblib's temporary folder.
    """
    name = getattr(value, "filename", None)
    return isinstance(value, np.memmap) and name is not None and (
        "joblib_memmapping_folder_" in str(name))


def _mapped_extent(arr: np.memmap) -> tuple[str, int, mmap.mmap] | None:
    """(file, size it must have, the mapping) for a memory-mapped array: the file offset
    just past the last byte the array can touch. None when NumPy does not say (then nothing
    is checked)."""
    mp, fname = getattr(arr, "_mmap", None), getattr(arr, "filename", None)
    if mp is None or fname is None or arr.size == 0:
        return None
    try:
        base = np.frombuffer(mp, dtype=np.uint8).ctypes.data
    except (TypeError, ValueError):
        return None
    start = int(arr.offset) - int(arr.offset) % mmap.ALLOCATIONGRANULARITY
    top = arr.ctypes.data + arr.itemsize + sum(
        max(0, (s - 1) * st) for s, st in zip(arr.shape, arr.strides, strict=True))
    return str(fname), start + (top - base), mp


def _h5_size(fid) -> int | None:
    """The size of the file an h5py file id holds open (through its descriptor: a file
    renamed over the path or unlinked stays whole), or None where the driver has no
    descriptor (an in-memory file) or the file is closed."""
    try:
        return int(os.fstat(fid.get_vfd_handle()).st_size)
    except Exception:       # (h5py raises its own errors for closed files and drivers)
        return None


def _h5_extent(dset) -> tuple[str, object, int] | None:
    """(file name, file id, the file offset just past the dataset's last stored byte) of
    an h5py dataset, or None where that is not known (no descriptor, no layout info)."""
    try:
        fid = dset.file.id
        if _h5_size(fid) is None:
            return None
        off = dset.id.get_offset()
        if off is not None:                       # contiguous: one extent
            need = int(off) + int(dset.id.get_storage_size())
        else:                                     # chunked: the last chunk's end
            ends = [0]
            if hasattr(dset.id, "chunk_iter"):
                dset.id.chunk_iter(lambda info: ends.append(info.byte_offset + info.size))
            else:     # pragma: no cover - h5py < 3.8
                for i in range(dset.id.get_num_chunks()):
                    info = dset.id.get_chunk_info(i)
                    ends.append(info.byte_offset + info.size)
            need = int(max(ends))
        return str(getattr(dset.file, "filename", "?")), fid, need
    except Exception:
        return None


class ChunkedData(SampleStore):
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
        Samples per chunk. Default: `rssm.data.store.default_chunk_size` (at most 16
        chunks unless a chunk would exceed 64 MiB), a Dask array's own chunks along the
        samples, or for an h5py/Zarr dataset spanning several chunks a multiple of its
        storage chunks.
    check_finite : bool
        Read the data once and refuse NaN or infinite entries (naming how many samples have
        them and the first one). Default True.
    cache : {"auto", "memory", "disk"}
        Where the oracle keeps the per-sample state (the p x m cache Z^T and the loss's
        per-sample statistics): "memory", or an unlinked temporary file in ``cache_dir``
        ("disk"), which bounds the resident memory by O(n p + workers x chunk). "auto"
        (default): "disk" for data on disk (memmap, HDF5, Zarr), "memory" otherwise.
    cache_dir : str, optional
        Folder of the temporary cache file (default: the system's temporary folder).
    timeout : float
        For a Dask array on a cluster: seconds a round of requests to the workers may take
        before the run ends with `rssm.data.store.DataError` (default 60).
    name : str
        Argument name used in error messages.

    Attributes
    ----------
    n, m : int
        Dimension and number of samples.
    bounds : tuple of (int, int)
        Sample ranges [lo, hi) of the chunks.
    """

    def __init__(self, source: Any, *, rows_are_samples: bool, chunk_size: int | None = None,
                 check_finite: bool = True, cache: str = "auto", cache_dir: str | None = None,
                 timeout: float = 60.0, name: str = "data"):
        if cache not in ("auto", "memory", "disk"):
            raise ValueError(f"cache must be 'auto', 'memory' or 'disk', got {cache!r}")
        if isinstance(source, ChunkedData):
            raise TypeError(f"{name} is already a ChunkedData")
        refuse_sparse_or_missing(source, name)
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
        if any(isinstance(s, float) and s != s for s in shape):
            raise ValueError(
                f"{name} is a Dask array with unknown chunk sizes (shape {tuple(shape)}); "
                "call its .compute_chunk_sizes() first: the oracle needs the samples of "
                "each chunk")
        if 0 in shape:
            raise ValueError(f"{name} must not be empty, got shape {tuple(shape)}")
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) \
                or not timeout > 0:
            raise ValueError(f"timeout must be a number of seconds > 0, got {timeout!r}")
        self.source = source
        self.rows_are_samples = bool(rows_are_samples)
        self.name = name
        self.timeout = float(timeout)
        self.m, self.n = (int(shape[0]), int(shape[1])) if rows_are_samples else (
            int(shape[1]), int(shape[0]))
        self.kind = _lazy_kind(source) or ("memmap" if isinstance(source, np.memmap)
                                           else "numpy")
        # Dask computes a chunk in its own thread pool: one read at a time.
        self.concurrent_reads = self.kind != "dask"
        if cache == "auto":
            cache = "disk" if self.kind in ("memmap", "h5py", "zarr") else "memory"
        if cache == "disk" and cache_dir and not os.path.isdir(cache_dir):
            # (found when a run starts and makes its cache file there: a bare
            # FileNotFoundError naming a temporary file name)
            raise ValueError(f"cache_dir {str(cache_dir)!r} is not an existing folder; "
                             "create it first, or leave cache_dir=None for the temporary "
                             "folder")
        self.cache, self.cache_dir = cache, cache_dir
        self.bounds = self._partition(chunk_size)
        self.chunk_size = max(hi - lo for lo, hi in self.bounds)
        self._extent = _mapped_extent(source) if self.kind == "memmap" else None
        self._h5 = _h5_extent(source) if self.kind == "h5py" else None
        if check_bool(check_finite, "check_finite"):     # ("no" read as True)
            self.check_finite()

    def _partition(self, chunk_size: int | None) -> tuple[tuple[int, int], ...]:
        if chunk_size is not None:
            if isinstance(chunk_size, bool) or not isinstance(chunk_size, (int, np.integer)) \
                    or chunk_size < 1:
                raise ValueError(f"chunk_size must be an integer >= 1, got {chunk_size!r}")
            return chunk_bounds(self.m, min(int(chunk_size), self.m))
        ax = 0 if self.rows_are_samples else 1
        chunks = getattr(self.source, "chunks", None)
        if self.kind == "dask" and chunks:
            out, lo = [], 0
            for s in chunks[ax]:
                out.append((lo, lo + int(s)))
                lo += int(s)
            return tuple(out)
        k = default_chunk_size(self.m, self.n)
        native = chunks[ax] if chunks else None
        # whole storage chunks where they fit the default's bytes; a dataset stored by
        # feature columns ((m, 1) chunks) would otherwise be one chunk of every sample
        if native and k < self.m and int(native) * 8 * self.n <= DEFAULT_CHUNK_BYTES:
            k = max(int(native), (k // int(native)) * int(native))
        return chunk_bounds(self.m, min(k, self.m))

    def __repr__(self) -> str:
        layout = "rows" if self.rows_are_samples else "columns"
        c = len(self.bounds)
        sizes = {hi - lo for lo, hi in self.bounds[:-1]} or {self.chunk_size}
        size = f"{self.chunk_size}" if len(sizes) == 1 else f"up to {self.chunk_size}"
        return (f"ChunkedData({self.kind}, n={self.n}, m={self.m}, samples as {layout}, "
                f"{c} chunk{'s' if c > 1 else ''} of {size})")

    def read(self, lo: int, hi: int, seen: dict | None = None) -> np.ndarray:
        """Samples lo..hi-1 as an n x (hi - lo) float64 array (a transposed view when the
        source has samples as rows; no copy of a float64 memmap or NumPy source); ``seen``:
        see `read_watched`.

        For a memmap the file's size is checked first: a file truncated during a run
        raises `rssm.data.store.DataError` instead of killing the process with SIGBUS
        (docs/data.md says what this covers).

        Parameters
        ----------
        lo, hi : int
            The range [lo, hi) of samples, 0 <= lo <= hi <= m.
        seen : dict, optional
            The run's record of the chunks read (`read_watched`); checked for a Zarr
            source only. None: no check.

        Returns
        -------
        numpy.ndarray, shape (n, hi - lo)
            The samples as columns, float64.

        Raises
        ------
        DataError
            When the file shrank, a Dask cluster did not answer in time, or (with
            ``seen``) a Zarr chunk reads as its fill value only where it held data.
        """
        if self._extent is not None:
            self._check_file()
        src = self.source
        try:
            blk = src[lo:hi] if self.rows_are_samples else src[:, lo:hi]
            if self.kind == "dask":
                blk = self._compute(blk, lo, hi)
            arr = np.asarray(blk)
        except (DataError, MemoryError):
            raise
        except Exception as exc:
            # the store's own failures: a Zarr chunk that no longer decodes raises its
            # codec's RuntimeError or ValueError, HDF5 its own errors; in a run they end it
            # with `data_error` like a file that went away (a user's audit: a damaged Zarr
            # chunk raised out of `rssm.minimize` and lost the run)
            raise DataError(f"samples {lo}..{hi - 1} of the {self.kind} data could not be "
                            f"read: {type(exc).__name__}: {exc}") from exc
        if self._h5 is not None:
            self._check_h5()
        if seen is not None and self.kind == "zarr":
            self._check_zarr(arr, lo, hi, seen)
        if arr.dtype != np.float64:
            check_float64_range(arr, self.name)     # (longdouble below it read as 0)
            arr = arr.astype(np.float64)
        return arr.T if self.rows_are_samples else arr

    def read_watched(self, lo: int, hi: int, seen: dict) -> np.ndarray:
        """`read`, for one run's oracle: a Zarr chunk that read as data earlier in the run
        (recorded in ``seen``) and reads as the fill value only now raises `DataError`.

        Parameters
        ----------
        lo, hi : int
            The range [lo, hi) of samples, 0 <= lo <= hi <= m.
        seen : dict
            The run's record of the chunks read so far, kept by the oracle.

        Returns
        -------
        numpy.ndarray, shape (n, hi - lo)
            The samples as columns, float64.

        Raises
        ------
        DataError
            As `read`.
        """
        return self.read(lo, hi, seen)

    def _check_zarr(self, arr: np.ndarray, lo: int, hi: int, seen: dict) -> None:
        """Zarr reads a storage chunk that is not there as its fill value, without an
        error: a store deleted or emptied during a run gave a run on zeros that ended
        `converged`. Within one run (``seen``, the run's record), a chunk of samples that
        held other values at its first read and reads as nothing but the fill value raises
        `DataError`. (A chunk missing from the start cannot be told from one Zarr did not
        write because it held only the fill value, its default for such chunks; data
        changed between two runs is the next run's data.)"""
        fill = getattr(self.source, "fill_value", None)
        if fill is None or not arr.size:
            return
        # (a NaN fill value equals nothing, itself included: a deleted store with
        # fill_value=NaN read as NaNs and ended `non_finite`, a user's audit)
        nan_fill = isinstance(fill, (float, np.floating)) and math.isnan(fill)
        only_fill = bool(np.isnan(arr).all() if nan_fill else np.all(arr == fill))
        if (lo, hi) not in seen:
            seen[(lo, hi)] = only_fill
        elif only_fill and not seen[(lo, hi)]:
            raise DataError(f"samples {lo}..{hi - 1} of the Zarr array now read as its fill "
                            f"value {fill} only, where they held data earlier in this run: "
                            "its storage chunks were deleted or emptied during the run")

    def _compute(self, blk, lo: int, hi: int):
        """A Dask chunk: on the running cluster within the timeout (`DataError` after it),
        else with Dask's local scheduler."""
        try:
            from distributed import default_client

            client = default_client()
        except (ImportError, ValueError):
            client = None
        if client is None or getattr(client, "status", None) != "running":
            return blk.compute()
        limit = min(self.timeout, STALLED_TIMEOUT) if self.stalled else self.timeout
        fut = client.compute(blk)
        try:
            return fut.result(timeout=limit)
        except TimeoutError:
            self.stalled = True
            raise DataError(f"the Dask cluster did not return samples {lo}..{hi - 1} within "
                            f"{limit:g} s (a worker stopped or hung?)") from None

    def _check_file(self) -> None:
        path, need, mp = self._extent
        try:
            # the size of the file the mapping holds open (`mmap.size()` reads it through
            # the mapping's own descriptor), not of whatever the path names now: a file
            # replaced (written anew and renamed over the path, the safe way to update
            # data) or unlinked during a run stays mapped and whole
            size = mp.size()
        except (OSError, ValueError):
            try:
                size = os.stat(path).st_size
            except OSError as exc:
                raise DataError(f"the data file {path} can no longer be read: {exc}") \
                    from None
        if size < need:
            # (not "during the run": it is checked before a run's start too, a file cut
            # after the problem was built and before any run read so, a user's audit)
            raise DataError(
                f"the data file {path} shrank to {size} bytes since it was opened (its "
                f"samples need {need}); reading it would crash the process (SIGBUS), so "
                "the read stops here")

    def _check_h5(self) -> None:
        """HDF5 reads the part of a dataset past the end of a truncated file as zeros,
        without an error (a user's audit: a file cut during a run gave a run on zeros that
        ended `converged`, exit status 0). After each read, the size of the file h5py
        holds open is compared with the end of the dataset's stored bytes (the file may
        shrink for other reasons: HDF5 gives back the space of a deleted dataset)."""
        path, fid, need = self._h5
        size = _h5_size(fid)
        if size is not None and size < need:
            raise DataError(
                f"the HDF5 file {path} shrank to {size} bytes since it was opened (the "
                f"dataset's bytes reach {need}); HDF5 reads what is gone as zeros, so the "
                "read stops here")

    def _dask_rows(self):
        """The Dask source as m x n (a lazy transpose when needed)."""
        return self.source if self.rows_are_samples else self.source.T

    def check_finite(self) -> None:
        """Raise ValueError if any sample has a NaN or infinite entry, or if the largest
        entry lies outside `rssm._validation.DATA_SCALE` (one pass)."""
        bad = 0
        first = None
        if self.kind == "dask":
            import dask
            import dask.array as da

            rows = self._dask_rows()
            if 0 in rows.chunks[0]:       # (a reduction over an empty chunk fails)
                rows = rows.rechunk({0: tuple(c for c in rows.chunks[0] if c) or (0,)})
            badrow = ~da.isfinite(rows).all(axis=1)
            bad, first, hi, lo_ = dask.compute(badrow.sum(), da.argmax(badrow), rows.max(),
                                               rows.min())
            self._raise_nonfinite(int(bad), int(first))
            if rows.size:
                check_data_scale(max(float(hi), -float(lo_)), self.name)
            return
        top = 0.0
        for lo, _, blk in self.chunks():
            ok = np.isfinite(blk).all(axis=0)
            nb = int(ok.size - np.count_nonzero(ok))
            if nb and first is None:
                first = lo + int(np.argmin(ok))
            bad += nb
            if not nb:
                top = max(top, max_abs(blk))
        self._raise_nonfinite(bad, first)
        # the scale the problems refuse in memory ([1e-150, 1e150]), read in the same pass
        check_data_scale(top, self.name)

    def _raise_nonfinite(self, bad: int, first: int | None) -> None:
        if bad:
            raise ValueError(
                f"{self.name} has {bad} sample(s) with NaN or infinite entries (the first is "
                f"sample {first}, counting from 0); all entries must be finite")

    def gram(self) -> np.ndarray:
        """Yt Yt^T (n x n): the chunks' grams added in chunk order (for a Dask array the
        chunks' grams are computed on the cluster, and added here)."""
        if self.kind != "dask":
            return super().gram()
        import dask

        rows = self.rows_are_samples
        parts = []
        for lo, hi in self.bounds:
            blk = self.source[lo:hi] if rows else self.source[:, lo:hi]
            parts.append(dask.delayed(_chunk_gram, pure=True)(blk, rows))
        grams = dask.compute(*parts)
        g = np.array(grams[0], dtype=np.float64)
        for part in grams[1:]:
            np.add(g, part, out=g)
        return g


def _chunk_gram(blk: np.ndarray, rows: bool) -> np.ndarray:
    """One chunk's gram on one BLAS thread (run on a Dask worker; aligned first, as the
    products of a run: `rssm.data.store.aligned`)."""
    arr = aligned(np.asarray(blk, dtype=np.float64))
    arr = arr.T if rows else arr
    with one_blas_thread():
        return arr @ arr.T


def samples(source: Any, *, chunk_size: int | None = None, check_finite: bool = True,
            cache: str = "auto", cache_dir: str | None = None,
            timeout: float = 60.0) -> ChunkedData:
    """Mark an m x n array with **one sample per row** (the layout of files) as data for
    the data objectives (`rssm.problems.DPCP`, `rssm.problems.ODL`,
    `rssm.problems.CompositeProblem`, ...), which otherwise take samples as columns.
    Nothing is read or copied except by the finiteness check; the problems stream the
    array a chunk at a time.

    Parameters
    ----------
    source : array-like
        numpy.memmap, h5py/Zarr dataset, Dask or NumPy array of shape (m, n).
    chunk_size, check_finite, cache, cache_dir, timeout
        See `ChunkedData`.

    Returns
    -------
    ChunkedData
        ``source`` wrapped with samples as rows (``rows_are_samples=True``).

    Examples
    --------
    >>> import numpy as np, rssm
    >>> a = np.random.default_rng(0).standard_normal((500, 6))   # 500 samples in R^6
    >>> prob = rssm.problems.DPCP(rssm.data.samples(a, chunk_size=128), p=4)
    >>> prob.shape, prob.m
    ((6, 4), 500)
    """
    return ChunkedData(source, rows_are_samples=True, chunk_size=chunk_size,
                       check_finite=check_finite, cache=cache, cache_dir=cache_dir,
                       timeout=timeout, name="data")


def as_rows_matrix(value: Any, name: str):
    """An m x n argument with **one sample per row** (``a`` of `rssm.problems.SparsePCA`,
    `rssm.problems.L1Procrustes`, ...) as a problem's n x m data argument: a `ChunkedData`
    as it is, other out-of-core arrays wrapped by `samples`, an in-memory array checked and
    transposed (a view).

    Parameters
    ----------
    value : array_like or ChunkedData, shape (m, n)
        The samples as rows.
    name : str
        The argument's name in error messages.

    Returns
    -------
    ChunkedData or numpy.ndarray, shape (n, m)
        ``value`` as samples as columns: a `ChunkedData`, or a float64 transposed view.
    """
    from rssm._validation import as_float_matrix

    if isinstance(value, ChunkedData):
        return value
    if is_out_of_core(value):
        return ChunkedData(value, rows_are_samples=True, name=name)
    return as_float_matrix(value, name).T


def as_data_matrix(value: Any, name: str):
    """A problem's data argument (n x m, samples as columns): out-of-core arrays become a
    `ChunkedData` (nothing read into memory); anything else goes through
    `rssm._validation.as_float_matrix` (a float64 C-order copy in memory: samples as
    columns, whatever the layout of ``value``).

    Parameters
    ----------
    value : array_like or ChunkedData, shape (n, m)
        The samples as columns.
    name : str
        The argument's name in error messages.

    Returns
    -------
    ChunkedData or numpy.ndarray, shape (n, m)
        A `ChunkedData` for out-of-core data, else a float64 copy.
    """
    from rssm._validation import as_float_matrix

    if isinstance(value, ChunkedData):
        return value
    if is_out_of_core(value):
        return ChunkedData(value, rows_are_samples=False, name=name)
    return as_float_matrix(value, name, copy=True)
