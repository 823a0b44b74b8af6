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
import re
import tokenize
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["DataFileError", "load", "FORMATS"]

#: File suffixes `load` understands.
FORMATS = (".npy", ".npz", ".csv", ".txt", ".h5", ".hdf5", ".zarr", ".zip")


class DataFileError(ValueError):
    """A data file that cannot be used; ``argument`` names the parameter at fault.

    Parameters
    ----------
    argument : str
        The parameter of `load` at fault (``"path"``, ``"key"``, ``"dataset"``,
        ``"header"``), kept as the attribute ``argument``.
    message : str
        What is wrong (the exception's text).
    cli_message : str, optional
        The same in the command line's words (``--header yes`` for ``header='yes'``),
        kept as the attribute ``cli_message``; default ``message``.
    """

    def __init__(self, argument: str, message: str, cli_message: str | None = None):
        super().__init__(message)
        self.argument = argument
        #: the same in the command line's words (``--header yes`` for ``header='yes'``)
        self.cli_message = message if cli_message is None else cli_message


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


#: Header choices of `read_csv` and `load`.
HEADER_CHOICES = ("auto", "yes", "no")


def _cells(line: str, delimiter: str | None) -> list[str]:
    """The cells of one text line as `numpy.loadtxt` splits them (quotes removed)."""
    if delimiter is None:
        return [c.strip('"') for c in line.split()]
    return [c.strip() for c in next(csv.reader([line], delimiter=delimiter, quotechar='"'))]


def _lines(path: Path):
    """(physical line index, text) of the lines that hold data or a header: not blank and
    not a ``#`` comment (`numpy.savetxt` writes its header that way)."""
    with path.open(encoding="utf-8-sig", newline="") as fh:
        for i, line in enumerate(fh):
            text = line.strip()
            if text and not text.startswith("#"):
                yield i, line.rstrip("\r\n")


def _delimiter(line: str) -> str | None:
    """``;`` or ``,`` when the line has one (``;`` first: decimal commas), else any run of
    white space (tab-separated and fixed-width text such as ``numpy.savetxt(fmt='%10.4f')``)."""
    if ";" in line:
        return ";"
    if "," in line:
        cells = line.split()
        # "0,5\t1,25": white space between numbers written with a comma inside is the
        # delimiter (a comma-separated "1, 2" has cells "1," that this does not match)
        if len(cells) > 1 and all(_COMMA_NUMBER.match(c) for c in cells):
            return None
        return ","
    return None


#: A number written with a comma inside (a decimal comma, or a thousands separator).
_COMMA_NUMBER = re.compile(r"^[+-]?\d+,\d+$")
#: A float written in hexadecimal (``float.hex``: 0x1.4faff69cef371p-7).
_HEX_FLOAT = re.compile(r"^[+-]?0x[0-9a-f]*\.?[0-9a-f]*p[+-]?\d+$", re.IGNORECASE)


def _looks_like_column_numbers(cells: list[str]) -> bool:
    """0, 1, ..., k-1 or 1, ..., k: a header of column numbers, or a sample that happens to
    be one; `read_csv` does not guess between them."""
    try:
        ints = [int(c) for c in cells]
    except ValueError:
        return False
    return len(ints) >= 2 and ints in (list(range(len(ints))), list(range(1, len(ints) + 1)))


def _header_line(first: list[str], second: list[str] | None, header: str, path: Path) -> bool:
    """Whether the first line is a header, by the rule of `read_csv`."""
    if header == "yes":
        return True
    if header == "no":
        return False
    numeric = [_is_number(c) or bool(_COMMA_NUMBER.match(c.strip())) for c in first]
    if not any(numeric):      # (numbers with a comma inside are data, refused as such)
        if any(_HEX_FLOAT.match(c.strip()) for c in first):
            # (taken as a header, the file's first sample was then named as a column in
            # the error on line 2; a user's audit)
            raise DataFileError("path", f"{path} line 1 holds hexadecimal floats "
                                f"({first[0]!r}): rssm reads decimal numbers only; convert "
                                "them first (float.fromhex)")
        return True
    # (refused above integer lines too: pandas' `to_csv(index=False)` writes 0..n-1 over
    # pixel counts, and taking it as a sample added one silently; a user's audit)
    if _looks_like_column_numbers(first) and second is not None:
        said = (f"{path} starts with the row {','.join(first)}, which may be a header of "
                "column numbers or a sample; say which with ")
        raise DataFileError("header", said + "header='yes' or header='no'",
                            said + "--header yes or --header no")
    return False


def _decimal_comma(cell: str, delimiter: str | None) -> bool:
    """``cell`` is a number written with a comma inside (not the delimiter)."""
    return delimiter != "," and bool(_COMMA_NUMBER.match(cell.strip()))


