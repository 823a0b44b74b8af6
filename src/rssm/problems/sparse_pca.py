"""Sparse PCA in the form used by ManPG (Chen, Ma, So and Zhang, 2020):

f(X) = -tr(X^T A^T A X) + mu ||X||_1  over St(n, r),

A (m x n) with centred columns. The smooth part has a Lipschitz gradient, so f is weakly
convex, and f = sum_j h(X^T a_j) + mu ||X||_1 with h(z) = -||z||^2 over the rows a_j of
A: a `CompositeProblem`, whose incremental oracle makes an RSSM iteration cost
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
    check_bool,
    make_rng,
)
from rssm.data.chunked import ChunkedData, as_rows_matrix, is_out_of_core
from rssm.data.store import InMemory, Standardized, check_feature_norms, one_blas_thread
from rssm.problem import start_rng
from rssm.problems.composite import CompositeProblem, EntrywiseLoss, signed_permutation_distance
from rssm.stepsizes import Geometric
from rssm.threads import single_blas

__all__ = ["SparsePCA"]

#: Entries of X below this magnitude count as zero in `SparsePCA.sparsity`.
ZERO_TOL = 1e-5
#: The default rule's decay per epoch (`SparsePCA.default_stepsize`) and the budget it
#: needs (`SparsePCA.default_max_epochs`).
DEFAULT_DECAY = 0.993
DEFAULT_EPOCHS = 20000
#: The largest sum of squares ||A||_F^2 accepted: the subgradient's norm is at most about
#: 2 ||A||_F^2, and its square must stay finite (measured on 40 x 12 data: runs from a
#: random start lost their precision from ||A||_F^2 = 3e154 and overflowed from 3e155).
TOTAL_VARIANCE_MAX = 1e152
_INF = " (entries that are infinite, or whose squares overflow)"


class SparsePCA(CompositeProblem):
    """Sparse PCA: min -tr(X^T A^T A X) + mu ||X||_1 over St(n, r) (ManPG's form).

    Parameters
    ----------
    a : array_like, shape (m, n)
        Data matrix, samples as rows (used as given; `from_data` centres and normalizes).
        Out-of-core arrays (a `numpy.memmap`, an h5py or Zarr dataset, a Dask array, or
        `rssm.data.samples` of one) are read a chunk of samples at a time (docs/data.md).
    r : int
        Number of loading vectors.
    mu : float
        Weight mu > 0 of the l1 penalty.
    loadings : array_like, shape (n, r), optional
        Ground-truth sparse loadings on St(n, r) (enables `error`).

    Notes
    -----
    Besides the cost, a sparse-PCA run is judged by the variance its loadings explain,
    ``explained_variance(X) = ||A X||_F^2 / ||A||_F^2`` (X has orthonormal columns), and
    by its ``sparsity(X)``, the fraction of entries below 1e-5; `summary` gives all three.
    """

    name = "sparse_pca"

    def __init__(self, a, r: int, mu: float = 0.2, loadings=None):
        data = a if isinstance(a, (Standardized, InMemory)) else as_rows_matrix(a, "a")
        mu = as_positive_float(mu, "mu")
        super().__init__(data, r, EntrywiseLoss.neg_square(), l1_penalty=mu,
                         name="sparse_pca", p_name="r", y_name="a")
        self.mu = mu
        self._total_var = self._store.sum_squares()
        if self._total_var == 0:
            # f(X) = mu ||X||_1 alone, and the explained variance is 0 / 0 (NaN data go
            # on to the run, which stops non_finite, as unchecked data do elsewhere)
            raise ValueError(
                "a has no variance (every entry is 0, after centring where from_data "
                "centred it: constant columns, or a single sample): sparse PCA has nothing "
                "to explain")
        if self._total_var > TOTAL_VARIANCE_MAX:     # (NaN data go on to the run, above)
            # f and its subgradient are quadratic in the data, and the step rules square
            # the subgradient: data inside the problems' range [1e-150, 1e150] overflowed
            # from a largest entry of about 1e77 on (40 x 12 data: runs from a random start
            # non_finite at iteration 0; a user's audit)
            raise InvalidValue(
                "a", f"a: the sum of the squares of its entries is {self._total_var:.3g}"
                f"{_INF if np.isinf(self._total_var) else ''}, above "
                f"{TOTAL_VARIANCE_MAX:g}; sparse PCA's cost and subgradient are "
                "quadratic in the data and their squares overflow float64 there: scale "
                "the data first (from_data scales each column to unit norm)")
        self.loadings = stiefel.as_point(loadings, "loadings", self.shape)

    @classmethod
    @single_blas()
    def from_data(cls, a, r: int, mu: float = 0.2, normalize: bool = True) -> SparsePCA:
        """ManPG's preprocessing: centre every column of ``a`` (m x n) and, when
        ``normalize``, scale it to unit Euclidean norm (constant columns are left at 0).

        Parameters
        ----------
        a : array_like, shape (m, n)
            Data matrix, samples as rows (at least two). In memory it is copied; out of
            core (as for the class) it is standardized as it is read, not copied.
        r : int
            Number of loading vectors.
        mu : float
            Weight mu > 0 of the l1 penalty.
        normalize : bool
            Scale each centred column to unit norm (default True).

        Returns
        -------
        SparsePCA
            The instance on the preprocessed data, without ground truth.
        """
        normalize = check_bool(normalize, "normalize")
        if is_out_of_core(a):
            data = a if isinstance(a, ChunkedData) else ChunkedData(a, rows_are_samples=True,
                                                                    name="a")
            return cls(_standardized(data, normalize), r, mu)
        arr = as_float_matrix(a, "a", copy=True)
        if arr.shape[0] == 1:
            raise ValueError("a has one sample (n_samples = 1), which is 0 once centred: "
                             "sparse PCA has no variance to explain")
        # a constant column's mean is its value exactly (its rounding left a residue of
        # 1e-14 that the scaling made a unit column: an audit), so the column is 0
        hi, lo = arr.max(axis=0), arr.min(axis=0)
        arr -= np.where(hi == lo, hi, arr.mean(axis=0))
        if normalize:
            with np.errstate(over="ignore", under="ignore"):
                nrm = np.linalg.norm(arr, axis=0)
            # Sums of squares leave float64's range for entries beyond about 1e154 or
            # below 1e-154 (the norm turned inf or 0 and the column came out 0): those
            # columns are measured in units of their largest entry.
            top = np.abs(arr).max(axis=0) if arr.size else np.zeros(arr.shape[1])
            bad = (top > 0) & ~((nrm > 0) & np.isfinite(nrm))
            if bad.any():
                nrm[bad] = top[bad] * np.linalg.norm(arr[:, bad] / top[bad], axis=0)
            arr /= np.where(nrm > 0, nrm, 1.0)
        return cls(arr, r, mu)

    @classmethod
    @single_blas()
    def synthetic(
        cls,
        n: int = 100,
        r: int = 5,
        m: int | None = None,
        support: int = 10,
        theta: float = 4.0,
        mu: float = 0.2,
        seed=None,
    ) -> SparsePCA:
        """A planted instance whose sparse loadings V are a strict local minimizer of f.

        Parameters
        ----------
        n : int
            Number of variables (columns of A).
        r : int
            Number of sparse loading vectors.
        m : int, optional
            Number of samples (rows of A), m >= n + 1; default max(200, n + 1) (200 for
            every n below 200, as before it followed n: ``--n 300`` was refused for the
            default m).
        support : int
            Nonzeros per loading vector; the r supports are disjoint, so
            r * support <= n.
        theta : float
            Spike strength: A^T A has eigenvalue 1 + theta on span V and eigenvalues in
            [0.5, 1] on its complement.
        mu : float
            Weight of the l1 penalty; V stays a strict local minimizer while
            mu * sqrt(support) / 2 < theta.
        seed : int, numpy.random.Generator or None
            Randomness of the instance.

        Returns
        -------
        SparsePCA
            The instance for the m x n matrix A, with V as ``loadings`` (so `error` is
            available) and ``theta`` and ``support`` kept as attributes.

        Notes
        -----
        V has entries +-1/sqrt(support) on disjoint supports. A = Q diag(sqrt(lambda)) W^T
        with W = [V, V_perp] orthogonal and Q (m x n) orthonormal with centred columns, so
        A^T A = W diag(lambda) W^T exactly. The r spikes are equal, so PCA alone determines
        only span V (any rotation V R); the l1 term selects the sparse basis V, which is a
        Riemannian critical point of f (sign(V) = sqrt(support) V lies in span V) and a strict
        local minimizer under the condition on ``mu`` above. ``error`` is the distance to V
        up to the order and signs of the columns.
        """
        n = as_int(n, "n", minimum=2)
        r = as_int(r, "r", minimum=1, maximum=n - 1, maximum_is="n - 1")
        m = max(200, n + 1) if m is None else as_int(m, "m", minimum=n + 1,
                                                      minimum_is="n + 1")
        s = as_int(support, "support", minimum=1)
        if r * s > n:
            raise ValueError(f"r * support must be <= n = {n} (disjoint supports), got {r} * {s}")
        theta = as_positive_float(theta, "theta")
        mu = as_positive_float(mu, "mu")
        rng = make_rng(seed)
        idx = rng.permutation(n)[: r * s].reshape(r, s)
        v = np.zeros((n, r))
        for k in range(r):
            v[idx[k], k] = rng.choice([-1.0, 1.0], size=s) / np.sqrt(s)
        g = rng.standard_normal((n, n - r))
        g -= v @ (v.T @ g)
        w_perp = np.linalg.qr(g)[0]
        w = np.concatenate([v, w_perp], axis=1)
        lam = np.concatenate([np.full(r, 1.0 + theta), rng.uniform(0.5, 1.0, n - r)])
        c = rng.standard_normal((m, n))
        c -= c.mean(axis=0)
        q = np.linalg.qr(c)[0]
        a = (q * np.sqrt(lam)) @ w.T
        prob = cls(a, r, mu, v)
        prob.theta, prob.support = theta, s
        return prob

    # -- ground truth and reports ---------------------------------------------------------
    @property
    def has_error(self) -> bool:
        return self.loadings is not None

    def error(self, x) -> float:
        """min over signed permutations P of ||X - V P||_F (V the planted loadings).

        Parameters
        ----------
        x : array_like, shape (n, r)
            The point X of St(n, r) to measure.

        Returns
        -------
        float
            The distance of X to V up to the order and signs of the columns (see
            `rssm.problems.signed_permutation_distance`).

        Raises
        ------
        ValueError
            When the instance has no ground-truth loadings, or ``x`` is not a finite
            matrix of shape (n, r) with orthonormal columns.
        """
        if self.loadings is None:
            raise ValueError(
                "this SparsePCA instance has no ground-truth loadings, so error(X) is undefined"
            )
        return signed_permutation_distance(self._error_input(x), self.loadings)

    def explained_variance(self, x) -> float:
        """||A X||_F^2 / ||A||_F^2: the fraction of the total variance the loadings explain.

        ``x`` must be a point of St(n, r) (to 1e-6): for other matrices the ratio is no
        fraction (``10 X`` read 54.1; a user's audit).

        Parameters
        ----------
        x : array_like, shape (n, r)
            The loadings X, a point of St(n, r).

        Returns
        -------
        float
            ||A X||_F^2 / ||A||_F^2, the fraction of the total variance explained.

        Raises
        ------
        ValueError
            When ``x`` is not a finite matrix of shape (n, r), or is off St(n, r) by more
            than 1e-6.
        """
        from rssm.stiefel import check_point

        x = self._error_input(x)
        check_point(x, atol=1e-6, name="x")
        total = 0.0
        for _, _, blk in self._store.chunks():
            z = blk.T @ x
            total += float(np.vdot(z, z))
        return total / self._total_var

    @staticmethod
    def sparsity(x, tol: float = ZERO_TOL) -> float:
        """Fraction of the entries of X with |x_ik| < tol (default 1e-5).

        Parameters
        ----------
        x : array_like
            The loadings X (any shape).
        tol : float, default=ZERO_TOL
            Entries of magnitude below ``tol`` count as zero (`ZERO_TOL`, 1e-5).

        Returns
        -------
        float
            The fraction of the entries of X below ``tol`` in magnitude, in [0, 1].
        """
        return float(np.mean(np.abs(np.asarray(x)) < tol))

    def summary(self, x) -> dict:
        """cost, explained variance, sparsity and (with ground truth) error at X.

        Parameters
        ----------
        x : array_like, shape (n, r)
            The loadings X, a point of St(n, r).

        Returns
        -------
        dict
            ``"cost"`` (f(X)), ``"explained_variance"`` (`explained_variance`),
            ``"sparsity"`` (`sparsity` with its default tolerance) and, when `has_error`,
            ``"error"`` (`error`), each a float.
        """
        out = {
            "cost": self.cost(x),
            "explained_variance": self.explained_variance(x),
            "sparsity": self.sparsity(x),
        }
        if self.has_error:
            out["error"] = self.error(x)
        return out

    @single_blas()
    def initial_point(self, rng=None) -> np.ndarray:
        """The PCA start: the top-r right singular vectors of A (deterministic; ``rng`` is
        checked and not used). O(m n^2) once, before the solver starts.

        With more components than samples (r > m, possible for `from_data`), A has at
        most m right singular vectors; the start is completed by the coordinate vectors
        they span least, orthonormalized against them (deterministic, O(n r) memory; the
        full SVD's n x n factor took 1 GB at n = 8000), so it is still on St(n, r).

        Parameters
        ----------
        rng : None, int or numpy.random.Generator, optional
            Checked as for `rssm.Problem.initial_point`, not used.

        Returns
        -------
        numpy.ndarray, shape (n, r)
            The top-r right singular vectors of A as columns (out of core: the top-r
            eigenvectors of A^T A; the first r columns of the identity when A^T A is not
            finite).
        """
        start_rng(rng)
        if not isinstance(self._store, InMemory):
            # out of core: the top-r eigenvectors of A^T A (its right singular vectors)
            gram = self._store.gram()
            if not np.isfinite(gram).all():   # NaN or Inf read with check_finite=False:
                return np.eye(*self.shape)    # the run stops at "f(x0) is not finite"
            with one_blas_thread():
                _, v = np.linalg.eigh(gram)
            return np.ascontiguousarray(v[:, ::-1][:, : self.p])
        return self._spectrum()[1].copy()

    def _spectrum(self) -> tuple[np.ndarray, np.ndarray]:
        """(the singular values of A, its top-r right singular vectors as columns) of one
        thin SVD, kept: the PCA start and the default step's scale (`_top_sq_singular`)
        read the same decomposition, where they made two (a user's audit: at n =
        1000-2000, m = n + 1, 14-19 % of a default call went to them, before the solver's
        clock). The scale is taken from it also where the start is not used (``x0=``
        given), so that it does not depend on whether the start was computed first; a
        thin SVD with vectors costs about 1.6 times the singular values alone there."""
        cached = getattr(self, "_svd", None)
        if cached is None:
            a = self.yt.T
            with one_blas_thread():
                # thin: with r > m the n x n factor of a full SVD took O(n^2) memory, 1 GB
                # at n = 8000 (a user's review); the start is completed below
                _, sv, vt = np.linalg.svd(a, full_matrices=False)
            v = vt[: self.p].T
            if v.shape[1] < self.p:
                v = _completed(v, self.p)
            cached = self._svd = (sv, np.ascontiguousarray(v))
        return cached

    def _top_sq_singular(self) -> float:
        """||A||_2^2: the largest singular value of `_spectrum`'s SVD in memory (no second
        decomposition), as `DataProblem`'s out of core."""
        if not isinstance(self._store, InMemory):
            return super()._top_sq_singular()
        sv = self._spectrum()[0]
        return float(sv[0]) ** 2 if sv.size else 0.0

    def default_stepsize(self):
        """The rule `rssm.minimize` uses when none is given: Geometric(2 / ||A||_2^2, 0.993
        per epoch), not ``"auto"`` (unless the instance was built with its own
        ``stepsize=``).

        From the PCA start a rule that shortens its steps as soon as they fail freezes
        short of the loadings: `rssm.stepsizes.Auto` with RSSM ends at error 1.0-1.5
        (seeds 0-4, 10000 iterations; with RSM it reaches them, in a median 1623
        iterations on seeds 0-9, since the solver loop counts its freezes and the rule
        then decays geometrically). A slowly decaying geometric step pushes through for
        both methods: this one reaches error < 2e-5 on seeds 0-4 with RSM and RSSM
        (l = 2, 5) and stops `converged` (tests/test_builtin_defaults.py). The decay was
        0.99 per epoch until a fit of standardized breast cancer (5 loadings, mu = 0.3)
        froze on it with dense loadings and ended on its budget; with 0.993 all 18 fits of
        breast cancer, wine and digits (mu = 0.1-2) stop `converged`, 15 of them at a lower
        f, in 1.4 times the iterations. At smaller penalties the decay can still freeze
        (the solver loop then moves X to a lower point and counts the freeze): the rule
        starts again from its first step with beta <- sqrt(beta) (``restart=True``), so
        the fits of breast cancer and digits at mu = 0.02-0.04 stop `converged` on 2 of 3
        (without the restart on none), at a lower f on all 3; runs without a freeze are
        the same bits (the other 15 of that grid, and seeds 0-4 of `synthetic` with RSM
        and RSSM, l = 5). With mu0 = 1 / ||A||_2^2 (`reference_stepsize`)
        RSSM with l = 5 stopped at error 0.2 on one seed of 10. ``stepsize="auto"`` still
        selects `Auto`. At larger penalties the verdict comes short of the planted
        loadings: mu = 0.5, 1.0, 1.5 end `converged` at errors 5e-5, 3e-4-5e-4 and
        2e-3-2.6e-3 (seeds 0-2), f up to 1e-5 of f above f(V); ``stepsize="auto"`` does
        no better (docs/convergence.md, "Sparse PCA at larger penalties").
        """
        own = super().default_stepsize()
        if own is not None:
            return own
        top = self._top_sq_singular()
        if not top > 0:           # A = 0 (e.g. one centred sample): f is mu ||X||_1 alone
            from rssm.stepsizes import make_auto

            return make_auto()
        return Geometric(2.0 / top, DEFAULT_DECAY, restart=True)

    def default_max_epochs(self) -> int | None:
        """20000 epochs when the default rule is this problem's Geometric(..., 0.993): its
        step shrinks by 1e-12 in about 3900 epochs, and on real data the run then needs
        the restarts after a freeze: on scikit-learn's breast cancer, wine and digits
        tables, standardized, 5 loadings, mu = 0.1-2, RSM stops `converged` after
        2200-19600 iterations on 11 of 12 (digits, mu = 0.3: 38475, and at the
        estimators' default mu = 0.2: 37352, beyond the budget), where the verdicts
        the bundle check's first 24 trial points let through came after 1900-3800, at f up
        to 0.4 % higher (docs/convergence.md, "Near a vertex"); the planted instances
        after 3536 (RSM) and 9490 (RSSM, l = 5). None (1000 epochs) for an instance built
        with its own ``stepsize=``."""
        return None if super().default_stepsize() is not None else DEFAULT_EPOCHS

    def reference_stepsize(self):
        """Geometric(mu0 = 1 / ||A||_2^2, beta = 0.99 per epoch).

        The l1 term is sharp (f grows linearly off the planted supports), so a
        geometrically decaying step converges linearly; 1/||A||_2^2 is the inverse
        curvature scale of the quadratic term.
        """
        return Geometric(1.0 / self._top_sq_singular(), 0.99)

    def __repr__(self) -> str:
        n, p = self.shape
        return f"SparsePCA(n={n}, r={p}, m={self.m}, mu={self.mu:g}, ground_truth={self.has_error})"


def _completed(v: np.ndarray, r: int) -> np.ndarray:
    """``v`` (n x k orthonormal columns, k < r <= n) completed to r orthonormal columns,
    one at a time: the coordinate vector the columns so far span least (the first among
    equals), its part orthogonal to them, normalized. Deterministic, O(n r) memory (the
    null space of A, where the start has more columns than A has samples). Its residual
    has squared norm at least 1 - j / n > 0 with j columns so far (their leverages sum to
    j), so every pick is a new direction; picking k coordinates at once did not ensure
    that (a review: with duplicated features the picks' span met span(v), and the start
    was off the manifold by 1)."""
    n, k = v.shape
    q = np.empty((n, r))
    q[:, :k] = v
    lev = np.einsum("ij,ij->i", v, v)
    for j in range(k, r):
        i = int(np.argmin(lev))
        e = -(q[:, :j] @ q[i, :j])
        e[i] += 1.0
        e -= q[:, :j] @ (q[:, :j].T @ e)        # again: orthogonal to rounding
        e /= np.linalg.norm(e)
        q[:, j] = e
        lev += e * e
    return q


def _standardized(data: ChunkedData, normalize: bool):
    """``data`` (m x n, out of core) with centred (and scaled) features: a lazy Dask array
    for Dask data (the oracle stays on the cluster), else a `Standardized` store."""
    if data.kind != "dask":
        return Standardized(data, normalize)
    import dask
    import dask.array as da

    src = data.source if data.rows_are_samples else data.source.T
    src = src.astype(np.float64)
    if 0 in src.chunks[0]:
        # zero-length chunks (boolean indexing, then compute_chunk_sizes) broke Dask's
        # reductions below; dropping them keeps every other chunk as it is
        src = src.rechunk({0: tuple(c for c in src.chunks[0] if c) or (0,)})
    hi, lo = src.max(axis=0), src.min(axis=0)
    mean = da.where(hi == lo, hi, src.mean(axis=0))     # (a constant feature: exactly 0)
    cen = src - mean
    if normalize:
        with np.errstate(over="ignore", under="ignore"):
            nrm, top = dask.compute((cen * cen).sum(axis=0) ** 0.5, abs(cen).max(axis=0))
        check_feature_norms(nrm, top)
        cen = cen / np.where(nrm > 0, nrm, 1.0)
    return ChunkedData(cen, rows_are_samples=True, check_finite=False, timeout=data.timeout,
                       name="a")
