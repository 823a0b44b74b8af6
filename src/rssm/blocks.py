"""Column partitions and block-pair selection rules for RSSM.

A partition C = {C_1, ..., C_l} of the p columns (Section 3.2, before Algorithm
``alg-RSSM``). At every iteration RSSM picks an unordered pair {i, j} of blocks and updates
the columns C_ij = C_i U C_j. The paper draws the pair uniformly at random; the remark after
Algorithm ``alg-RSSM`` mentions cyclic and other rules, which are provided here as peers.

Column sets are stored as tuples of slices (contiguous runs), so the solver and the
oracles address them without fancy-index copies when blocks are contiguous (the default).
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from rssm._validation import InvalidType, InvalidValue, as_int, check_generator, describe

__all__ = [
    "epoch_iterations",
    "pair_count",
    "ColumnSet",
    "Partition",
    "PairSelector",
    "UniformPairs",
    "CyclicPairs",
    "ShuffledPairs",
    "make_selector",
    "pair_table",
    "SELECTION_RULES",
]


def epoch_iterations(n_blocks: int) -> float:
    """Iterations per epoch: l/2 for RSSM with l blocks (each iteration moves 2 of the l
    blocks, so p columns move per epoch on average), 1 for a method without blocks.

    Parameters
    ----------
    n_blocks : int
        Number of blocks l, at least 1 (1 for a method without blocks).

    Returns
    -------
    float
        l / 2 when l > 1, else 1.0.
    """
    n_blocks = _blocks_arg(n_blocks)
    return n_blocks / 2.0 if n_blocks > 1 else 1.0


def _blocks_arg(n_blocks) -> int:
    """``n_blocks`` as an int >= 1 (a step rule reads these every iteration: an int passes
    at once; 0, 2.5, True and "3" were taken as 1 block or raised Python's comparison
    error, a user's audit)."""
    if type(n_blocks) is int and n_blocks >= 1:
        return n_blocks
    return as_int(n_blocks, "n_blocks", minimum=1)


def _few(values: list[int], k: int = 5, total: int | None = None) -> str:
    total = len(values) if total is None else total
    return ", ".join(map(str, values[:k])) + (f" and {total - k} more" if total > k else "")


def pair_count(n_blocks: int) -> int:
    """binom(l, 2) block pairs; 1 for a method without blocks (l = 1).

    Parameters
    ----------
    n_blocks : int
        Number of blocks l, at least 1.

    Returns
    -------
    int
        binom(l, 2) when l > 1, else 1.
    """
    n_blocks = _blocks_arg(n_blocks)
    return n_blocks * (n_blocks - 1) // 2 if n_blocks > 1 else 1


def _runs(idx: np.ndarray) -> tuple[slice, ...]:
    """Split a sorted index array into maximal contiguous runs, as slices."""
    if idx.size == 0:
        return ()
    breaks = np.flatnonzero(np.diff(idx) != 1) + 1
    starts = np.concatenate(([0], breaks))
    ends = np.concatenate((breaks, [idx.size]))
    return tuple(slice(int(idx[s]), int(idx[e - 1]) + 1) for s, e in zip(starts, ends, strict=True))


def _mask_runs(mask: np.ndarray) -> tuple[slice, ...]:
    """The maximal runs of True in a 1-D boolean ``mask``, as slices (`_runs` of its
    indices). A scan in Python for the few columns of X (p <= `_SCAN_UPTO`), where NumPy's
    diff and concatenations cost 7 times as much: the data problems' caches ask this once
    per RSSM iteration."""
    if mask.size > _SCAN_UPTO:
        return _runs(np.flatnonzero(mask))
    runs = []
    start = -1
    for i, on in enumerate(mask.tolist()):
        if on:
            if start < 0:
                start = i
        elif start >= 0:
            runs.append(slice(start, i))
            start = -1
    if start >= 0:
        runs.append(slice(start, mask.size))
    return tuple(runs)


_SCAN_UPTO = 128


@dataclass(frozen=True)
class ColumnSet:
    """A set of columns C, as sorted indices and as contiguous runs (slices).

    Parameters
    ----------
    index : ndarray of int
        The sorted column indices.
    runs : tuple of slice
        The same columns as maximal contiguous runs.
    blocks : tuple of int
        The block numbers the set is the union of.
    """

    index: np.ndarray
    runs: tuple[slice, ...]
    blocks: tuple[int, ...]

    @property
    def size(self) -> int:
        """Number of columns |C|."""
        return int(self.index.size)

    @property
    def selector(self) -> slice | np.ndarray:
        """A slice when C is one contiguous run (views, no copies), else the index array."""
        return self.runs[0] if len(self.runs) == 1 else self.index


class Partition:
    """A partition of the columns [p] into l >= 2 non-empty blocks.

    Parameters
    ----------
    blocks : sequence of sequences of int, or 2-D int array
        The blocks C_1, ..., C_l (the rows of a 2-D array are blocks of equal size);
        together they must contain each of 0..p-1 exactly once.
    p : int, optional
        Number of columns; inferred when omitted.
    """

    def __init__(self, blocks: Sequence[Sequence[int]] | np.ndarray, p: int | None = None):
        if isinstance(blocks, np.ndarray) and blocks.ndim == 2:
            blocks = list(blocks)  # a 2-D integer array: one block per row
        if isinstance(blocks, (str, bytes)) or not isinstance(blocks, Sequence):
            raise TypeError("partition must be a sequence of column-index sequences")
        arrs = []
        for b, block in enumerate(blocks):
            try:
                a = np.asarray(block)
            except Exception:
                raise TypeError(f"partition block {b} is not a sequence of integers") from None
            if a.ndim != 1 or (a.size and a.dtype.kind not in "iu"):
                raise TypeError(
                    f"partition block {b} must be a 1-D sequence of integers, got {describe(block)}"
                )
            if a.size == 0:
                raise ValueError(
                    f"partition block {b} is empty; every block needs at least one column"
                )
            arrs.append(np.sort(a.astype(np.intp)))
        if len(arrs) < 2:
            raise ValueError(f"a partition needs at least 2 blocks, got {len(arrs)}")
        allc = np.concatenate(arrs)
        p = int(allc.size) if p is None else as_int(p, "p", minimum=1)
        if allc.size != p or not np.array_equal(np.sort(allc), np.arange(p)):
            # name what is wrong (a user's audit: [[0, 1], [2, 5]] of p = 4 read "got 4
            # indices with 4 distinct", which looks right)
            outside = sorted({int(c) for c in allc if not 0 <= c < p})
            vals, counts = np.unique(allc, return_counts=True)
            twice = [int(v) for v in vals[counts > 1]]
            # the first missing columns, in time and memory of the indices given (not of p:
            # a mistyped p of 1e8 ran out of memory here; a review)
            present = {int(c) for c in vals if 0 <= c < p}
            n_missing = p - len(present)
            missing, i = [], 0
            while len(missing) < 5 and i < p and len(missing) < n_missing:
                if i not in present:
                    missing.append(i)
                i += 1
            what = "; ".join(part for part in (
                f"outside 0..{p - 1}: {_few(outside)}" if outside else "",
                f"in more than one block: {_few(twice)}" if twice else "",
                f"in no block: {_few(missing, total=n_missing)}" if n_missing else "")
                if part)
            raise ValueError(
                f"partition blocks must contain every column 0..{p - 1} exactly once; "
                f"columns {what}"
            )
        self.p = p
        self.blocks: tuple[np.ndarray, ...] = tuple(arrs)
        self.sizes = np.array([a.size for a in arrs], dtype=np.intp)
        self._cache: dict[tuple[int, ...], ColumnSet] = {}

    @classmethod
    def uniform(cls, p: int, n_blocks: int) -> Partition:
        """Contiguous blocks whose sizes differ by at most one (Prop. ``prop-periteration``).

        Parameters
        ----------
        p : int
            Number of columns, at least 2.
        n_blocks : int
            Number of blocks l, 2 <= l <= p; the first p mod l blocks get the extra column.

        Returns
        -------
        Partition
            Blocks 0..l-1 in column order.
        """
        p = as_int(p, "p", minimum=2)
        n_blocks = as_int(n_blocks, "n_blocks")
        if not 2 <= n_blocks <= p:
            raise ValueError(f"n_blocks must satisfy 2 <= n_blocks <= p = {p}, got {n_blocks}")
        return cls(np.array_split(np.arange(p), n_blocks), p)

    @property
    def n_blocks(self) -> int:
        """Number of blocks l."""
        return len(self.blocks)

    @property
    def n_pairs(self) -> int:
        """Number of unordered pairs binom(l, 2)."""
        ell = self.n_blocks
        return ell * (ell - 1) // 2

    def columns(self, *blocks: int) -> ColumnSet:
        """The union of the given blocks as a `ColumnSet` (cached for small l).

        Parameters
        ----------
        *blocks : int
            Block numbers (0-based); their order does not matter.

        Returns
        -------
        ColumnSet
            The union of the blocks' columns.
        """
        key = tuple(sorted(blocks))
        cs = self._cache.get(key)
        if cs is None:
            idx = np.sort(np.concatenate([self.blocks[b] for b in key]))
            cs = ColumnSet(idx, _runs(idx), key)
            if len(self._cache) < 4096:
                self._cache[key] = cs
        return cs

    def is_contiguous(self) -> bool:
        """True when every block is one contiguous run of columns."""
        return all(len(_runs(b)) == 1 for b in self.blocks)

    def __repr__(self) -> str:
        return f"Partition(p={self.p}, n_blocks={self.n_blocks}, sizes={self.sizes.tolist()})"


def pair_table(n_blocks: int) -> tuple[np.ndarray, np.ndarray]:
    """The binom(l, 2) unordered block pairs, numbered lexicographically: pair k is
    (i[k], j[k]) with i < j. Every selection rule (and `rssm.torch`) numbers pairs so.

    Parameters
    ----------
    n_blocks : int
        Number of blocks l, at least 1.

    Returns
    -------
    i, j : numpy.ndarray of int, each of shape (binom(l, 2),)
        The first and second block of each pair (``numpy.triu_indices(l, 1)``).
    """
    return np.triu_indices(_blocks_arg(n_blocks), 1)


class PairSelector(abc.ABC):
    """Base class of the rules that choose the block pair {i, j} at each iteration.

    Subclasses implement `next_pair`; `bind` is called once with the number of blocks and the
    run's random generator before the first iteration.
    """

    name = "base"

    def bind(self, n_blocks: int, rng: np.random.Generator) -> None:
        """Prepare the rule for a run: the number of blocks, the run's generator, and a
        fresh position in the pair sequence (`pair_table`).

        Parameters
        ----------
        n_blocks : int
            Number of blocks l (at least 2).
        rng : numpy.random.Generator
            The run's random generator (the random rules draw from it).
        """
        self.n_blocks = as_int(n_blocks, "n_blocks", minimum=2)
        self.rng = check_generator(rng)
        self._i, self._j = pair_table(self.n_blocks)
        self._buf = np.empty(0, dtype=np.intp)
        self._pos = 0

    @abc.abstractmethod
    def next_pair(self) -> tuple[int, int]:
        """The next pair (i, j), i < j."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class UniformPairs(PairSelector):
    """{i, j} ~ Uniform over all binom(l, 2) unordered pairs (Algorithm ``alg-RSSM``, line 2).

    Pair indices are drawn from the generator in batches of 1024, which is deterministic
    for a given seed.
    """

    name = "uniform"

    def next_pair(self) -> tuple[int, int]:
        if self._pos >= self._buf.size:
            self._buf = self.rng.integers(0, self._i.size, size=1024)
            self._pos = 0
        k = self._buf[self._pos]
        self._pos += 1
        return int(self._i[k]), int(self._j[k])


class CyclicPairs(PairSelector):
    """All pairs in lexicographic order, repeated."""

    name = "cyclic"

    def next_pair(self) -> tuple[int, int]:
        k = self._pos % self._i.size
        self._pos += 1
        return int(self._i[k]), int(self._j[k])


class ShuffledPairs(PairSelector):
    """All pairs in a fresh random order each epoch of binom(l, 2) iterations."""

    name = "shuffled"

    def next_pair(self) -> tuple[int, int]:
        if self._pos >= self._buf.size:
            self._buf = self.rng.permutation(self._i.size)
            self._pos = 0
        k = self._buf[self._pos]
        self._pos += 1
        return int(self._i[k]), int(self._j[k])


#: ``selection=`` name -> pair rule class ("uniform" is the paper's).
SELECTION_RULES: dict[str, type[PairSelector]] = {
    "uniform": UniformPairs,
    "cyclic": CyclicPairs,
    "shuffled": ShuffledPairs,
}


def make_selector(selection: Any) -> PairSelector:
    """Return a fresh `PairSelector` from a name (``"uniform"``, ``"cyclic"``,
    ``"shuffled"``) or pass a `PairSelector` instance through.

    Parameters
    ----------
    selection : str or PairSelector
        A name of `SELECTION_RULES` (any case) or a `PairSelector` instance.

    Returns
    -------
    PairSelector
        A new instance of the named rule, or ``selection`` itself.

    Raises
    ------
    ValueError
        When ``selection`` is a string that names no rule.
    TypeError
        When ``selection`` is neither a string nor a `PairSelector` instance.
    """
    if isinstance(selection, PairSelector):
        return selection
    # (any case, as ``method=`` and ``stepsize=`` names: "Cyclic" was refused)
    if isinstance(selection, str) and selection.lower() in SELECTION_RULES:
        return SELECTION_RULES[selection.lower()]()
    # an unknown name is a ValueError; not a name nor a selector at all (None, 5, the class
    # UniformPairs itself) a TypeError, as guarantees.md section 3 has it (a user's audit)
    if isinstance(selection, str):
        raise InvalidValue("selection", f"selection must be one of {sorted(SELECTION_RULES)} "
                           f"or a PairSelector, got {describe(selection)}")
    got = (f"the class {selection.__name__} itself (pass an instance)"
           if isinstance(selection, type) else describe(selection))
    raise InvalidType("selection", f"selection must be one of {sorted(SELECTION_RULES)} or a "
                      f"PairSelector, got {got}")
