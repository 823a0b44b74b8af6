"""Dask arrays over data files that the workers read themselves (optional extra
``rssm[dask]``); re-exported by `rssm.data.distributed`."""

from __future__ import annotations

import numpy as np

from rssm.data.store import default_chunk_size

__all__ = ["from_npy"]

_MISSING = "the Dask oracles need dask[array,distributed]: pip install 'rssm[dask]'"


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
        Samples per chunk (default `rssm.data.store.default_chunk_size`, the partition of
        the same data in memory: the two runs then give the same bits).

    Returns
    -------
    dask.array.Array
        The m x n float64 array, in chunks of ``chunk_size`` rows (the last one shorter).
    """
    try:
        import dask
        import dask.array as da
    except ImportError:
        raise ImportError(_MISSING) from None
    path = str(path)
    mm = np.load(path, mmap_mode="r")
    if mm.ndim != 2:
        raise ValueError(f"path must hold a 2-D array, got shape {mm.shape}")
    m, n = mm.shape
    k = int(chunk_size) if chunk_size else default_chunk_size(m, n)
    blocks = [da.from_delayed(dask.delayed(_read_rows, pure=True)(path, lo, min(lo + k, m)),
                              shape=(min(lo + k, m) - lo, n), dtype=np.float64)
              for lo in range(0, m, k)]
    return da.concatenate(blocks, axis=0)
