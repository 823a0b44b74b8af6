"""Method options and the defaults of `rssm.minimize`, in one place.

`METHODS` maps a method name to its solver class and options class; a new method is a
solver file plus one entry here.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from rssm._validation import InvalidValue, as_int, check_bool, describe
from rssm.blocks import PairSelector, Partition, epoch_iterations, make_selector
from rssm.solvers.rsm import RSMSolver
from rssm.solvers.rssm import RSSMSolver

__all__ = ["RSSMOptions", "RSMOptions", "METHODS", "DEFAULT_METHOD", "DEFAULT_N_BLOCKS",
           "DEFAULT_MAX_EPOCHS", "DEFAULT_MAX_ITER", "DEFAULT_TOL", "as_options"]

#: The method of ``rssm.minimize(problem)`` (docs/stepsizes.md, "the default method",
#: gives the measurements behind it).
DEFAULT_METHOD = "rsm"
#: RSSM's number of blocks when none is given: ``min(DEFAULT_N_BLOCKS, p)``.
DEFAULT_N_BLOCKS = 5
#: Iteration budget when no limit is given, in epochs (p column updates each: 1 RSM
#: iteration, l/2 RSSM iterations).
DEFAULT_MAX_EPOCHS = 1000
#: Kept name: the default budget in epochs.
DEFAULT_MAX_ITER = DEFAULT_MAX_EPOCHS
#: Tolerance of the convergence test (`rssm.solvers.certificate`): the recent iterates
#: within ``tol * ||X||_F`` of each other.
DEFAULT_TOL = 1e-10


def _check_verify(value) -> None:
    if value is not None:
        as_int(value, "verify_steps", minimum=0)


def _check_clip(value) -> None:
    check_bool(value, "clip_steps")


@dataclass(frozen=True)
class RSMOptions:
    """Options of RSM.

    Parameters
    ----------
    verify_steps : int, optional
        Trial points of the bundle check that confirms a verdict of convergence before
        the run stops, and steps of the zigzag that follows it where it finds f lower
        (`rssm.solvers.certificate.zigzag`, `rssm.solvers.certificate.bundle_probe`; 0
        turns both off); a point that lowers f withdraws the verdict and the run goes on
        from that point. Default: on the verdicts whose subgradients cancel only in
        part (``cancel`` above `rssm.solvers.certificate.CHECK_ABOVE`), up to two trial
        points per tangent dimension, between 24 and 128
        (`rssm.solvers.certificate.bundle_steps`), and
        `rssm.solvers.certificate.ZIGZAG_STEPS` (24) zigzag steps; given, that many on
        every verdict (docs/convergence.md, "the zigzag check", "Near a vertex").
    clip_steps : bool
        Shorten a step longer than the diameter of the block it moves,
        ``||gamma P(G_C)||_F <= rssm.solvers.max_step(|C|)`` (default True; counted in
        ``Result.n_clipped``). False runs the rule's steps as they are, Algorithm
        ``alg-RSSM`` to the letter (what ``rssm reproduce`` does for the paper's
        schedules).
    """

    verify_steps: int | None = None
    clip_steps: bool = True

    def __post_init__(self) -> None:
        _check_verify(self.verify_steps)
        _check_clip(self.clip_steps)

    def epoch_iterations(self, p: int) -> float:
        """Iterations per epoch (p column updates): 1, as each RSM iteration moves all p
        columns.

        Parameters
        ----------
        p : int
            Columns of X (unused: the answer does not depend on it).

        Returns
        -------
        float
            1.0.
        """
        return 1.0


@dataclass(frozen=True)
class RSSMOptions:
    """Options of RSSM (Algorithm ``alg-RSSM``).

    Parameters
    ----------
    n_blocks : int, optional
        Number of blocks l, 2 <= l <= p; the columns are split into contiguous blocks
        whose sizes differ by at most one. Default ``min(5, p)``.
    partition : Partition or sequence of index sequences, optional
        A partition of the columns (blocks may differ in size); it sets the blocks, and
        ``n_blocks``, where given too, must be its number of blocks.
    selection : {"uniform", "cyclic", "shuffled"} or PairSelector
        Block-pair rule; "uniform" is the paper's.
    verify_steps : int, optional
        Trial points of the bundle check that confirms a verdict of convergence before
        the run stops, and steps of the zigzag after it (0 turns both off), as for RSM
        (`RSMOptions`).
    clip_steps : bool
        Shorten a step longer than the diameter of the block it moves (default True),
        as for RSM (`RSMOptions`); False: Algorithm ``alg-RSSM`` to the letter.
    """

    n_blocks: int | None = None
    partition: Partition | Sequence[Sequence[int]] | None = None
    selection: str | PairSelector = "uniform"
    verify_steps: int | None = None
    clip_steps: bool = True

    def __post_init__(self) -> None:
        make_selector(self.selection)         # a bad name fails here, at the door
        _check_verify(self.verify_steps)
        _check_clip(self.clip_steps)
        if self.n_blocks is not None:
            as_int(self.n_blocks, "n_blocks")

    def check(self, p: int | None = None) -> None:
        """These options given to RSM, checked so that a bad value is not ignored: against
        the problem's ``p`` where given (as `build` does; a user's audit found n_blocks=100
        on p = 8 accepted), else what can be checked without it. One block
        (``n_blocks=1``, or a partition of one block) is what RSM is, and passes.

        Parameters
        ----------
        p : int, optional
            The problem's number of columns; None: check what does not depend on it.

        Raises
        ------
        ValueError
            When ``n_blocks`` or ``partition`` is invalid (for p, where given).
        """
        if self.n_blocks is not None and as_int(self.n_blocks, "n_blocks") < 1:
            raise InvalidValue("n_blocks", f"n_blocks must be 1 (RSM) or satisfy 2 <= "
                               f"n_blocks <= p (RSSM), got {self.n_blocks}")
        part = self.partition
        if part is None or isinstance(part, Partition):
            if p is not None and part is not None and part.p != p:
                raise ValueError(f"partition covers {part.p} columns but the problem has "
                                 f"p={p}")
            if p is not None and part is None and self.n_blocks not in (None, 1):
                if p < 2:
                    raise InvalidValue("n_blocks", f"n_blocks={self.n_blocks} asks for "
                                       f"RSSM's blocks, and this problem has p = {p} "
                                       "column: leave n_blocks out, or set it to 1, for RSM")
                self.build(p)
            return
        if (not isinstance(part, (str, bytes)) and isinstance(part, (Sequence, np.ndarray))
                and len(part) == 1):
            # one block: every column, as RSM moves them
            block = np.asarray(part[0])
            if not (block.ndim == 1 and block.dtype.kind in "iu"
                    and np.array_equal(np.sort(block), np.arange(block.size))
                    and (p is None or block.size == p)):
                cols = "0..p-1" if p is None else f"0..{p - 1}"
                raise InvalidValue("partition", "a partition of one block (RSM) must hold "
                                   f"every column {cols} once, got {part!r}")
            return
        if p is None:
            Partition(part)
        else:
            self.build(p)

    def build(self, p: int) -> tuple[Partition, PairSelector]:
        """The partition of p columns and a fresh pair selector.

        Parameters
        ----------
        p : int
            The number of columns of the problem (St(n, p)).

        Returns
        -------
        partition : Partition
            ``partition`` as given (checked to cover p columns), else the uniform
            partition of p columns into ``n_blocks`` (default ``min(5, p)``) contiguous
            blocks.
        selector : PairSelector
            A new block-pair selector for a ``selection`` name (a `PairSelector` given as
            ``selection`` is returned as is).

        Raises
        ------
        ValueError
            When the partition does not cover p columns, p < 2, or ``n_blocks`` is not in
            [2, p].
        """
        if self.partition is not None:
            part = (self.partition if isinstance(self.partition, Partition)
                    else Partition(self.partition, p))
            if part.p != p:
                raise ValueError(f"partition covers {part.p} columns but the problem has p={p}")
            if self.n_blocks is not None and as_int(self.n_blocks, "n_blocks") != part.n_blocks:
                # (a user's audit: n_blocks=3 beside a partition of 2 blocks ran 2 blocks
                # without a word)
                raise InvalidValue("n_blocks", f"n_blocks={self.n_blocks} and a partition of "
                                   f"{part.n_blocks} blocks disagree: the partition sets the "
                                   "blocks; leave n_blocks out")
        else:
            if p < 2:
                raise ValueError(
                    f"RSSM needs p >= 2 columns to form 2 blocks, got p={p}; use method='rsm'")
            nb = (min(DEFAULT_N_BLOCKS, p) if self.n_blocks is None
                  else as_int(self.n_blocks, "n_blocks"))
            if not 2 <= nb <= p:
                raise InvalidValue("n_blocks", f"n_blocks must satisfy 2 <= n_blocks <= p = "
                                   f"{p}, got {nb}")
            part = Partition.uniform(p, nb)
        return part, make_selector(self.selection)


#: name -> (solver class, options class).
METHODS: dict[str, tuple[type, type]] = {
    "rssm": (RSSMSolver, RSSMOptions),
    "rsm": (RSMSolver, RSMOptions),
}


def as_options(method: str, options: Any, p: int | None = None) -> Any:
    """``options=`` of `rssm.minimize` for ``method``: None, a dict, or an options
    object (`RSSMOptions`).

    Every key must be an option of some method (a typo raises and lists them); options of
    another method do not apply and are left out (RSM has no blocks), so one options dict
    serves a loop over methods; their values are still checked (against the problem's
    number of columns ``p`` where given), so a bad one is not ignored.

    Parameters
    ----------
    method : str
        A key of `METHODS` (``"rssm"`` or ``"rsm"``).
    options : None, dict, RSSMOptions or RSMOptions
        The options: a dict of option names, or an options object (one of another
        method's class is read as the dict of its fields).
    p : int, optional
        The problem's number of columns, against which the options of another method
        are checked.

    Returns
    -------
    RSSMOptions or RSMOptions
        The options object of ``method`` (``options`` itself when it is one; the
        defaults for None).

    Raises
    ------
    TypeError
        When a key is no option of any method, or ``options`` is of another type.
    ValueError
        When a value is invalid.
    """
    cls = METHODS[method][1]
    if options is None:
        return cls()
    if isinstance(options, cls):
        return options
    known = {f.name: c for _, c in METHODS.values() for f in fields(c)}
    if isinstance(options, tuple(c for _, c in METHODS.values())):
        options = {f.name: getattr(options, f.name) for f in fields(options)}
    if isinstance(options, Mapping):
        bad = [k for k in options if k not in known]
        if bad:
            raise TypeError(
                f"unknown option {', '.join(map(repr, bad))}; the options are "
                + ", ".join(f"{k} ({known[k].__name__})" for k in sorted(known)))
        mine = {f.name for f in fields(cls)}
        for _, other in METHODS.values():
            theirs = {k: v for k, v in options.items()
                      if k not in mine and k in {f.name for f in fields(other)}}
            if theirs:
                checked = other(**theirs)   # still checked, so a bad value is not ignored
                if hasattr(checked, "check"):
                    checked.check(p)
        return cls(**{k: v for k, v in options.items() if k in mine})
    raise TypeError(f"options must be a dict or a {cls.__name__}, got {describe(options)}")


def default_budget(n_blocks: int, epochs: int | None = None) -> int:
    """``epochs`` (None: `DEFAULT_MAX_EPOCHS`) in iterations for a method with
    ``n_blocks`` blocks.

    Parameters
    ----------
    n_blocks : int
        Number of blocks l (1 for RSM).
    epochs : int, optional
        The budget in epochs; None: `DEFAULT_MAX_EPOCHS`.

    Returns
    -------
    int
        ``ceil(epochs * epoch_iterations(n_blocks))`` iterations.
    """
    epochs = DEFAULT_MAX_EPOCHS if epochs is None else epochs
    return math.ceil(epochs * epoch_iterations(n_blocks))
