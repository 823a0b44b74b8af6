"""Read data files: one sample per row (m x n), as in scikit-learn and most files.

`load` opens ``.npy`` (memory-mapped, nothing read), ``.npz`` (``key``), ``.csv`` /
``.txt`` (parsed into memory), HDF5 ``.h5`` / ``.hdf5`` (``dataset``; an h5py dataset,
read on demand) and Zarr (a ``.zarr`` folder or a zip store; ``dataset`` for a group),
and checks what every data problem needs: a 2-D, non-empty array of real numbers without
NaN or infinite entries (checked a chunk at a time, so a file larger than memory is never
read whole). h5py and zarr are imported only for their formats (extra ``rssm[io]``).

Every problem raises `DataFileError`, a ValueError whose ``argument`` names the offending
parameter (``path``, ``key`` or ``dataset``), so the command line can name its option.
"""

from __future__ import annotations

import csv
import os
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["DataFileError", "load", "FORMATS"]

#: File suffixes `load` understands.
FORMATS = (".npy", ".npz", ".csv", ".txt", ".h5", ".hdf5", ".zarr", ".zip")


class DataFileError(ValueError):
    """A data file that cannot be used; ``argument`` names the parameter at fault."""

    def __init__(self, argument: str, message: str):
        super().__init__(message)
        self.argument = argument


def _need(module: str):
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise DataFileError(
            "path", f"reading this format needs {module}: pip install 'rssm[io]'") from None


def _choose(names: list[str], wanted: str | None, argument: str, what: str, path: Path) -> str:
    if wanted is None:
        if len(names) == 1:
            return names[0]
        if not names:
            raise DataFileError("path", f"{path} holds no {what}")
        raise DataFileError(argument, f"{path} holds several {what}s ({', '.join(names)}); "
                                      f"name one")
    if wanted not in names:
        raise DataFileError(argument, f"{path} has no {what} {wanted!r}; it holds: "
                                      f"{', '.join(names) or '(none)'}")
    return wanted


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def read_csv(path: str | os.PathLike) -> np.ndarray:
    """A numeric CSV (comma, semicolon, tab or space separated; an optional header row) as
    a float64 array, one row per line. A non-numeric entry raises `DataFileError` naming
    its column (and header name) and line."""
    path = Path(path)
    with path.open(newline="", encoding="utf-8") as fh:
        sample = fh.read(65536)
        fh.seek(0)
        try:
            dialect = csv.Sniffer().sniff(sample, delimiters=",;\t ")
        except csv.Error:
            dialect = csv.excel
        rows = [r for r in csv.reader(fh, dialect) if r and any(c.strip() for c in r)]
    if not rows:
        raise DataFileError("path", f"{path} is empty")
    header = None
    if not any(_is_number(c) for c in rows[0]) or (len(rows) > 1 and all(
            _is_number(c) for c in rows[1]) and not all(_is_number(c) for c in rows[0])):
        header, rows = rows[0], rows[1:]
    if not rows:
        raise DataFileError("path", f"{path} has a header but no data")
    width = len(rows[0])
    out = np.empty((len(rows), width))
    for i, row in enumerate(rows):
        line = i + 1 + (header is not None)
        if len(row) != width:
            raise DataFileError("path", f"{path} line {line} has {len(row)} columns, the "
                                        f"first data line has {width}")
        for j, cell in enumerate(row):
            try:
                out[i, j] = float(cell)
            except ValueError:
                name = f" ({header[j]!r})" if header is not None and j < len(header) else ""
                raise DataFileError(
                    "path", f"{path} column {j + 1}{name} is not numeric (line {line}: "
                            f"{cell.strip()!r}); every column must hold numbers") from None
    return out


