"""The family of data objectives f(X) = s sum_j c_j h(X^T y_j - b_j) + mu ||X||_1.

`DataProblem` is the base of `rssm.problems.DPCP`, `rssm.problems.ODL` and every
`rssm.problems.CompositeProblem` (l1 Procrustes, sparse PCA, planted sparse bases). A
member declares

* its samples: a store (`rssm.data.store`: in memory, memory-mapped / HDF5 / Zarr chunks,
  or a Dask array), built from the constructor's data argument by `_set_data`;
* its loss h (`rssm.problems.losses`), the factor s, the penalty mu;
* its per-sample inputs: ``bt`` (the offsets b_j, p x m) and ``cw`` (the weights c_j),
  each an array in memory or read from a store at each pass;

and inherits the rest: ``cost`` and ``subgradient`` from scratch a chunk at a time,
``make_oracle`` (the one incremental oracle, `rssm.data.engine.DataOracle`, or its
data-parallel form on a Dask cluster, `rssm.data.distributed.DaskOracle`) and the flop
model. A new loss is a new `EntrywiseLoss`/`NormLoss`; a new storage kind is a new store.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rssm._validation import (
    InvalidValue,
    as_float_matrix,
    check_data_scale,
    library_stacklevel,
    max_abs,
)
from rssm.blocks import Partition
from rssm.data.chunked import ChunkedData, as_data_matrix
from rssm.data.engine import DataOracle, one_pass
from rssm.data.store import DataError, InMemory, SampleStore, warn_if_transposed
from rssm.problem import Oracle, Problem
from rssm.problems.losses import EntrywiseLoss, NormLoss, make_kernel

__all__ = ["DataProblem", "DataOracle", "SampleModel"]


@dataclass
class SampleModel:
    """What the chunk engine needs of a data problem, besides X.

    Parameters
    ----------
    store : SampleStore
        The samples.
    kernel : EntrywiseKernel or NormKernel
        The loss on a chunk, bound to the partition.
    inputs : dict, optional
        Per-sample inputs in memory, sample axis last (None when absent).
    readers : dict, optional
        Per-sample inputs read at each pass: name -> ``reader(lo, hi)``.
    mu : float, default=0.0
        The l1 penalty.
    scale : float, default=1.0
        The factor s of the sum.
    """

    store: SampleStore
    kernel: Any
    inputs: dict = field(default_factory=dict)
    readers: dict[str, Callable] = field(default_factory=dict)
    mu: float = 0.0
    scale: float = 1.0


#: An exact fit's f is about n eps s sum_j c_j ||y_j|| (rounding of each entry of X^T y_j)
#: plus the error of the point itself (a spectral start is as accurate as the eigensolver
#: on the scatter matrix); f at or below this many times that is 0 to rounding
#: (`DataProblem._exact_fit_level`). Measured at the spectral starts of exact
#: fits in `RobustSubspace` (the first 40 rows of digits, raw and standardized, a rank-5
#: make_classification table and a 30 x 60 Gaussian one, d = their rank): f was 0.03 to
#: 3.4 times n eps s sum_j c_j ||y_j|| (3.4: the raw digits, whose scatter matrix is the
#: worst conditioned). At 64, f at or below the level is within 64 n eps (1.4e-14 n) of
#: f's own scale s sum_j c_j ||y_j||.
ZERO_ROUNDING = 64.0
#: Samples whose weighted norm c_j ||y_j|| exceeds HEAVY times the median, carrying more
#: than DOMINANT of the sum of all, draw a warning before a run
#: (`DataProblem._warn_if_dominated`): measured on DPCP with one inlier scaled (m = 400),
#: runs reach the minimizer up to 1e4 (the sample then 96 % of the sum) and can stop
#: `converged` away from it from 1e5 on (99.6 %); at 1e3 (71 %) they converge in 505
#: iterations against 46.
HEAVY = 1e3
DOMINANT = 0.9


def _column_norms(blk: np.ndarray) -> np.ndarray:
    """The Euclidean norms of the columns of ``blk``, without overflow or underflow of
    their squares (each column scaled by the chunk's largest entry first)."""
    top = max_abs(blk) if blk.size else 0.0
    if not top > 0:
        return np.zeros(blk.shape[1]) if math.isfinite(top) else np.full(blk.shape[1], top)
    scaled = blk / top
    return top * np.sqrt(np.einsum("ij,ij->j", scaled, scaled))


class DataProblem(Problem):
    """Base of the data objectives (see the module docstring).

    Subclasses call `_set_data` in their constructor and set ``loss``; they may override
    `_scale` (s), `_inputs`/`_readers` (per-sample inputs) and the flop model.
    """

    #: The row loss h.
    loss: EntrywiseLoss | NormLoss
    #: mu of mu ||X||_1.
    l1_penalty: float = 0.0

    def _set_data(self, value, name: str, *, layout_check: str | None = None,
                  refuse_zero: bool = False):
        """Keep the data argument (an n x m array as float64, a `ChunkedData` for
        out-of-core arrays, or a store as it is) and its store; set m. With ``layout_check`` (the
        problem's name), warn when m < n for an array (in memory or out of core) whose
        layout the user did not state (`rssm.data.store.warn_if_transposed`). With
        ``refuse_zero``, data in memory that are all zeros are refused (f is then 0 at
        every X: a run "converged" at its start; a user's audit)."""
        if isinstance(value, InMemory):
            arr = value.yt
            self._store = value
        elif isinstance(value, SampleStore):
            arr = self._store = value
        else:
            arr = as_data_matrix(value, name)
            self._store = arr if isinstance(arr, ChunkedData) else InMemory(arr)
        self._data_top = None
        if isinstance(self._store, InMemory):
            self._data_top = max_abs(self._store.yt)
            check_data_scale(self._data_top, name)
            if refuse_zero and self._data_top == 0:
                raise InvalidValue(name, f"{name} is all zeros: f is 0 at every X, so there is "
                                   "nothing to fit")
        n, m = self._store.shape
        self.m = m
        if layout_check is not None and not isinstance(value, SampleStore):
            # (only for an array whose layout the user did not state, in memory or out of
            # core (a memmap, which as_data_matrix wraps as columns); rssm.data.samples,
            # ChunkedData and the stores state it, and the warning's "pass yt.T, or
            # rssm.data.samples(array)" told a user of samples() to do what they did; an
            # audit)
            warn_if_transposed(n, m, layout_check, name, stacklevel=4)
        return arr

    @property
    def data(self) -> SampleStore:
        """The samples as a store (`rssm.data.store`): their chunks and where they are."""
        return self._store

    def _top_singular(self) -> float:
        """||Yt||_2 (the square root of `_top_sq_singular` out of core, where the Gram
        matrix is what is read)."""
        if isinstance(self._store, InMemory):
            return float(np.linalg.norm(self._store.yt, 2))
        return math.sqrt(self._top_sq_singular())

    def _top_sq_singular(self) -> float:
        """||Yt||_2^2 (the largest eigenvalue of Yt Yt^T for out-of-core data)."""
        if isinstance(self._store, InMemory):
            return float(np.linalg.norm(self._store.yt, 2)) ** 2
        gram = self._store.gram()
        if not np.isfinite(gram).all():
            # NaN or Inf read with check_finite=False: there is no scale to take, and the
            # run stops at "f(x0) is not finite" before any step; 1 lets the rules be built
            return 1.0
        return float(np.linalg.eigvalsh(gram)[-1])

    def _exact_fit_level(self, f: float) -> float | None:
        """The level below which f is 0 to rounding when ``f`` (the cost at a start) is at
        or below it, else None. For the losses whose least value 0 an exact fit reaches:
        f = s sum_j c_j psi(X^T y_j) with psi the norm (DPCP, `RobustSubspace`'s problem)
        or the sum of absolute values, no offset and no l1 penalty (other problems: None).
        f = 0 exactly when every sample with c_j > 0 lies in the complement of span(X)
        (DPCP with d at least the rank of the data, as ``n_components="auto"`` chooses on
        wide data), and then each entry of X^T y_j is rounding of about n eps ||y_j||; the
        level is `ZERO_ROUNDING` n eps |s| sum_j c_j ||y_j|| (times sqrt(p) for the l1
        loss: ||v||_1 <= sqrt(p) ||v||_2; a review found that a factor p, 390 there,
        stopped a start 5e-9 from the fit that a run takes to 1e-11).
        A pass over the data to sum the weighted norms (overflow-safe), made only where
        f is below a bound read from the data's largest entry (in memory; out of core
        always; not for a Dask array, whose source a pass would read again)."""
        from rssm.problems.losses import NormLoss, _identity

        loss = self.loss
        if isinstance(loss, NormLoss):
            if loss.value is not _identity:
                return None
            factor = 1.0
        elif getattr(loss, "value", None) is np.abs:
            factor = math.sqrt(self.shape[1])
        else:
            return None
        store = self._store
        if (self.l1_penalty or getattr(self, "bt", None) is not None
                or getattr(self, "_offset_store", None) is not None
                or getattr(store, "kind", None) == "dask"):
            return None
        if not (math.isfinite(f) and f >= 0):
            return None
        n, m = store.shape
        unit = ZERO_ROUNDING * factor * n * np.finfo(float).eps * abs(self._scale())
        weights = getattr(self, "cw", None)
        top = getattr(self, "_data_top", None)
        with np.errstate(over="ignore", invalid="ignore"):
            if top is not None:
                count = float(m) if weights is None else float(np.sum(weights))
                if not f <= unit * math.sqrt(n) * top * count:
                    return None          # (||y_j|| <= sqrt(n) max |Y|): no pass needed
            total = 0.0
            for lo, hi, blk in store.chunks():
                norms = _column_norms(blk)
                total += float(norms.sum() if weights is None else weights[lo:hi] @ norms)
            level = unit * total
        return level if math.isfinite(level) and f <= level else None

    def _warn_if_dominated(self) -> None:
        """Warn (once per problem) where the samples whose weighted norm c_j ||y_j||
        exceeds `HEAVY` times the median carry more than `DOMINANT` of their sum (in
        memory; the nonsmooth losses: the norm itself, the sum of absolute values). Their
        subgradients then dwarf the rest, which the convergence test, reading subgradients
        relative to their norm, takes for rounding: a user's audit scaled one inlier of the
        DPCP instance St(20, 17), m = 400, and runs that reach the planted subspace at
        1e2-1e4 (in 78-714 iterations, against 46) can stop `converged` away from it from
        1e5 on (3 of 5 instances at 1e5, errors 1e-2 to 3e-2; 5 of 5 at 1e6-1e8, 5e-2 to
        9e-2; 1.77 at 1e12; l1 Procrustes at 1e6: error 1.4). A review
        found max / median alone warning on heavy-tailed data that solve (lognormal norms,
        sigma 2.3: max / median 3.8e4, the largest sample 4.4 % of the sum)."""
        if getattr(self, "_dominance_checked", False):
            return
        self._dominance_checked = True
        from rssm.problems.losses import NormLoss, _identity

        loss = self.loss
        if not ((isinstance(loss, NormLoss) and loss.value is _identity)
                or getattr(loss, "value", None) is np.abs):
            return
        if not isinstance(self._store, InMemory) or self.m < 2:
            return
        with np.errstate(over="ignore", invalid="ignore"):
            norms = _column_norms(self._store.yt)
            weights = getattr(self, "cw", None)
            if weights is not None:
                norms = norms * np.abs(weights)
        pos = norms[norms > 0]
        if pos.size < 2 or not np.isfinite(pos).all():
            return
        mid = float(np.median(pos))
        heavy = pos > HEAVY * mid
        if not heavy.any():
            return
        total = math.fsum(pos)
        share = math.fsum(pos[heavy]) / total
        if share > DOMINANT:
            j = int(np.argmax(norms))
            warnings.warn(
                f"{type(self).__name__}: {int(heavy.sum())} sample(s) weigh more than "
                f"{HEAVY:g} times the median sample (c_j ||y_j||; sample {j}: "
                f"{float(norms[j]) / mid:.2g} times) and carry {share:.1%} of the total: "
                "their subgradients dwarf the others', which the convergence test can take "
                "for rounding, and a run may stop `converged` away from the minimizer; "
                "scale the samples to comparable norms (e.g. unit norm, as DPCP's model "
                "has them) or weight them (docs/convergence.md, 'One sample that outweighs "
                "the rest')", UserWarning, stacklevel=library_stacklevel())

    # -- what the engine needs --------------------------------------------------------------
    def _scale(self) -> float:
        return 1.0

    def _inputs(self) -> dict:
        return {}

    def _readers(self) -> dict:
        return {}

    def sample_model(self, partition: Partition | None) -> SampleModel:
        """The loss kernel for ``partition``, the store, the inputs, mu and s.

        Parameters
        ----------
        partition : Partition or None
            The column blocks of an RSSM run, or None for RSM (and for `cost` and
            `subgradient` from scratch).

        Returns
        -------
        SampleModel
            What the chunk engine needs of this problem, with the kernel of `loss` for
            ``partition`` (`rssm.problems.losses.make_kernel`).
        """
        return SampleModel(self._store, make_kernel(self.loss, self.shape[1], partition,
                                                    self._scale()),
                           self._inputs(), self._readers(), float(self.l1_penalty or 0.0),
                           self._scale())

    # -- oracles --------------------------------------------------------------------------
    def cost(self, x) -> float:
        return self._pass(x, False)[0]

    def subgradient(self, x) -> np.ndarray:
        return self._pass(x, True)[1]

    def _pass(self, x, grad: bool):
        # a real matrix of this problem's shape (NaN passes: f is NaN there, which the
        # solver's checks read); before, X^T or too few columns gave NumPy's matmul or
        # broadcast errors, or a cost of the columns given (a user's audit)
        x = as_float_matrix(x, "x", shape=self.shape, finite=False)
        try:
            return one_pass(self.sample_model(None), x, grad)
        except DataError as exc:   # the data went away: say at which point
            if exc.x is None:
                exc.x = x.copy()
            raise

    def make_oracle(self, x, partition: Partition | None) -> Oracle:
        if isinstance(self._store, ChunkedData) and self._store.kind == "dask":
            from rssm.data.distributed import DaskOracle, active_client

            client = active_client()
            if client is not None:
                return DaskOracle(self, x, partition, client)
        return DataOracle(self, x, partition)

    # -- flop model (per call, all m samples) ---------------------------------------------
    def _has(self, name: str) -> bool:
        return self._inputs().get(name) is not None or name in self._readers()

    def weight_flops(self, c: int) -> float:
        """Flops of the weights of c rows of Z^T (and the penalty's sign term).

        Parameters
        ----------
        c : int
            The number of rows of Z^T (columns of X).

        Returns
        -------
        float
            The flop count.
        """
        per = self._has("bt") + (1.0 if isinstance(self.loss, NormLoss) else self.loss.flops)
        per += self._has("cw")
        return float(self.m * c * per) + (2.0 * self.shape[0] * c if self.l1_penalty else 0.0)

    def stat_flops(self, c: int, n_blocks: int) -> float:
        """Flops of the statistics after c rows of Z^T changed (l = ``n_blocks``).

        Parameters
        ----------
        c : int
            The number of rows of Z^T (columns of X) that changed.
        n_blocks : int
            The number of blocks l of the partition.

        Returns
        -------
        float
            The flop count (0 for an entrywise loss, which keeps no statistics).
        """
        if not isinstance(self.loss, NormLoss):
            return 0.0
        return 2.0 * self.m * c + (n_blocks + self.loss.flops + 2.0) * self.m

    def subgradient_flops(self) -> float:
        n, p = self.shape
        return 4.0 * self.m * n * p + 3.0 * self.m * p + (2.0 * n * p if self.l1_penalty else 0.0)
