"""Data at any size: files, out-of-core arrays and data-parallel oracles.

* `samples` marks an m x n array with one sample per row (a `numpy.memmap`, an h5py or
  Zarr dataset, a Dask or NumPy array) as data for the data objectives, which then stream
  it a chunk of samples at a time (`ChunkedData`, `ChunkedOracle`).
* `rssm.data.io` reads data files (.npy, .npz, .csv, HDF5, Zarr) for ``rssm solve --data``.
* `rssm.data.distributed` runs the oracles data-parallel on a ``dask.distributed`` cluster
  when the data is a Dask array (optional extra ``rssm[dask]``).

See docs/data.md.
"""

from rssm.data.chunked import ChunkedData, ChunkedOracle, is_out_of_core, samples

__all__ = ["ChunkedData", "ChunkedOracle", "is_out_of_core", "samples"]