def load(path: str | os.PathLike, *, key: str | None = None,
         dataset: str | None = None) -> Any:
    """Open a data file with one sample per row and check it.

    Parameters
    ----------
    path : str or path-like
        ``.npy``, ``.npz``, ``.csv``/``.txt``, ``.h5``/``.hdf5`` or Zarr (``.zarr`` folder,
        ``.zip`` store).
    key : str, optional
        Array of an ``.npz`` file (needed when it holds several).
    dataset : str, optional
        Dataset of an HDF5 file or array of a Zarr group (needed when there are several;
        a path such as ``"group/points"`` for nested ones).

    Returns
    -------
    array-like, shape (m, n)
        A `numpy.memmap` (``.npy``), an h5py dataset, a Zarr array, or an in-memory
        float64 array (``.npz``, CSV); checked to be 2-D, non-empty, real and finite.

    Raises
    ------
    DataFileError
        A missing or unreadable file, a wrong key or dataset, a 1-D or empty array, a
        non-numeric column, NaN or infinite entries.
    """
    path = Path(path)
    if not path.exists():
        raise DataFileError("path", f"no such file: {path}")
    suffix = path.suffix.lower()
    if key is not None and suffix != ".npz":
        raise DataFileError("key", f"key is for .npz files only, got a {suffix or 'folder'}")
    if dataset is not None and suffix not in (".h5", ".hdf5", ".zarr", ".zip"):
        raise DataFileError("dataset", "dataset is for HDF5 and Zarr files only, got "
                                       f"{suffix or 'a folder'}")
    try:
        if suffix == ".npy":
            arr = np.load(path, mmap_mode="r", allow_pickle=False)
        elif suffix == ".npz":
            with np.load(path, allow_pickle=False) as npz:
                name = _choose(sorted(npz.files), key, "key", "array", path)
                arr = npz[name]
        elif suffix in (".csv", ".txt"):
            arr = read_csv(path)
        elif suffix in (".h5", ".hdf5"):
            arr = _open_hdf5(path, dataset)
        elif suffix in (".zarr", ".zip") or path.is_dir():
            arr = _open_zarr(path, dataset)
        else:
            raise DataFileError("path", f"unknown file type {suffix or '(none)'!r} of {path}; "
                                        f"use one of {', '.join(FORMATS)}")
    except DataFileError:
        raise
    except (OSError, ValueError) as exc:
        raise DataFileError("path", f"cannot read {path}: {' '.join(str(exc).split())}") \
            from None
    check(arr, str(path))
    return arr


def _open_hdf5(path: Path, dataset: str | None):
    h5py = _need("h5py")
    fh = h5py.File(path, "r")
    names: list[str] = []
    fh.visititems(lambda name, obj: names.append(name) if isinstance(obj, h5py.Dataset)
                  else None)
    name = _choose(sorted(names), dataset, "dataset", "dataset", path)
    return fh[name]  # keeps the file open as long as the dataset lives


def _open_zarr(path: Path, dataset: str | None):
    zarr = _need("zarr")
    node = zarr.open(str(path), mode="r")
    if hasattr(node, "shape"):
        if dataset is not None:
            raise DataFileError("dataset", f"{path} is a single array; drop dataset")
        return node
    names = []

    def walk(group, prefix=""):
        for name, _arr in group.arrays():
            names.append(prefix + name)
        for name, sub in group.groups():
            walk(sub, prefix + name + "/")

    walk(node)
    name = _choose(sorted(names), dataset, "dataset", "array", path)
    return node[name]


def check(arr: Any, where: str) -> None:
    """Check that ``arr`` is a 2-D, non-empty array of real numbers with finite entries
    (read a chunk at a time); raise `DataFileError` naming ``where``."""
    from rssm.data.chunked import ChunkedData

    shape = tuple(getattr(arr, "shape", ()))
    dtype = np.dtype(getattr(arr, "dtype", object))
    if dtype.kind not in "iuf":
        raise DataFileError("path", f"{where} holds {dtype} values; it must hold real numbers")
    if len(shape) == 1:
        raise DataFileError("path", f"{where} holds a 1-D array (shape {shape}); it must be "
                                    "2-D, one sample per row")
    if len(shape) != 2:
        raise DataFileError("path", f"{where} holds an array with shape {shape}; it must be "
                                    "2-D, one sample per row")
    if 0 in shape:
        raise DataFileError("path", f"{where} holds an empty array (shape {shape})")
    try:
        ChunkedData(arr, rows_are_samples=True, name=where)
    except ValueError as exc:
        raise DataFileError("path", str(exc).replace("sample(s)", "row(s)").replace(
            "is sample", "is row")) from None
