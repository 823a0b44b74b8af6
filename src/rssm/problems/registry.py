"""How each built-in problem is built from a user's data file (``rssm solve NAME --data``).

`rssm.problems.REGISTRY` maps a name to a problem class, whose ``synthetic`` keywords are
the options of a synthetic instance. `DATA` adds, per name, what a data file needs: the
options that apply (with their defaults, or required), how to build the problem from the
file's array, whether the problem streams out-of-core data, and which layout the shape
should have. The command line reads these entries and has no per-problem branches; a new
problem that takes data adds one entry here.

The array handed to `DataEntry.build` holds **one sample per row** (m x n, the layout of
files): a `numpy.memmap`, an h5py or Zarr dataset or an in-memory array, left unloaded
(nothing is read here), or, for a problem that streams (``streams=True``), a
`rssm.data.ChunkedData` when the command line chose to stream.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rssm.data.chunked import ChunkedData
from rssm.problem import Problem
from rssm.problems.dpcp import DPCP
from rssm.problems.odl import ODL
from rssm.problems.procrustes import L1Procrustes
from rssm.problems.sparse_basis import PlantedSparseBasis
from rssm.problems.sparse_pca import SparsePCA

__all__ = ["DataOption", "DataEntry", "DATA", "data_entry"]


@dataclass(frozen=True)
class DataOption:
    """One option of a problem built from data.

    Parameters
    ----------
    name : str
        Keyword of `DataEntry.build` (the option is ``--name`` with ``_`` as ``-``).
    kind : type
        ``int`` or ``float``.
    help : str
        What it means.
    default : int or float, optional
        Its value when not given; None with ``required`` False means "the problem's own
        default" (passed as None).
    required : bool, default=False
        The option must be given with a data file.
    """

    name: str
    kind: type
    help: str
    default: Any = None
    required: bool = False


@dataclass(frozen=True)
class DataEntry:
    """How one problem is built from a data file.

    Parameters
    ----------
    build : callable
        ``build(rows, **options) -> Problem``; ``rows`` as described in the module
        docstring.
    summary : str
        One line for ``--help``: the constructor and what the options mean.
    options : tuple of DataOption, default=()
        The options that apply to the problem, each a keyword of ``build``.
    streams : bool, default=False
        The problem streams out-of-core data a chunk of samples at a time (the command
        line then offers ``--out-of-core`` and ``--chunk-size``).
    many_samples : bool, default=True
        The problem needs more samples than features (m >= n); a file with fewer rows
        than columns most likely stores its samples as columns, and is refused unless the
        user says which layout it has.
    arguments : mapping of str to str, optional
        Library argument names that stand for one of the options under another name
        (``SparsePCA`` checks ``r`` as its ``p``): errors naming the argument name the
        option.
    """

    build: Callable[..., Problem]
    summary: str
    options: tuple[DataOption, ...] = ()
    streams: bool = False
    many_samples: bool = True
    arguments: Mapping[str, str] = field(default_factory=dict)


def _columns(rows: Any) -> Any:
    """The API's layout (n x m, samples as columns) of ``rows``: a `ChunkedData` as is, an
    array as a transposed view (a memory map is not read here; the problem copies it)."""
    if isinstance(rows, ChunkedData):
        return rows
    return np.asarray(rows, dtype=np.float64).T


def _dpcp(rows: Any, d: int) -> DPCP:
    if isinstance(d, int) and d < 1:
        from rssm._validation import InvalidValue

        # DPCP.from_data refuses d = 0 too (p = n, a constant f); named here as the CLI's
        raise InvalidValue("d", f"d must be >= 1 (the dimension of the inliers' subspace; "
                                f"d = 0 makes f constant), got {d}")
    return DPCP.from_data(_columns(rows), d=d)


def _odl(rows: Any, p: int | None = None) -> ODL:
    return ODL.from_data(_columns(rows), p=p)


def _sparse_pca(rows: Any, r: int, mu: float) -> SparsePCA:
    return SparsePCA.from_data(rows, r=r, mu=mu)


def _sparse_basis(rows: Any, p: int) -> PlantedSparseBasis:
    return PlantedSparseBasis(rows, p)


def _l1_procrustes(rows: Any, p: int) -> L1Procrustes:
    from rssm._validation import InvalidValue

    n_cols = int(rows.shape[1])
    if n_cols < 2:
        raise InvalidValue("path", f"l1_procrustes needs at least 2 columns (n >= 1 design "
                                   f"columns, then p >= 1 target columns), the file has "
                                   f"{n_cols}")
    if not 1 <= p <= n_cols // 2:
        # X is n x p on St(n, p): the p target columns need at least p design columns
        raise InvalidValue("p", f"p must satisfy 1 <= p <= {n_cols // 2} (the file's "
                                f"{n_cols} columns: n design columns, then p <= n target "
                                f"columns), got {p}")
    return L1Procrustes(rows[:, : n_cols - p], rows[:, n_cols - p:])


#: name (as in `rssm.problems.REGISTRY`) -> how to build it from a data file.
DATA: dict[str, DataEntry] = {
    "dpcp": DataEntry(
        _dpcp, "DPCP.from_data(Yt, d=--d): inliers near a d-dimensional subspace, p = n - d",
        (DataOption("d", int, "dimension d of the inliers' subspace (p = n - d)",
                    required=True),),
        streams=True),
    "odl": DataEntry(
        _odl, "ODL.from_data(Y, p=--p)",
        (DataOption("p", int, "number of dictionary atoms p <= n (default: n)"),),
        streams=True),
    "sparse_pca": DataEntry(
        _sparse_pca, "SparsePCA.from_data(A, r=--r, mu=--mu): columns centred and scaled",
        (DataOption("r", int, "number of components r", default=5),
         DataOption("mu", float, "l1 weight mu", default=0.2)),
        many_samples=False, arguments={"p": "r"}, streams=True),
    "sparse_basis": DataEntry(
        _sparse_basis, "PlantedSparseBasis(Q, p=--p): rows of Q span the subspace",
        (DataOption("p", int, "number of sparse directions p", default=5),), streams=True),
    "l1_procrustes": DataEntry(
        _l1_procrustes, "L1Procrustes(A, B): each row holds a_j (n numbers) then its target "
                        "b_j (the last --p numbers)",
        (DataOption("p", int, "number of target columns p (the last p columns of the file)",
                    required=True),)),
}


def data_entry(name: str) -> DataEntry | None:
    """The `DataEntry` of problem ``name``, or None when it does not take data files.

    Parameters
    ----------
    name : str
        The problem's name, as in `rssm.problems.REGISTRY` (``"dpcp"``, ``"odl"``, ...).

    Returns
    -------
    DataEntry or None
        ``DATA[name]``, or None for a name without an entry.
    """
    return DATA.get(name)
