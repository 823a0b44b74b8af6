"""`OrthogonalSparsePCA`: sparse PCA with orthonormal loadings, in ManPG's form.

    min_{V in St(n, r)} -tr(V^T Sigma V) + mu ||V||_1

(Chen, Ma, So and Zhang, 2020; `rssm.problems.SparsePCA`), with Sigma the correlation
matrix of the training data (ManPG's preprocessing: centred columns scaled to unit norm)
or, with ``normalize=False``, its covariance matrix. The objective depends on the data
only through Sigma = A^T A, so the solver gets A itself (m x n) when m <= n and otherwise
an n x n square root of Sigma (the same objective, cheaper oracles); either way the data
are read once or twice, a chunk of samples at a time.
"""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.utils.validation import check_array, check_is_fitted

from rssm._validation import library_stacklevel
from rssm.estimators._base import (
    SolverMixin,
    check_float,
    check_int,
    check_X,
    flip_signs,
    interruptible_fit,
    map_rows,
    row_chunks,
)
from rssm.problems import SparsePCA
from rssm.threads import single_blas

__all__ = ["OrthogonalSparsePCA"]

#: With ``normalize=False``, a covariance whose largest variance exceeds 2^SCALE_ABOVE (or
#: falls below 2^-SCALE_ABOVE) is divided (multiplied) by a power of 2, and mu with it, for
#: the solver (``result_`` is in those units).
SCALE_ABOVE = 256


