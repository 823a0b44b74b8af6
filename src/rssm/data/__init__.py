"""Data at any size: one storage protocol, one incremental oracle, files and clusters.

* `rssm.data.store`: the protocol (samples in a fixed partition of chunks that depends on
  the data's size alone) and the in-memory store;
* `samples` marks an m x n array with one sample per row (a `numpy.memmap`, an h5py or
  Zarr dataset, a Dask or NumPy array) as data for the data objectives, which then read it
  a chunk of samples at a time (`ChunkedData`);
* `rssm.data.engine`: the one incremental oracle of the data objectives (`DataOracle`,
  formerly `ChunkedOracle`), chunk by chunk on the run's worker threads; its chunks'
  arrays and fused task are `rssm.data.chunkset.ChunkSet` (shared with the Dask actors),
  and a state kept on disk lives in an unlinked file (`rssm.data.statefile`);
* `rssm.data.io` reads data files (.npy, .npz, .csv, HDF5, Zarr) for ``rssm solve --data``;
* `rssm.data.distributed` runs the oracle data-parallel on a ``dask.distributed`` cluster
  when the data is a Dask array (optional extra ``rssm[dask]``); `rssm.data.dask_files`
  makes Dask arrays over ``.npy`` files that the workers read themselves.

See docs/data.md.
"""

from rssm.data.chunked import ChunkedData, is_out_of_core, samples
from rssm.data.engine import DataOracle
from rssm.data.store import DataError, InMemory, LayoutWarning, SampleStore, default_chunk_size

#: Former name of `DataOracle` (it streamed out-of-core data; it now serves every store).
ChunkedOracle = DataOracle

__all__ = ["ChunkedData", "ChunkedOracle", "DataOracle", "DataError", "InMemory",
           "LayoutWarning", "SampleStore", "default_chunk_size", "is_out_of_core", "samples"]
