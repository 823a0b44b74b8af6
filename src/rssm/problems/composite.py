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

Either way an RSSM iteration costs O(m n |C|) flops, as for the built-in problems.

Paper labels (``eq-...``, ``alg-...``) are those of the LaTeX source of A. Y.-M. Cheung,
J. Wang, M.-C. Yue, A. M.-C. So, "Randomized Submanifold Subgradient Method for
Optimization over Stiefel Manifolds", arXiv:2409.01770; here ``prop-structural`` = Prop.
3.3, ``eq-RSR`` = eq. (29) (table: docs/paper-map.md).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from rssm._validation import as_float_matrix, as_int, as_positive_float
from rssm.blocks import ColumnSet, Partition
from rssm.data.chunked import (
    ChunkedData,
    as_data_matrix,
    chunked_cost,
    chunked_subgradient,
    make_data_oracle,
)
from rssm.problem import Problem
from rssm.problems._data import DataOracle
from rssm.stepsizes import as_stepsize

__all__ = ["EntrywiseLoss", "NormLoss", "CompositeProblem"]

ArrayFn = Callable[[np.ndarray], np.ndarray]


@dataclass(frozen=True)
class EntrywiseLoss:
    """h(z) = sum_k phi(z_k) for a scalar function phi applied entry by entry.

    Parameters
    ----------
    value : callable
        ``value(t)`` returns phi(t) elementwise for an ndarray ``t``.
    derivative : callable
        ``derivative(t)`` returns, elementwise, an element of the Clarke subdifferential
        of phi at t (e.g. sign(t) for |t|, with 0 at t = 0).
    name : str
        Label used in ``repr``.
    flops : float
        Flop-model cost of one ``derivative`` evaluation per entry.
    """

    value: ArrayFn
    derivative: ArrayFn
    name: str = "entrywise"
    flops: float = 1.0

    @classmethod
    def l1(cls) -> EntrywiseLoss:
        """phi(t) = |t| (ODL, l1 Procrustes); phi'(0) := 0."""
        return cls(np.abs, np.sign, "l1", 1.0)

    @classmethod
    def huber(cls, delta: float = 1.0) -> EntrywiseLoss:
        """phi(t) = t^2 / (2 delta) for |t| <= delta, |t| - delta / 2 beyond.

        Smooth with a Lipschitz derivative; it behaves as |t| for large residuals.
        """
        d = as_positive_float(delta, "delta")

        def value(t: np.ndarray) -> np.ndarray:
            a = np.abs(t)
            return np.where(a <= d, 0.5 * t * t / d, a - 0.5 * d)

        def derivative(t: np.ndarray) -> np.ndarray:
            return np.clip(t / d, -1.0, 1.0)

        return cls(value, derivative, f"huber({d:g})", 3.0)

    @classmethod
    def neg_square(cls) -> EntrywiseLoss:
        """phi(t) = -t^2: the variance term of PCA, -||Y^T X||_F^2 (concave, smooth)."""
        return cls(lambda t: -(t * t), lambda t: -2.0 * t, "neg_square", 1.0)


@dataclass(frozen=True)
class NormLoss:
    """h(z) = psi(||z||_2) for a scalar function psi of the row norm r = ||z|| >= 0.

    Parameters
    ----------
    value : callable
        ``value(r)`` returns psi(r) elementwise (r >= 0).
    derivative : callable
        ``derivative(r)`` returns psi'(r) elementwise (an element of the subdifferential at
        kinks). Where r = 0 the weight psi'(r) / r is taken as 0, which is valid when
        psi'(0) = 0 or psi is the norm itself (0 lies in the unit ball).
    name : str
        Label used in ``repr``.
    flops : float
        Flop-model cost of ``derivative`` per row.
    """

    value: ArrayFn
    derivative: ArrayFn
    name: str = "norm"
    flops: float = 1.0

    @classmethod
    def norm(cls) -> NormLoss:
        """psi(r) = r: the DPCP loss ||z|| (eq. ``eq-RSR``)."""
        return cls(lambda r: r, np.ones_like, "norm", 0.0)

    @classmethod
    def huber(cls, delta: float = 1.0) -> NormLoss:
        """psi(r) = r^2 / (2 delta) for r <= delta, r - delta / 2 beyond (smoothed DPCP)."""
        d = as_positive_float(delta, "delta")
        return cls(
            lambda r: np.where(r <= d, 0.5 * r * r / d, r - 0.5 * d),
            lambda r: np.minimum(r / d, 1.0),
            f"huber_norm({d:g})",
            2.0,
        )


