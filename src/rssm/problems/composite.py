"""Composite data objectives f(X) = sum_j c_j h(X^T y_j - b_j) + mu ||X||_1 over St(n, p).

The family covers DPCP (h = ||.||, eq. ``eq-RSR``), ODL (h = ||.||_1, Section 5.2),
Huber-type robust losses, l1 Procrustes (b_j = rows of B) and sparse PCA (h = -||.||^2
with an l1 penalty). Everything the solvers need comes from the loss alone:

* an *entrywise* loss h(z) = sum_k phi(z_k) has the partial subgradient
  Yt phi'(Z_C - B_C) for the columns C (Prop. ``prop-structural``), which reads only the
  rows C of the cached Z^T = X^T Yt;
* a *norm* loss h(z) = psi(||z||) has the weights psi'(r_j) / r_j (Z - B)_C, which need
  the whole-row norms r_j; they are kept as per-block sums of squares (as `DPCP`'s oracle
  does) and the blocks that changed are recomputed from scratch, so nothing drifts.

Either way an RSSM iteration costs O(m n |C|) flops, as for the built-in problems. The
losses and their math on a chunk of samples live in `rssm.problems.losses` (re-exported
here); the one incremental oracle of every data objective, DPCP and ODL included, is
`rssm.data.engine.DataOracle` (`rssm.problems._data` has the family's base class).
"""

from __future__ import annotations

import math

import numpy as np

from rssm._validation import (
    as_float_matrix,
    as_int,
    as_positive_float,
    check_data_scale,
    max_abs,
    metric_inputs,
)
from rssm.data.chunked import ChunkedData, is_out_of_core
from rssm.data.engine import DataOracle
from rssm.problems._data import DataProblem
from rssm.problems.losses import EntrywiseLoss, NormLoss
from rssm.stepsizes import as_stepsize

# EntrywiseLoss and NormLoss (rssm.problems.losses) are importable from here as before;
# their documented home is rssm.problems.
__all__ = ["CompositeProblem"]

#: The oracle of composites: the one data oracle (kept under its former name).
_CompositeOracle = DataOracle