def _first_bad_cell(path: Path, delimiter: str | None, skip: int, width: int,
                    names: list[str] | None, drop_last: bool = False) -> str:
    """Where a text file that `numpy.loadtxt` refused goes wrong, as one message (read
    again line by line: only on this error path); ``drop_last``: every line ends with the
    delimiter, and its empty last cell is not looked at."""
    for i, line in _lines(path):
        if i < skip:
            continue
        cells = _cells(line, delimiter)
        if len(cells) != width:
            return (f"{path} line {i + 1} has {len(cells)} columns, the first data line has "
                    f"{width}")
        if drop_last:
            cells = cells[:-1]
        for j, cell in enumerate(cells):
            if not _is_number(cell):
                name = f" ({names[j]!r})" if names is not None and j < len(names) else ""
                what = ("a missing value: fill or drop it first" if cell.lower() in (
                    "", "na", "n/a", "null", "none", "?") else "every column must hold numbers")
                if _HEX_FLOAT.match(cell.strip()):
                    what = ("a hexadecimal float: rssm reads decimal numbers only; convert "
                            "them first (float.fromhex)")
                comma = _decimal_comma(cell, delimiter)
                hint = "; if line 1 is a header, use header='yes'" if (
                    names is None and i == 0 and not comma and cell) else ""
                if comma:
                    hint += ("; the file seems to write numbers with a comma inside (0,5 or "
                             "1,000): rssm reads neither decimal commas nor thousands "
                             "separators, convert them first (0.5, 1000)")
                return (f"{path} column {j + 1}{name} is not numeric (line {i + 1}: {cell!r})"
                        f"; {what}{hint}")
    return f"{path} could not be parsed as numbers"


def read_csv(path: str | os.PathLike, header: str = "auto") -> np.ndarray:
    """A numeric text file (``.csv`` or ``.txt``) as a float64 array, one row per line.

    Separators: ``;`` when the first line has one, else ``,`` when it has one, else white
    space (tabs, and fixed-width columns such as ``numpy.savetxt(fmt='%10.4f')`` writes).
    Cells may be quoted (``"1.5"``); a UTF-8 byte-order mark, blank lines and ``#`` comment
    lines are skipped. The numbers are parsed by `numpy.loadtxt` (NumPy's C parser: no
    Python loop over cells, no extra dependency).

    Parameters
    ----------
    path : str or path-like
    header : {"auto", "yes", "no"}
        Whether the first line is a header of column names. ``"auto"``: it is when none of
        its cells is a number. A first line of the integers 0, ..., n-1 or 1, ..., n (above
        at least one more line) could be either, and is refused: say ``"yes"`` or
        ``"no"``.

    Raises
    ------
    DataFileError
        An empty file, a non-numeric cell or a line with another number of columns
        (naming the line and column), or an ambiguous first line (``argument`` is
        ``"header"``).
    """
    path = Path(path)
    if header not in HEADER_CHOICES:
        raise DataFileError("header", f"header must be one of {', '.join(HEADER_CHOICES)}, "
                                      f"got {header!r}")
    lines = _lines(path)
    first = next(lines, None)
    if first is None:
        raise DataFileError("path", f"{path} is empty")
    second = next(lines, None)
    lines.close()
    delimiter = _delimiter(first[1] if second is None or header == "no" else second[1])
    first_cells = _cells(first[1], delimiter)
    has_header = _header_line(first_cells, None if second is None else _cells(
        second[1], delimiter), header, path)
    skip = first[0] + 1 if has_header else 0
    if has_header and second is None:
        raise DataFileError("path", f"{path} has a header but no data")
    width = len(_cells((second if has_header else first)[1], delimiter))
    try:
        arr = np.loadtxt(path, dtype=np.float64, delimiter=delimiter, skiprows=skip,
                         quotechar='"', comments="#", encoding="utf-8-sig", ndmin=2)
    except ValueError:
        arr = None
        # (not where a header names that last column: an all-empty named feature, as
        # pandas writes an all-NaN one, is missing values, not a delimiter; a review)
        named = has_header and len(first_cells) == width and bool(first_cells[-1])
        trailing = (delimiter is not None and width > 1 and not named
                    and _trailing_delimiter(path, delimiter, skip, width))
        if trailing:
            # every line ends with the delimiter (some exporters write one): an empty
            # last column, not a missing value (it was refused as one, with a hint to
            # use --header yes; a user's audit)
            try:
                arr = np.loadtxt(path, dtype=np.float64, delimiter=delimiter,
                                 skiprows=skip, quotechar='"', comments="#",
                                 encoding="utf-8-sig", ndmin=2, usecols=range(width - 1))
            except ValueError:
                pass
            if has_header and first_cells and not first_cells[-1]:
                first_cells = first_cells[:-1]
    if arr is None:
        names = first_cells if has_header else None
        said = _first_bad_cell(path, delimiter, skip, width, names, drop_last=trailing)
        raise DataFileError("path", said, said.replace("header='yes'", "--header yes")) \
            from None
    if has_header and _index_column(first_cells, arr):
        # pandas' to_csv writes its row index as a first column with an empty name; read
        # as a feature it was one more dimension, 0..m-1, beside the data (a user's audit)
        raise DataFileError("path", f"{path} has an unnamed first column holding 0, 1, ..., "
                            f"{arr.shape[0] - 1}: a row index (pandas' DataFrame.to_csv "
                            "writes one unless index=False), not a feature; save the file "
                            "with index=False, or drop or name that column")
    return arr