class _CompositeOracle(DataOracle):
    """Incremental oracle of `CompositeProblem` on the cache Z^T = X^T Yt of `DataOracle`."""

    def __init__(self, problem: CompositeProblem, x: np.ndarray, partition: Partition | None):
        self.loss = problem.loss
        self.bt = problem.bt  # p x m or None
        self.cw = problem.cw  # (m,) or None
        self.mu = problem.l1_penalty
        self._norm_loss = isinstance(problem.loss, NormLoss)
        self._part = partition
        m = problem.yt.shape[1]
        if self._norm_loss:
            nb = partition.n_blocks if partition is not None else 1
            self._block_runs = (
                [partition.columns(b).runs for b in range(nb)] if partition is not None
                else [(slice(0, x.shape[1]),)]
            )
            self.bn = np.empty((nb, m))
            self.scale = np.empty(m)
            self.r = np.empty(m)
        super().__init__(problem, x, partition, problem.yt)

    def _resid(self, rows: slice) -> np.ndarray:
        z = self.zt[rows]
        return z if self.bt is None else z - self.bt[rows]

    def _after_update(self, cols: ColumnSet | None) -> None:
        if not self._norm_loss:
            return
        blocks = range(self.bn.shape[0]) if cols is None or self._part is None else cols.blocks
        for b in blocks:
            row = self.bn[b]
            row.fill(0.0)
            for run in self._block_runs[b]:
                z = self._resid(run)
                row += np.einsum("ij,ij->j", z, z)
        np.sqrt(self.bn.sum(axis=0), out=self.r)
        # c_j psi'(r_j) / r_j, and 0 where r_j = 0 (see NormLoss).
        d = np.asarray(self.loss.derivative(self.r), dtype=np.float64)
        if self.cw is not None:
            d = d * self.cw
        self.scale.fill(0.0)
        np.divide(d, self.r, out=self.scale, where=self.r > 0)

    def _weights(self, rows: slice, out: np.ndarray) -> None:
        res = self._resid(rows)
        if self._norm_loss:
            np.multiply(res, self.scale, out=out)
        else:
            out[...] = self.loss.derivative(res)
            if self.cw is not None:
                out *= self.cw

    def partial_subgradient(self, cols: ColumnSet) -> np.ndarray:
        g = super().partial_subgradient(cols)
        if self.mu:
            g = g + self.mu * np.sign(self.x[:, cols.selector])
        return g

    def subgradient(self) -> np.ndarray:
        g = super().subgradient()
        if self.mu:
            g = g + self.mu * np.sign(self.x)
        return g

    def _row_values(self, rows: np.ndarray) -> np.ndarray:
        z = self.zt[rows]
        res = z if self.bt is None else z - self.bt[rows]
        v = np.asarray(self.loss.value(res), dtype=np.float64)
        out = v @ self.cw if self.cw is not None else v.sum(axis=1)
        if self.mu:  # mu ||X||_1 by columns of X (= rows of Z^T)
            out = out + self.mu * np.abs(self.x[:, rows]).sum(axis=0)
        return out

    def cost(self) -> float:
        if self._norm_loss:
            v = np.asarray(self.loss.value(self.r), dtype=np.float64)
            total = float(v @ self.cw) if self.cw is not None else float(v.sum())
            if self.mu:
                total += self.mu * float(np.abs(self.x).sum())
            return total
        return self._cached_cost()

    def _weight_flops(self, c: int) -> float:
        per = (self.bt is not None) + (1 if self._norm_loss else self.loss.flops)
        return float(self.m * c * (per + (self.cw is not None))) + 2.0 * self.n * c * bool(self.mu)

    def _stat_flops(self, c: int) -> float:
        if not self._norm_loss:
            return 0.0
        return 2.0 * self.m * c + (self.bn.shape[0] + self.loss.flops + 2.0) * self.m