class CompositeProblem(DataProblem):
    """f(X) = sum_j c_j h(X^T y_j - b_j) + mu ||X||_1 over St(n, p), with an incremental
    partial oracle built from the loss h alone.

    Parameters
    ----------
    y : array_like, shape (n, m)
        Data points y_j as columns; out-of-core arrays are streamed (see
        `rssm.problems.DPCP`), and a store (`rssm.data.store`) is used as it is.
    p : int
        Number of columns of X.
    loss : EntrywiseLoss or NormLoss
        The row loss h: entrywise (h(z) = sum_k phi(z_k)) or a function of ||z||.
    offset : array_like, shape (m, p), optional
        B, whose rows b_j are subtracted from X^T y_j (e.g. the right-hand side of a
        Procrustes problem ||Y^T X - B||). Default 0. An out-of-core array (a memmap,
        h5py/Zarr dataset, Dask array, or `rssm.data.samples` of one) is read a chunk of
        rows at a time with the data; ``sample_weights`` stay in memory.
    sample_weights : array_like, shape (m,), optional
        c_j >= 0. Default 1.
    l1_penalty : float
        mu >= 0 of the penalty mu ||X||_1 (sparse PCA). Default 0.
    stepsize : StepSize, callable or float, optional
        Returned by `default_stepsize` (so `rssm.minimize` needs no ``stepsize=``).
    name : str
        Label in results.
    p_name : str
        The name errors give the number of columns (default "p"; `SparsePCA` says "r").
    y_name : str
        The name errors give the data argument (default "y"; `L1Procrustes` and
        `SparsePCA` say "a", `PlantedSparseBasis` "q").

    Examples
    --------
    A Huber-robust DPCP-type objective on random data:

    >>> import numpy as np, rssm
    >>> from rssm.problems import CompositeProblem, NormLoss
    >>> y = np.random.default_rng(0).standard_normal((10, 200))
    >>> prob = CompositeProblem(y, 4, NormLoss.huber(0.1), stepsize=1e-3)
    >>> res = rssm.minimize(prob, options={"n_blocks": 2}, max_iter=50, seed=0)
    >>> bool(res.fun < res.trace["cost"][0])
    True
    """

    name = "composite"

    def __init__(self, y, p: int, loss: EntrywiseLoss | NormLoss, *, offset=None,
                 sample_weights=None, l1_penalty: float = 0.0, stepsize=None,
                 name: str = "composite", p_name: str = "p", y_name: str = "y"):
        if not isinstance(loss, (EntrywiseLoss, NormLoss)):
            raise TypeError(
                f"loss must be an EntrywiseLoss or a NormLoss (e.g. EntrywiseLoss.l1()), "
                f"got {type(loss).__name__}"
            )
        self.yt = self._set_data(y, y_name)
        n, m = self._store.shape
        # p_name: what a subclass calls the number of columns (sparse PCA: r)
        self.p = as_int(p, p_name, minimum=1, maximum=n, maximum_is="n")
        self.shape = (n, self.p)
        self.loss = loss
        self.bt = None
        self._offset_store = None
        if offset is not None and is_out_of_core(offset):
            off = offset if isinstance(offset, ChunkedData) else ChunkedData(
                offset, rows_are_samples=True, name="offset")
            if off.shape != (self.p, m):
                raise ValueError(
                    f"offset must be {m} x {self.p} (one row b_j per sample), got "
                    f"{off.m} x {off.n}")
            self._offset_store = off
        elif offset is not None:
            b = as_float_matrix(offset, "offset", shape=(m, self.p))
            check_data_scale(max_abs(b), "offset")
            # a copy always (an audit: with p = 1 or m = 1, b.T was contiguous and
            # ascontiguousarray kept the user's array, whose later changes moved f)
            self.bt = np.array(b.T, order="C")
        self.cw = None
        if sample_weights is not None:
            w = np.asarray(sample_weights)
            if w.dtype.kind not in "iuf":
                raise TypeError(
                    f"sample_weights must hold real numbers (int or float dtypes), got dtype "
                    f"{w.dtype}"
                )
            w = w.astype(np.float64)
            want = f"sample_weights must be {m} finite non-negative numbers (one per column of y)"
            if w.shape != (m,):
                raise ValueError(f"{want}, got shape {w.shape}")
            bad = int(np.count_nonzero(~np.isfinite(w)))
            if bad:
                raise ValueError(f"{want}, got {bad} NaN or infinite")
            neg = int(np.count_nonzero(w < 0))
            if neg:
                raise ValueError(f"{want}, got {neg} negative (the least {w.min():.3g})")
            check_data_scale(max_abs(w), "sample_weights")   # (1e307 made f infinite)
            self.cw = w.copy()
        self.l1_penalty = as_positive_float(l1_penalty, "l1_penalty", allow_zero=True)
        self._stepsize = None if stepsize is None else as_stepsize(stepsize)
        if not isinstance(name, str):
            raise TypeError(f"name must be a str, got {type(name).__name__}")
        self.name = name

    # -- per-sample inputs; oracles from `DataProblem` --------------------------------------
    def _inputs(self) -> dict:
        return {"bt": self.bt, "cw": self.cw}

    def _readers(self) -> dict:
        return {} if self._offset_store is None else {"bt": self._offset_store.read}

    def subgradient_flops(self) -> float:
        n, p = self.shape
        return 4.0 * self.m * n * p + 3.0 * self.m * p + (2.0 * n * p if self.l1_penalty else 0.0)

    def default_stepsize(self):
        return self._stepsize

    def __repr__(self) -> str:
        n, p = self.shape
        extra = f", l1_penalty={self.l1_penalty:g}" if self.l1_penalty else ""
        return f"{type(self).__name__}(n={n}, p={p}, m={self.m}, loss={self.loss.name}{extra})"


