"""Robust (l1) orthogonal Procrustes:

f(X) = ||A X - B||_1 = sum_j ||X^T a_j - b_j||_1  over St(n, p),

with A (m x n) and B (m x p) = A X* + E, E sparse gross errors. f is convex in X (so
weakly convex on the manifold) and sharp around X* when the errors are sparse enough,
which is what makes a subgradient method with geometrically decaying steps converge
linearly. As a `CompositeProblem` (entrywise l1 loss, offset B) an RSSM iteration costs
O(m n |C|) flops.
"""

from __future__ import annotations

import numpy as np

from rssm import stiefel
from rssm._validation import (
    InvalidValue,
    as_float_matrix,
    as_int,
    as_positive_float,
    check_data_scale,
    make_rng,
    max_abs,
)
from rssm.data.chunked import ChunkedData, as_rows_matrix, is_out_of_core
from rssm.data.store import InMemory
from rssm.problem import start_rng
from rssm.problems.composite import CompositeProblem, EntrywiseLoss
from rssm.stepsizes import Geometric
from rssm.threads import single_blas

__all__ = ["L1Procrustes"]


class L1Procrustes(CompositeProblem):
    """min ||A X - B||_1 over St(n, p).

    Parameters
    ----------
    a : array_like, shape (m, n)
        Design matrix (its rows are the samples).
    b : array_like, shape (m, p)
        Targets. Either or both may be out of core (a `numpy.memmap`, h5py/Zarr dataset,
        Dask array or `rssm.data.samples` of one): they are read a chunk of rows at a time
        (docs/data.md).
    x_true : array_like, shape (n, p), optional
        Ground truth X* on St(n, p) (enables `error`).
    """

    name = "l1_procrustes"

    def __init__(self, a, b, x_true=None):
        a = as_rows_matrix(a, "a")
        n, m = a.shape
        if is_out_of_core(b):
            b = b if isinstance(b, ChunkedData) else ChunkedData(b, rows_are_samples=True,
                                                                 name="b")
            if b.m != m:
                raise ValueError(f"b has {b.m} rows; it must have m = {m}, as a")
            pb = b.n
        else:
            b_rows = np.shape(b)[0] if np.ndim(b) == 2 else None
            if b_rows is not None and b_rows != m and b_rows == n:
                # (a transposed a: the error named b, "expected (6, 'any')"; a user's audit)
                raise InvalidValue("a", f"a has {m} rows and b has {b_rows}: b needs one row "
                                   f"per row (sample) of a, and a has {n} columns; pass a.T?")
            b = as_float_matrix(b, "b", shape=(m, None))
            check_data_scale(max_abs(b), "b")
            pb = b.shape[1]
        if pb > n:
            raise ValueError(
                f"b must have at most n = {n} columns (X is n x p, p <= n), got {pb}"
            )
        super().__init__(a, pb, EntrywiseLoss.l1(), offset=b, name="l1_procrustes",
                         y_name="a")
        self.x_true = stiefel.as_point(x_true, "x_true", self.shape)
        self._checked_truth = self.x_true      # (`Problem._fast_error`)

    @classmethod
    @single_blas()
    def synthetic(
        cls,
        m: int = 400,
        n: int = 30,
        p: int = 10,
        outlier_fraction: float = 0.1,
        outlier_scale: float = 10.0,
        seed=None,
    ) -> L1Procrustes:
        """B = A X* + E with Gaussian A, Haar X*, and E sparse gross errors.

        Parameters
        ----------
        m : int
            Number of rows of A and B (observations).
        n : int
            Number of columns of A (rows of X).
        p : int
            Number of columns of X and B, 1 <= p <= n.
        outlier_fraction : float
            Fraction of the entries of B that carry a gross error, in [0, 1).
        outlier_scale : float
            Standard deviation of a gross error.
        seed : int, numpy.random.Generator or None
            Randomness of the instance.

        Returns
        -------
        L1Procrustes
            The instance on St(n, p), with X* as ``x_true`` (so `error` is available) and
            ``outlier_fraction`` and ``outlier_scale`` kept as attributes.

        Notes
        -----
        Each column of X solves an l1 regression ||A x_k - b_k||_1 whose minimizer is x*_k
        when few enough entries of b_k are corrupted; X* is orthonormal, so it is then the
        minimizer over St(n, p) as well. ``error`` is ||X - X*||_F.
        """
        m = as_int(m, "m", minimum=2)
        n = as_int(n, "n", minimum=1, maximum=m, maximum_is="m")
        p = as_int(p, "p", minimum=1, maximum=n, maximum_is="n")
        frac = as_positive_float(outlier_fraction, "outlier_fraction", allow_zero=True, upper=1.0,
                                 upper_inclusive=False)
        scale = as_positive_float(outlier_scale, "outlier_scale")
        rng = make_rng(seed)
        a = rng.standard_normal((m, n))
        x_star = stiefel.random_point(n, p, rng)
        e = scale * rng.standard_normal((m, p)) * (rng.random((m, p)) < frac)
        prob = cls(a, a @ x_star + e, x_star)
        prob.outlier_fraction, prob.outlier_scale = frac, scale
        return prob

    @property
    def has_error(self) -> bool:
        return self.x_true is not None

    def error(self, x) -> float:
        """||X - X*||_F.

        Parameters
        ----------
        x : array_like, shape (n, p)
            The point X of St(n, p) to measure.

        Returns
        -------
        float
            ||X - X*||_F.

        Raises
        ------
        ValueError
            When the instance has no ground truth, or ``x`` is not a finite matrix of
            shape (n, p).
        """
        if self.x_true is None:
            raise ValueError(
                "this L1Procrustes instance has no ground truth, so error(X) is undefined"
            )
        return float(np.linalg.norm(self._error_input(x) - self.x_true))

    def _error_of_iterate(self, x: np.ndarray) -> float:
        if not self._fast_error(L1Procrustes, "x_true"):
            return super()._error_of_iterate(x)
        return float(np.linalg.norm(x - self.x_true))

    @single_blas()
    def initial_point(self, rng=None) -> np.ndarray:
        """polar(A^T B) (deterministic; ``rng`` is ignored): the least-squares Procrustes
        solution when A^T A is a multiple of I, and near it for a tall Gaussian A. Gross
        errors pull it further from X*; RSSM then corrects it. ``rng`` (None, an int seed
        or a Generator) is checked and used only when A^T B = 0, where that start does not
        exist and a Haar-random one is drawn.

        Parameters
        ----------
        rng : None, int or numpy.random.Generator, optional
            The generator of the Haar-random start when A^T B = 0, as for
            `rssm.Problem.initial_point`; otherwise checked and not used.

        Returns
        -------
        numpy.ndarray, shape (n, p)
            polar(A^T B), or the Haar-random point of St(n, p) when A^T B = 0.
        """
        rng = start_rng(rng)
        if isinstance(self._store, InMemory) and self.bt is not None:
            cross = self.yt @ self.bt.T
        else:
            cross = np.zeros(self.shape)
            for lo, hi, blk in self._store.chunks():
                bt = (self.bt[:, lo:hi] if self.bt is not None
                      else self._offset_store.read(lo, hi))
                cross += blk @ bt.T
        if not cross.any():
            # A^T B = 0 (B = 0, or B orthogonal to A's columns): no Procrustes start;
            # the Haar start of any problem
            return super().initial_point(rng)
        return stiefel.polar(cross)

    def reference_stepsize(self):
        """Geometric(mu0 = 1 / ||A||_2^2, beta = 0.95 per epoch): linear convergence on this
        sharp problem (1/||A||_2^2 is the inverse curvature scale of ||A X - B||^2)."""
        top = self._top_sq_singular()
        if not top > 0:
            raise ValueError("L1Procrustes.reference_stepsize needs A != 0 (mu0 = 1 / "
                             "||A||_2^2); A is zero, so f = ||B||_1 does not depend on X")
        return Geometric(1.0 / top, 0.95)

    def __repr__(self) -> str:
        n, p = self.shape
        return f"L1Procrustes(m={self.m}, n={n}, p={p}, ground_truth={self.has_error})"