class OrthogonalSparsePCA(ClassNamePrefixFeaturesOutMixin, TransformerMixin, SolverMixin,
                          BaseEstimator):
    """Sparse principal components with exactly orthonormal loadings (ManPG's form).

    Minimizes -tr(V^T Sigma V) + mu ||V||_1 over V in St(n_features, n_components) with
    RSSM or RSM (`rssm.problems.SparsePCA`). `sklearn.decomposition.SparsePCA` solves a
    different problem (a sparse dictionary for the data, whose loadings need not be
    orthogonal); here the loadings are orthonormal, so the scores ``X @ components_.T`` are
    plain projections and `inverse_transform` is their transpose.

    Parameters
    ----------
    n_components : int, default=None
        Number of loading vectors r, 1 <= r <= n_features; None: n_features (as
        scikit-learn's SparsePCA). With a complete basis (r = n_features) the variance term
        -tr(V^T Sigma V) is the same for every V, so the fit returns the sparsest
        orthonormal basis, a signed permutation of the identity (a UserWarning says so):
        set r < n_features.
    mu : float, default=0.2
        Weight mu > 0 of the l1 penalty (rssm.problems.SparsePCA's default; with
        ``normalize=True`` Sigma is a correlation matrix, trace n_features).
    normalize : bool, default=True
        True: Sigma is the correlation matrix (ManPG's preprocessing; ``scale_`` holds the
        standard deviations). False: the covariance matrix (1/n_samples) A^T A of the
        centred data, in the data's units. A column whose entries lie within
        `CONSTANT_ULPS` units in the last place of each other is constant (no loading,
        scale 1). After a ``StandardScaler`` pass False: the data have unit variance
        already, and a constant column it centred to rounding level (about 1e-17) would
        be scaled up to unit variance.
    zero_tol : float, default=1e-5
        Loadings below this magnitude are set to exactly 0 in ``components_`` (a subgradient
        method leaves them at the level of its last steps; `rssm.problems.SparsePCA` counts
        them as zeros at the same tolerance). The rows stay orthonormal to about
        ``zero_tol``. In [0, 1); a value that would set every entry of a loading to 0 is
        refused.
    method, n_blocks, stepsize, max_iter, tol : default=None
        Solver settings passed to `rssm.minimize` when set (None: rssm's defaults).
    random_state : int, RandomState, Generator or None, default=None
        Seed of the block pairs of RSSM (``method="rssm"``); the default method, RSM, and
        the start (the PCA solution) draw nothing, so it changes nothing there. None: one
        int drawn from NumPy's global random state (scikit-learn's convention).

    Attributes
    ----------
    components_ : ndarray of shape (``n_components_``, n_features)
        Sparse orthonormal loadings (rows), ordered by the variance of their scores,
        v^T Sigma v (largest first); each row's largest entry is positive.
    explained_variance_ : ndarray of shape (``n_components_``,)
        Adjusted variance of the components (Zou, Hastie and Tibshirani, 2006): the squared
        diagonal of R in the QR factorization of the training scores, over n_samples - 1,
        so that variance shared by correlated scores is counted once (it depends on the
        order of the rows and need not decrease along it).
    explained_variance_ratio_ : ndarray of shape (``n_components_``,)
        ``explained_variance_`` over the total variance of the (scaled) training data.
    mean_, scale_ : ndarray of shape (n_features,)
        Column means and, with ``normalize=True``, standard deviations (ones otherwise;
        constant columns get 1).
    n_components_ : int
    result_ : rssm.Result
        The solver's run; ``n_iter_``, ``stop_reason_`` and ``converged_`` summarize it.
        (With ``normalize=False`` and a largest variance above 2^256, about 1e77, or below
        2^-256, the run is on Sigma and mu scaled by one power of 2, so that its squares
        stay finite and normal;
        ``result_.fun`` is in those units, the loadings are the same.)
    n_features_in_, feature_names_in_
        As in scikit-learn.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.datasets import load_breast_cancer
    >>> from rssm.estimators import OrthogonalSparsePCA
    >>> X = load_breast_cancer().data
    >>> spca = OrthogonalSparsePCA(3, mu=0.5, random_state=0).fit(X)
    >>> spca.components_.shape
    (3, 30)
    >>> bool(np.abs(spca.components_ @ spca.components_.T - np.eye(3)).max() < 1e-4)
    True
    """

    def __init__(self, n_components=None, *, mu=0.2, normalize=True, zero_tol=1e-5,
                 method=None, n_blocks=None, stepsize=None, max_iter=None, tol=None,
                 random_state=None):
        self.n_components = n_components
        self.mu = mu
        self.normalize = normalize
        self.zero_tol = zero_tol
        self.method = method
        self.n_blocks = n_blocks
        self.stepsize = stepsize
        self.max_iter = max_iter
        self.tol = tol
        self.random_state = random_state

    @interruptible_fit
    @single_blas()
    def fit(self, X, y=None):
        """Fit the sparse loadings to X (n_samples, n_features); ``y`` is ignored.

        X may be an in-memory array or an out-of-core one (a memory-mapped ``.npy`` file,
        an h5py or Zarr dataset, a Dask array), which is read a chunk of samples at a time.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            The samples, one per row.
        y : None
            Ignored.

        Returns
        -------
        self : OrthogonalSparsePCA
            The fitted estimator.
        """
        X = check_X(self, X, reset=True)
        m, n = X.shape
        name = type(self).__name__
        r = n if self.n_components is None else check_int(
            self.n_components, "n_components", 1, n, name, " (the number of loadings) or None")
        mu = check_float(self.mu, "mu", name)
        zero_tol = check_float(self.zero_tol, "zero_tol", name, open_lo=False, hi=1.0)
        if not isinstance(self.normalize, (bool, np.bool_)):
            raise ValueError(f"{name}: normalize must be True or False, got {self.normalize!r}")

        if m == 1:
            raise ValueError(f"{name}: one sample (n_samples = 1) is 0 once centred, which "
                             "leaves no variance to explain; fit needs n_samples >= 2")
        if r == n >= 2:
            # a data scientist's audit: the default (None) on a 10000 x 50 table took 32 s
            # to return a signed permutation of the identity, without a word
            warnings.warn(
                f"{name}: n_components = n_features = {n}"
                + (" (n_components=None)" if self.n_components is None else "")
                + ": with a complete basis the explained variance is the same for every "
                "basis, so the fit returns the sparsest one, a signed permutation of the "
                "identity; set n_components < n_features",
                UserWarning, stacklevel=library_stacklevel())
        mean = np.zeros(n)
        lo = np.full(n, np.inf)
        hi = np.full(n, -np.inf)
        for _, _, blk in row_chunks(X):
            mean += blk.sum(axis=0)
            np.minimum(lo, blk.min(axis=0), out=lo)
            np.maximum(hi, blk.max(axis=0), out=hi)
        mean /= m
        if m <= n:  # A itself is the smaller matrix: at most n x n entries
            a = np.asarray(X, dtype=np.float64) - mean
            gram = a.T @ a
        else:
            a = None
            gram = np.zeros((n, n))
            for _, _, blk in row_chunks(X):
                c = blk - mean
                gram += c.T @ c
        var = np.maximum(np.diag(gram), 0.0) / m
        # A constant column whose value binary cannot hold (0.1) keeps a rounding residue
        # of about eps |mean| once centred: scaled by its own std, that residue became a
        # unit-variance feature, a loading landed on it and a change of 1e-9 in it moved a
        # score by 2e6 (an audit). A column whose entries are all equal is constant:
        # zeroed, scale 1 (a tolerance on the variance zeroed real ones: timestamps of
        # 1.7e9 s spread over 0.2 s); so is one whose entries lie within `CONSTANT_ULPS`
        # units in the last place of each other (a user's audit: a column of 0.3 and
        # 0.1 + 0.2, one unit apart, became a unit-variance feature that took a whole
        # loading; the timestamps span 4e5 units of 1.7e9). Read from the range, not from
        # the variance, whose rounding grows with the number of samples summed.
        const = (lo == hi) | (hi - lo <= CONSTANT_ULPS * np.spacing(
            np.maximum(np.abs(lo), np.abs(hi))))
        if np.any(const):
            gram[const, :] = 0.0
            gram[:, const] = 0.0
            var[const] = 0.0
            if a is not None:
                a[:, const] = 0.0
        std = np.sqrt(var)
        scale = np.where(std > 0, std, 1.0) if self.normalize else np.ones(n)
        # Sigma = D^-1 G D^-1 / m with D the scale: the correlation or covariance matrix.
        d = 1.0 / (scale * np.sqrt(m))
        sigma = gram * np.outer(d, d)
        # With normalize=False Sigma carries the square of the data's scale and the
        # subgradient's squared norm its fourth power: data of 1e100 overflowed at the
        # first iteration (non_finite). f and mu scaled by one power of 2 have the same
        # minimizers and, rounding being exact, the same iterates (every rule's gamma
        # scales back), so the solver runs on Sigma / 4^h and mu / 4^h there (scaled
        # before eigh, which rescales large matrices by its own factors).
        top = float(np.max(np.diag(sigma)))
        far = top > 2.0**SCALE_ABOVE or top < 2.0**-SCALE_ABOVE   # (tiny data underflowed)
        half = (int(np.frexp(top)[1]) + 1) // 2 if far else 0
        if a is not None:
            data = np.ldexp(a * d, -half)
        else:
            w, v = np.linalg.eigh(np.ldexp(sigma, -2 * half))
            data = np.sqrt(np.maximum(w, 0.0))[:, None] * v.T  # R^T R = Sigma / 4^half
        if not np.any(gram):
            # (scikit-learn's SparsePCA returns zero loadings here; zero columns would not
            # be orthonormal, and any orthonormal ones explain the same nothing)
            raise ValueError(f"{name}: every feature of X is constant (no variance once "
                             "centred), so there is no variance to explain; fit needs at "
                             "least one feature that varies")
        res = self._run(SparsePCA(data, r, float(np.ldexp(mu, -2 * half))))
        v = res.x.copy()
        top = np.abs(v).max(axis=0)
        if np.any(top < zero_tol):
            j = int(np.argmin(top))
            raise ValueError(f"{name}: zero_tol={zero_tol:g} would set every entry of loading "
                             f"{j} to 0 (its largest is {top[j]:.3g}); use a smaller zero_tol")
        v[np.abs(v) < zero_tol] = 0.0
        var = np.einsum("ij,ik,kj->j", v, sigma, v)
        # Largest variance first; variances equal to 1e-10 (relative) are a tie, broken by
        # the feature of each loading's largest entry (a user's audit: two unit loadings
        # of variance exactly 1 on a correlation matrix came in either order depending on
        # rounding, i.e. on whether the data went through a StandardScaler first, and the
        # order-dependent explained_variance_ratio_ read 0.068 or 0.21 for the second)
        level = np.round(var / max(float(var.max()), np.finfo(float).tiny), 10)
        order = np.lexsort((np.abs(v).argmax(axis=0), -level))
        self.components_ = flip_signs(v[:, order].T)
        self.n_components_ = r
        self.mean_, self.scale_ = mean, scale
        # Adjusted variance: Z^T Z = m V^T Sigma V (Z the training scores); its Cholesky
        # factor is the R of Z's QR factorization.
        ztz = m * (self.components_ @ sigma @ self.components_.T)
        dof = max(m - 1, 1)
        self.explained_variance_ = _adjusted(ztz) / dof
        self.explained_variance_ratio_ = self.explained_variance_ / max(
            m * float(np.trace(sigma)) / dof, np.finfo(float).tiny)
        return self

    @property
    def _n_features_out(self) -> int:
        return self.n_components_

    def transform(self, X):
        """Scores: ``((X - mean_) / scale_) @ components_.T``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            The samples, one per row (in memory or out of core, as for `fit`).

        Returns
        -------
        ndarray of shape (n_samples, ``n_components_``)
            The scores.
        """
        check_is_fitted(self)
        X = check_X(self, X, reset=False)
        return map_rows(X, lambda b: ((b - self.mean_) / self.scale_) @ self.components_.T,
                        self.n_components_)

    def inverse_transform(self, X):
        """Data from scores: ``(X @ components_) * scale_ + mean_``.

        Parameters
        ----------
        X : array-like of shape (n_samples, ``n_components_``)
            Scores, as returned by `transform`.

        Returns
        -------
        ndarray of shape (n_samples, n_features)
            The data.
        """
        check_is_fitted(self)
        z = check_array(X, dtype=np.float64)
        if z.shape[1] != self.n_components_:
            raise ValueError(f"X has {z.shape[1]} columns, but {type(self).__name__} has "
                             f"n_components_ = {self.n_components_}")
        return (z @ self.components_) * self.scale_ + self.mean_


#: A column of `OrthogonalSparsePCA`'s data whose entries all lie within this many units in
#: the last place of its largest magnitude is constant (its spread is rounding: 0.3 and
#: 0.1 + 0.2), zeroed and left unscaled, as one of equal entries.
CONSTANT_ULPS = 64


def _adjusted(ztz: np.ndarray) -> np.ndarray:
    """diag(R)^2 for R^T R = ztz, by a pivot-free Cholesky that tolerates rank deficiency
    (a column already explained by the previous ones gets 0)."""
    k = ztz.shape[0]
    out = np.zeros(k)
    rem = ztz.astype(np.float64, copy=True)
    for j in range(k):
        piv = rem[j, j]
        if piv <= 1e-13 * max(ztz[j, j], np.finfo(float).tiny):
            continue
        out[j] = piv
        col = rem[j + 1:, j] / np.sqrt(piv)
        rem[j + 1:, j + 1:] -= np.outer(col, col)
    return out
