"""Robust subspace recovery by dual principal component pursuit (DPCP), Section 5.1.

f(X) = (1/m) sum_j ||yt_j^T X||  over St(n, p), p = n - d   (eq. ``eq-RSR``)

where the columns yt_j of Yt (n x m) are inliers in a d-dimensional subspace S and
outliers. A minimizer spans S^perp.
"""

from __future__ import annotations

import numpy as np

from rssm import stiefel
from rssm._validation import (
    InvalidValue,
    as_int,
    as_positive_float,
    check_array_size,
    check_memory,
    make_rng,
    metric_inputs,
    quieted,
)
from rssm.data.chunked import ChunkedData, as_data_matrix
from rssm.data.engine import DataOracle
from rssm.data.store import LayoutWarning, one_blas_thread
from rssm.problem import start_rng
from rssm.problems._data import DataProblem
from rssm.problems.losses import NormLoss
from rssm.stepsizes import PaperSchedule
from rssm.threads import single_blas

__all__ = ["DPCP", "subspace_distance"]

#: The oracle of DPCP: the one data oracle (kept under its former name).
_DPCPOracle = DataOracle


def subspace_distance(s: np.ndarray, x: np.ndarray) -> float:
    """dist(X, S^perp) = min_R ||X - S^perp R|| for orthonormal S (n x d), X (n x (n-d)).

    Section 5.1 writes it as sqrt(2 (p - ||(I - S S^T) X||_*)), which cancels
    catastrophically: it loses every digit below about 1e-8. With s the singular values of
    S^T X (the sines of the principal angles between span X and S^perp), each term
    1 - cos(theta) = s^2 / (1 + sqrt(1 - s^2)), so

        dist = sqrt( sum 2 s^2 / (1 + sqrt(1 - s^2)) ),

    summed as a norm scaled by its largest term, so that it keeps a few ulps of the
    distance that S^T X, as float64 computes it, defines, down to 1e-300 (the squares
    underflowed below 1e-154: 1e-200 read as 0); where that product is exact (axis-aligned
    bases) that is the distance itself. In general the rounding of S^T X bounds it, as it
    bounds any float64 formula on these inputs: about eps sqrt(n p) absolute (against 50
    digits, n = 12, d = 3: 1e-5 relative at a distance of 1e-12, 3e-3 at 1e-14), where the
    Section 5.1 form loses every digit below about 1e-8. Near pi / 2 the cosine
    sqrt(1 - s^2) is read from the sine: at and near X in S (every angle pi / 2) the
    distance sqrt(2 p) comes out to about 1e-8 relative (measured: 1.1e-8 at worst over
    200 random X = S Q, 5e-9 within 1e-8 of pi / 2 on axis-aligned bases, 1e-16 at X
    exactly in S there), ample for an error that far from 0. Both
    arguments must be finite with as many rows and orthonormal columns, and X at most
    n - d of them (the dimension of S^perp; else ValueError).

    Parameters
    ----------
    s : array_like, shape (n, d)
        Orthonormal basis of the subspace S.
    x : array_like, shape (n, q)
        The point X, with orthonormal columns, q <= n - d (q = n - d for DPCP's iterates).

    Returns
    -------
    float
        dist(X, S^perp) = min_R ||X - S^perp R||_F, >= 0.

    Raises
    ------
    ValueError
        When an argument is not finite, the row counts differ, a column set is not
        orthonormal, or X has more than n - d columns.
    """
    s, x = metric_inputs(x=s, ref=x, what="subspace_distance", names=("s", "x"))
    n, d = s.shape
    if x.shape[1] > n - d:
        raise InvalidValue("x", f"subspace_distance: x has {x.shape[1]} columns, more than "
                                f"n - d = {n - d}, the dimension of S^perp it is measured "
                                "against")
    return _subspace_distance(s, x)


def _subspace_distance(s: np.ndarray, x: np.ndarray) -> float:
    """`subspace_distance` of checked inputs (float64, C-ordered, orthonormal columns)."""
    sv = np.minimum(np.linalg.svd(s.T @ x, compute_uv=False), 1.0)
    terms = sv * np.sqrt(2.0 / (1.0 + np.sqrt(1.0 - sv * sv)))    # 2 sin(theta / 2)
    top = float(terms.max()) if terms.size else 0.0
    return top * float(np.sqrt(np.sum((terms / top) ** 2))) if top > 0 else 0.0