class CompositeProblem(Problem):
    """f(X) = sum_j c_j h(X^T y_j - b_j) + mu ||X||_1 over St(n, p), with an incremental
    partial oracle built from the loss h alone.

    Parameters
    ----------
    y : array_like, shape (n, m)
        Data points y_j as columns; out-of-core arrays are streamed (see
        `rssm.problems.DPCP`; ``offset`` and ``sample_weights`` stay in memory).
    p : int
        Number of columns of X.
    loss : EntrywiseLoss or NormLoss
        The row loss h: entrywise (h(z) = sum_k phi(z_k)) or a function of ||z||.
    offset : array_like, shape (m, p), optional
        B, whose rows b_j are subtracted from X^T y_j (e.g. the right-hand side of a
        Procrustes problem ||Y^T X - B||). Default 0.
    sample_weights : array_like, shape (m,), optional
        c_j >= 0. Default 1.
    l1_penalty : float
        mu >= 0 of the penalty mu ||X||_1 (sparse PCA). Default 0.
    stepsize : StepSize, callable or float, optional
        Returned by `default_stepsize` (so `rssm.minimize` needs no ``stepsize=``).
    name : str
        Label in results.

    Examples
    --------
    A Huber-robust DPCP-type objective on random data:

    >>> import numpy as np, rssm
    >>> from rssm.problems import CompositeProblem, NormLoss
    >>> y = np.random.default_rng(0).standard_normal((10, 200))
    >>> prob = CompositeProblem(y, 4, NormLoss.huber(0.1), stepsize=1e-3)
    >>> res = rssm.minimize(prob, n_blocks=2, max_iter=50, seed=0)
    >>> bool(res.fun < res.trace["cost"][0])
    True
    """

    name = "composite"

    def __init__(self, y, p: int, loss: EntrywiseLoss | NormLoss, *, offset=None,
                 sample_weights=None, l1_penalty: float = 0.0, stepsize=None,
                 name: str = "composite"):
        if not isinstance(loss, (EntrywiseLoss, NormLoss)):
            raise TypeError(
                f"loss must be an EntrywiseLoss or a NormLoss (e.g. EntrywiseLoss.l1()), "
                f"got {type(loss).__name__}"
            )
        self.yt = as_data_matrix(y, "y")
        n, m = self.yt.shape
        self.p = as_int(p, "p", minimum=1, maximum=n)
        self.shape = (n, self.p)
        self.m = m
        self.loss = loss
        self.bt = None
        if offset is not None:
            b = as_float_matrix(offset, "offset", shape=(m, self.p))
            self.bt = np.ascontiguousarray(b.T)
        self.cw = None
        if sample_weights is not None:
            w = np.asarray(sample_weights)
            if w.dtype.kind not in "iuf":
                raise TypeError(
                    f"sample_weights must hold real numbers (int or float dtypes), got dtype "
                    f"{w.dtype}"
                )
            w = w.astype(np.float64)
            if w.shape != (m,) or not np.all(np.isfinite(w)) or np.any(w < 0):
                raise ValueError(
                    f"sample_weights must be {m} finite non-negative numbers (one per column "
                    f"of y), got shape {w.shape}"
                )
            self.cw = w.copy()
        self.l1_penalty = as_positive_float(l1_penalty, "l1_penalty", allow_zero=True)
        self._stepsize = None if stepsize is None else as_stepsize(stepsize)
        if not isinstance(name, str):
            raise TypeError(f"name must be a str, got {type(name).__name__}")
        self.name = name

    # -- samples (out-of-core and distributed data) ---------------------------------------
    @property
    def _data(self):
        return self.yt

    def _sample_slice(self, yt: np.ndarray, lo: int, hi: int) -> CompositeProblem:
        """The loss part of this problem on the samples lo..hi-1 (``yt`` = their columns;
        offset and sample weights sliced to them; no l1 penalty, which the whole adds
        once)."""
        part = copy.copy(self)
        part.yt = yt
        part.m = hi - lo
        part.bt = None if self.bt is None else self.bt[:, lo:hi]
        part.cw = None if self.cw is None else self.cw[lo:hi]
        part.l1_penalty = 0.0
        return part

    # -- oracles --------------------------------------------------------------------------
    def _resid(self, x: np.ndarray) -> np.ndarray:
        z = self.yt.T @ x  # m x p
        return z if self.bt is None else z - self.bt.T

    def cost(self, x) -> float:
        if isinstance(self.yt, ChunkedData):
            return chunked_cost(self, x)
        res = self._resid(x)
        if isinstance(self.loss, NormLoss):
            v = np.asarray(self.loss.value(np.linalg.norm(res, axis=1)), dtype=np.float64)
        else:
            v = np.asarray(self.loss.value(res), dtype=np.float64).sum(axis=1)
        total = float(v @ self.cw) if self.cw is not None else float(v.sum())
        return total + self.l1_penalty * float(np.abs(x).sum())

    def subgradient(self, x) -> np.ndarray:
        if isinstance(self.yt, ChunkedData):
            return chunked_subgradient(self, x)
        res = self._resid(x)
        if isinstance(self.loss, NormLoss):
            r = np.linalg.norm(res, axis=1)
            d = np.asarray(self.loss.derivative(r), dtype=np.float64)
            s = np.zeros_like(r)
            np.divide(d, r, out=s, where=r > 0)
            w = res * s[:, None]
        else:
            w = np.asarray(self.loss.derivative(res), dtype=np.float64)
        if self.cw is not None:
            w = w * self.cw[:, None]
        g = self.yt @ w
        if self.l1_penalty:
            g += self.l1_penalty * np.sign(x)
        return g

    def make_oracle(self, x, partition):
        if isinstance(self.yt, ChunkedData):
            return make_data_oracle(self, x, partition)
        return _CompositeOracle(self, x, partition)

    def subgradient_flops(self) -> float:
        n, p = self.shape
        return 4.0 * self.m * n * p + 3.0 * self.m * p + (2.0 * n * p if self.l1_penalty else 0.0)

    def default_stepsize(self):
        return self._stepsize

    def __repr__(self) -> str:
        n, p = self.shape
        extra = f", l1_penalty={self.l1_penalty:g}" if self.l1_penalty else ""
        return f"{type(self).__name__}(n={n}, p={p}, m={self.m}, loss={self.loss.name}{extra})"


def signed_permutation_distance(x: np.ndarray, x_star: np.ndarray) -> float:
    """min over signed permutations P of ||X - X* P||_F (columns matched one to one).

    The objectives whose ground truth is only defined up to the order and signs of the
    columns (sparse PCA, planted sparse bases) use it as their error. The matching
    maximizes sum |x_i^T x*_pi(i)| (Hungarian algorithm on p x p, O(p^3)).
    """
    from scipy.optimize import linear_sum_assignment

    c = x.T @ x_star
    rows, cols = linear_sum_assignment(-np.abs(c))
    s = np.sign(c[rows, cols])
    s[s == 0] = 1.0
    diff = x[:, rows] - x_star[:, cols] * s
    return float(math.sqrt(np.sum(diff * diff)))