def _trailing_delimiter(path: Path, delimiter: str, skip: int, width: int) -> bool:
    """Every data line has ``width`` cells and an empty last one: each line ends with the
    delimiter (read again line by line: only on `read_csv`'s error path)."""
    for i, line in _lines(path):
        if i < skip:
            continue
        cells = _cells(line, delimiter)
        if len(cells) != width or cells[-1]:
            return False
    return True


def _index_column(names: list[str], arr: np.ndarray) -> bool:
    """The first column is a row index: its header cell is empty, the others are not, and
    it holds 0, 1, ..., m-1 (pandas' default index)."""
    if len(names) < 2 or names[0].strip() or not all(c.strip() for c in names[1:]):
        return False
    if arr.shape[1] < 2 or arr.shape[0] < 2:      # (one row: "0, 1, ..., 0" said nothing)
        return False
    return bool(np.array_equal(arr[:, 0], np.arange(arr.shape[0], dtype=np.float64)))



def _check_npy(path) -> None:
    """A file named .npy that is not one is refused in its own words (NumPy's loader falls
    back to pickle and said "contains pickled (object) data ... allow_pickle=", which no
    option here can act on)."""
    try:
        with open(path, "rb") as fh:
            magic = fh.read(6)
    except OSError:
        return                      # the loader below says what is wrong
    if magic != b"\x93NUMPY":
        raise DataFileError("path", f"{path} is not a .npy file (it does not begin with "
                                    "NumPy's header; save arrays with numpy.save)")


def load(path: str | os.PathLike, *, key: str | None = None,
         dataset: str | None = None, header: str = "auto") -> Any:
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
    header : {"auto", "yes", "no"}
        Text files: whether the first line is a header (`read_csv` states the rule of
        ``"auto"``).

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
    if header != "auto" and suffix not in (".csv", ".txt"):
        # (as key and dataset: an option that cannot apply is refused, not ignored)
        raise DataFileError("header", f"header is for text files (.csv, .txt) only, got "
                                      f"{suffix or 'a folder'}")
    try:
        if suffix == ".npy":
            _check_npy(path)
            arr = np.load(path, mmap_mode="r", allow_pickle=False)
        elif suffix == ".npz":
            with np.load(path, allow_pickle=False) as npz:
                name = _choose(sorted(npz.files), key, "key", "array", path)
                arr = npz[name]
        elif suffix in (".csv", ".txt"):
            arr = read_csv(path, header=header)
        elif suffix in (".h5", ".hdf5"):
            arr = _open_hdf5(path, dataset)
        elif suffix in (".zarr", ".zip") or path.is_dir():
            if path.is_dir() and not any((path / f).exists() for f in (
                    "zarr.json", ".zarray", ".zgroup")):
                raise DataFileError("path", f"{path} is a folder but not a Zarr store (no "
                                            "zarr.json, .zarray or .zgroup in it)")
            arr = _open_zarr(path, dataset)
        else:
            raise DataFileError("path", f"unknown file type {suffix or '(none)'!r} of {path}; "
                                        f"use one of {', '.join(FORMATS)}")
    except DataFileError:
        raise
    except (OSError, ValueError, EOFError, SyntaxError, tokenize.TokenError) as exc:
        # A damaged .npy header fails in NumPy's header parser (tokenize, ast) with
        # TokenError or SyntaxError, a truncated file with EOFError or ValueError.
        what = exc.args[0] if isinstance(exc, tokenize.TokenError) and exc.args else exc
        what = " ".join(str(what).split()) or type(exc).__name__
        if (suffix == ".npy" and "Python objects" in what) or (
                suffix == ".npz" and "Object arrays cannot be loaded" in what):
            # (the mapping's words, "can't be memory-mapped", read as a damaged file)
            raise DataFileError("path", f"{path} holds Python objects (dtype object), not "
                                        "numbers; save a numeric array") from None
        damaged = "" if isinstance(exc, OSError) else (
            f" (a damaged or truncated {suffix or 'data'} file?)")
        raise DataFileError("path", f"cannot read {path}: {what}{damaged}") from None
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
    if path.suffix.lower() == ".zip" and hasattr(zarr.storage, "ZipStore"):
        # Zarr 3 reads a path as a folder whatever its suffix; a .zip needs its store
        # (Zarr 2 took either). The store stays open as long as the array lives.
        node = zarr.open(store=zarr.storage.ZipStore(str(path), mode="r"), mode="r")
    else:
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
    (read a chunk at a time); raise `DataFileError` naming ``where``.

    Parameters
    ----------
    arr : array-like
        The array read from the file (anything with ``shape`` and ``dtype`` that
        `ChunkedData` reads), one sample per row.
    where : str
        What the array is, in the messages (the file, or its key or dataset).

    Raises
    ------
    DataFileError
        With ``argument="path"``, when a condition fails.
    """
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