class DPCP(DataProblem):
    """DPCP objective f(X) = (1/m) sum_j ||yt_j^T X|| on St(n, p) (eq. ``eq-RSR``).

    Parameters
    ----------
    yt : array_like, shape (n, m)
        Data points as columns. Out-of-core arrays (a `numpy.memmap`, an h5py or Zarr
        dataset, a Dask array, or `rssm.data.samples` of an m x n array with points as
        rows) are not copied into memory but streamed a chunk of points at a time
        (docs/data.md).
    p : int
        Number of columns of X; for subspace recovery p = n - d.
    subspace : array_like, shape (n, d), optional
        Orthonormal basis of the true subspace S (enables `error`).

    Examples
    --------
    >>> import rssm
    >>> prob = rssm.problems.DPCP.synthetic(n=30, d=3, n_inliers=300, n_outliers=200, seed=0)
    >>> prob.shape
    (30, 27)
    """

    name = "dpcp"

    def __init__(self, yt, p: int, subspace=None):
        self.yt = self._set_data(yt, "yt", layout_check="DPCP", refuse_zero=True)
        n, m = self._store.shape
        # p = n (d = 0) is refused: every orthogonal X then gives f = mean ||y_j||, and a
        # run "converged" at its start (a user's audit)
        self.p = as_int(p, "p", minimum=1)
        if self.p >= n:
            # (an audit: p = n + 1 was told "p must be <= n", which p = n is not either)
            raise InvalidValue("p", f"p must be <= n - 1 = {n - 1}, got {self.p}: DPCP looks "
                               "for a subspace of dimension d = n - p >= 1 (at p = n every X "
                               "has the same cost)")
        self.shape = (n, self.p)
        self.loss = NormLoss.norm()
        self.subspace = None
        if subspace is not None:
            s = stiefel.as_point(subspace, "subspace", (n, None))
            if s.shape[1] + self.p != n:
                raise ValueError(
                    f"subspace has d={s.shape[1]} columns but p={self.p}; the error "
                    f"dist(X, S^perp) needs p = n - d = {n - s.shape[1]}"
                )
            self.subspace = s
            self._checked_truth = self.subspace      # (`Problem._fast_error`)

    @classmethod
    @single_blas()
    def from_data(cls, yt, d: int | None = None, p: int | None = None, subspace=None) -> DPCP:
        """Build from a user's data matrix (n x m, points as columns), with either the
        subspace dimension ``d`` (then p = n - d) or ``p`` directly.

        Parameters
        ----------
        yt : array_like, shape (n, m)
            Data points as columns; out-of-core arrays are streamed (as for the class).
        d : int, optional
            Dimension of the subspace S, 1 <= d <= n - 1; then p = n - d.
        p : int, optional
            Number of columns of X. Give exactly one of ``d`` and ``p``.
        subspace : array_like, shape (n, d), optional
            Orthonormal basis of the true subspace S (enables `error`).

        Returns
        -------
        DPCP
            The instance on St(n, p); the same as ``DPCP(yt, p, subspace)``.

        Raises
        ------
        ValueError
            When both or neither of ``d`` and ``p`` are given, or one is out of range.
        """
        arr = yt if isinstance(yt, ChunkedData) else as_data_matrix(yt, "yt")
        n = arr.shape[0]
        if (d is None) == (p is None):
            raise ValueError("give exactly one of d (subspace dimension) or p (= n - d)")
        if d is not None:
            d = as_int(d, "d", minimum=1, maximum=n - 1, maximum_is="n - 1")
            p = n - d
        return cls(arr, p, subspace)

    @classmethod
    @single_blas()
    def synthetic(
        cls,
        n: int = 100,
        d: int = 10,
        n_inliers: int = 1500,
        n_outliers: int = 3500,
        seed=None,
        noise: float = 0.0,
    ) -> DPCP:
        """The paper's instance (Section 5.1): S Haar on St(n, d); inliers S g/||g|| with
        g ~ N(0, I_d); outliers o/||o|| with o ~ N(0, I_n); columns randomly permuted;
        p = n - d.

        The paper writes the inliers as Y = S R with R in St(d, m_1) and the outliers as
        O in St(n, m_2) "at random"; with m_1 > d and m_2 > n no such matrices have
        orthonormal columns, so this reads them as random unit-norm columns (each sample
        of norm 1, the model of the DPCP literature), not as matrices with orthonormal
        rows (which would give samples of norm about sqrt(d / m_1) and sqrt(n / m_2)).
        It is a reading: the errors of a run depend on it (docs/paper-map.md).

        ``seed`` is an int, None or a numpy.random.Generator. ``noise`` > 0 adds
        N(0, noise^2 I_n) to every inlier (drawn last, so ``noise=0`` is the paper's
        instance bit for bit): the robust-subspace model of data that lie near, not on,
        a subspace, whose minimizer is blunt at the noise's scale (docs/stepsizes.md, "A
        window without a new best cost").

        Parameters
        ----------
        n : int
            Ambient dimension (rows of Yt), at least 2.
        d : int
            Dimension of the subspace S, 1 <= d < n; X has p = n - d columns.
        n_inliers : int
            Number of inliers m_1 (points in S), at least 0.
        n_outliers : int
            Number of outliers m_2, at least 0; m = m_1 + m_2 must be positive.
        seed : int, numpy.random.Generator or None
            Randomness of the instance.
        noise : float
            Standard deviation of the Gaussian noise added to each inlier (default 0).

        Returns
        -------
        DPCP
            The instance on St(n, n - d) with S as ``subspace`` (so `error` is available)
            and ``n_inliers`` and ``n_outliers`` kept as attributes.
        """
        n = as_int(n, "n", minimum=2)
        d = as_int(d, "d", minimum=1, maximum=n - 1, maximum_is="n - 1")
        n_in = as_int(n_inliers, "n_inliers", minimum=0)
        n_out = as_int(n_outliers, "n_outliers", minimum=0)
        noise = as_positive_float(noise, "noise", allow_zero=True)
        check_array_size((n, max(n, n_in + n_out)), "n x max(n, n_inliers + n_outliers)")
        check_memory(4 * 8.0 * n * (n_in + n_out),
                     f"DPCP.synthetic: Y, n x m = {n} x {n_in + n_out},")
        if n_in + n_out == 0:
            raise ValueError("n_inliers + n_outliers must be positive")
        rng = make_rng(seed)
        s = stiefel.random_point(n, d, rng)
        g = rng.standard_normal((d, n_in))
        inl = s @ (g / np.linalg.norm(g, axis=0))
        o = rng.standard_normal((n, n_out))
        out = o / np.linalg.norm(o, axis=0)
        perm = rng.permutation(n_in + n_out)
        yt = np.concatenate([inl, out], axis=1)[:, perm]
        if noise > 0:
            yt[:, perm < n_in] += noise * rng.standard_normal((n, n_in))
        with quieted(LayoutWarning):
            # the instance is built with samples as columns: the layout check's guess
            # (fewer samples than features, m < n) does not apply to it (it told the user
            # to transpose an array they never passed; a user's audit)
            prob = cls(yt, n - d, s)
        prob.n_inliers, prob.n_outliers = n_in, n_out
        return prob

    # -- the loss: h = ||.||, s = 1/m (eq. ``eq-RSR``); oracles from `DataProblem` ----------
    def _scale(self) -> float:
        return 1.0 / self.m

    def stat_flops(self, c: int, n_blocks: int) -> float:
        """Flops of the statistics after c rows of Z^T changed: 2 m c + 2 m l.

        Parameters
        ----------
        c : int
            The number of rows of Z^T (columns of X) that changed.
        n_blocks : int
            The number of blocks l of the partition.

        Returns
        -------
        float
            The flop count.
        """
        return 2.0 * self.m * c + 2.0 * self.m * n_blocks

    def subgradient_flops(self) -> float:
        n, p = self.shape
        return 4.0 * self.m * n * p + 3.0 * self.m * p

    # -- ground truth and start -------------------------------------------------------
    @property
    def has_error(self) -> bool:
        return self.subspace is not None

    def error(self, x) -> float:
        """dist(X, S^perp), computed stably (see `subspace_distance`).

        Parameters
        ----------
        x : array_like, shape (n, p)
            The point X of St(n, p) to measure.

        Returns
        -------
        float
            The distance of X to S^perp.

        Raises
        ------
        ValueError
            When the instance has no ground-truth subspace, or ``x`` is not a finite
            matrix of shape (n, p) with orthonormal columns.
        """
        if self.subspace is None:
            raise ValueError(
                "this DPCP instance has no ground-truth subspace, so error(X) is undefined"
            )
        return subspace_distance(self.subspace, self._error_input(x))

    def _error_of_iterate(self, x: np.ndarray) -> float:
        if not self._fast_error(DPCP, "subspace"):
            return super()._error_of_iterate(x)
        return _subspace_distance(self.subspace, x)       # (checked when it was given)

    @single_blas()
    def initial_point(self, rng=None) -> np.ndarray:
        """The paper's spectral start argmin_{X in St(n,p)} ||Yt^T X||_F^2: the bottom-p
        eigenvectors of Yt Yt^T (deterministic; ``rng``, None, an int seed or a Generator as
        for `rssm.Problem.initial_point`, is checked and not used).

        Parameters
        ----------
        rng : None, int or numpy.random.Generator, optional
            Checked as for `rssm.Problem.initial_point`, not used.

        Returns
        -------
        numpy.ndarray, shape (n, p)
            The eigenvectors of the p smallest eigenvalues of Yt Yt^T, as columns (the
            first p columns of the identity when that matrix is not finite, as for data
            read with ``check_finite=False``).
        """
        start_rng(rng)
        n, p = self.shape
        # eigh of the n x n scatter matrix: O(m n^2 + n^3) once, before the solver starts.
        # One BLAS thread: the same start on every machine (and for every store of the
        # same partition: the gram is summed chunk by chunk).
        gram = self._store.gram()
        if not np.isfinite(gram).all():
            # data read with check_finite=False holds NaN or Inf: no spectral start exists;
            # any point will do, the run stops at once with "f(x0) is not finite"
            return np.eye(n, p)
        with one_blas_thread():
            w, v = np.linalg.eigh(gram)
        return np.ascontiguousarray(v[:, :p])

    def reference_stepsize(self):
        """The paper's schedule (Section 5.1), `PaperSchedule.dpcp`; not the default."""
        return PaperSchedule.dpcp()

    def __repr__(self) -> str:
        n, p = self.shape
        return f"DPCP(n={n}, p={p}, m={self.m}, ground_truth={self.has_error})"