#: Up to this many columns `signed_permutation_distance` matches them with its own
#: Hungarian algorithm: importing scipy.optimize took 0.39 s, which the first default
#: call on sparse PCA or the planted sparse basis paid (its error evaluations), doubling
#: or tripling its wall time (0.64 s against 0.31 s; 0.52 s against 0.16 s).
SMALL_ASSIGNMENT = 32


def _max_assignment(w: np.ndarray) -> np.ndarray:
    """Column assigned to each row of the square matrix ``w`` by a one-to-one matching of
    largest total weight: each row's largest entry where those fall in distinct columns,
    else the Hungarian algorithm with potentials (Kuhn-Munkres, in the shortest
    augmenting path form), O(p^3), its inner loop over columns vectorized."""
    w = np.asarray(w, dtype=np.float64)
    n = w.shape[0]
    best = np.argmax(w, axis=1)
    if np.unique(best).size == n:
        # each row's largest entry, in distinct columns: no matching can beat it term by
        # term (near a solution, where X = X* P S up to small terms, always)
        return best
    a = -w                                        # a least-cost matching of -w
    u = np.zeros(n + 1)
    v = np.zeros(n + 1)
    match = np.zeros(n + 1, dtype=np.intp)       # row (1-based) matched to column j
    way = np.zeros(n + 1, dtype=np.intp)
    for i in range(1, n + 1):
        match[0] = i
        j0 = 0
        minv = np.full(n + 1, np.inf)
        used = np.zeros(n + 1, dtype=bool)
        while True:
            used[j0] = True
            i0 = match[j0]
            cur = a[i0 - 1] - u[i0] - v[1:]
            free = ~used[1:]
            better = free & (cur < minv[1:])
            minv[1:][better] = cur[better]
            way[1:][better] = j0
            cand = np.where(free, minv[1:], np.inf)
            j1 = int(np.argmin(cand)) + 1
            delta = cand[j1 - 1]
            u[match[used]] += delta
            v[used] -= delta
            minv[~used] -= delta
            j0 = j1
            if match[j0] == 0:
                break
        while j0:
            j1 = way[j0]
            match[j0] = match[j1]
            j0 = j1
    cols = np.empty(n, dtype=np.intp)
    cols[match[1:] - 1] = np.arange(n)
    return cols


def signed_permutation_distance(x: np.ndarray, x_star: np.ndarray) -> float:
    """min over signed permutations P of ||X - X* P||_F (columns matched one to one).

    The objectives whose ground truth is only defined up to the order and signs of the
    columns (sparse PCA, planted sparse bases) use it as their error. The matching
    maximizes sum |x_i^T x*_pi(i)| (Hungarian algorithm on p x p, O(p^3)). Both arguments
    must be finite, of the same shape, with orthonormal columns (else ValueError).

    Parameters
    ----------
    x : numpy.ndarray of shape (n, p)
        The estimate, a point of St(n, p) (orthonormal columns, to 1e-2).
    x_star : numpy.ndarray of shape (n, p)
        The ground truth, a point of St(n, p).

    Returns
    -------
    float
        The least ||X - X* P||_F over signed permutations P.

    Raises
    ------
    ValueError
        When an argument is not finite, the shapes differ or the columns are not
        orthonormal.
    """
    x, x_star = metric_inputs(x, x_star, "signed_permutation_distance", same_shape=True)
    c = x.T @ x_star
    if c.shape[0] <= SMALL_ASSIGNMENT:
        rows, cols = np.arange(c.shape[0]), _max_assignment(np.abs(c))
    else:
        from scipy.optimize import linear_sum_assignment

        rows, cols = linear_sum_assignment(-np.abs(c))
    s = np.sign(c[rows, cols])
    s[s == 0] = 1.0
    diff = x[:, rows] - x_star[:, cols] * s
    return float(math.sqrt(np.sum(diff * diff)))
