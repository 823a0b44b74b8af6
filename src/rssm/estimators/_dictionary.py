"""`OrthogonalDictionaryLearning`: orthogonal dictionary learning (ODL, Section 5.2).

For samples y_j (rows of X) the estimator solves

    min_{Q in St(n, p)} ||Y^T Q||_1 = sum_j ||Q^T y_j||_1

with rssm's solvers (`rssm.problems.ODL`). With p = n, Q is an orthogonal dictionary
(Y = Q S with S sparse), its columns the atoms; the codes of a sample y are Q^T y exactly.
"""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.utils.validation import check_array, check_is_fitted

import rssm
from rssm._validation import InvalidValue, library_stacklevel, quieted
from rssm.data import LayoutWarning, is_out_of_core
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
from rssm.problems import ODL
from rssm.threads import single_blas

__all__ = ["OrthogonalDictionaryLearning"]

TRANSFORM_ALGORITHMS = (None, "threshold", "omp")
#: A partial dictionary whose atoms hold less than this fraction of the energy that p
#: orthonormal directions drawn at random hold on average (p / n of it) gets a warning.
LOW_ENERGY = 0.5


class OrthogonalDictionaryLearning(ClassNamePrefixFeaturesOutMixin, TransformerMixin,
                                   SolverMixin, BaseEstimator):
    """Orthogonal dictionary learning: an orthogonal basis in which the samples are sparse.

    Minimizes ||Y^T Q||_1 over Q with orthonormal columns (Section 5.2 of the paper;
    `rssm.problems.ODL`), with RSSM or RSM. Unlike `sklearn.decomposition.DictionaryLearning`
    the dictionary is orthogonal, so the codes need no sparse solver: the least-squares
    codes are ``X @ components_.T``, soft thresholding gives the lasso codes and keeping the k
    largest the OMP codes, all exactly.

    Parameters
    ----------
    n_components : int, default=None
        Number of atoms p, 1 <= p <= n_features; None: n_features (a complete orthogonal
        dictionary). With p < n_features the objective is least along directions where
        the data have little energy (0 along a feature that never varies), so the atoms
        may represent little of X; `fit` warns when they hold less than half the energy p
        random orthonormal directions would (p / n_features of it). Reducing the data
        first (``make_pipeline(PCA(p), OrthogonalDictionaryLearning())``) learns a
        complete dictionary among the dominant directions.
    transform_algorithm : {None, "threshold", "omp"}, default=None
        Codes of `transform`. None: ``X @ components_.T`` (exact; with a complete dictionary
        ``inverse_transform`` gives X back). "threshold": soft thresholding of those at
        ``transform_alpha``, which is the lasso solution (1/2 ||y - D^T c||^2 +
        alpha ||c||_1) for an orthogonal D. "omp": the ``transform_n_nonzero_coefs`` entries
        of largest magnitude kept per sample, the best k-term approximation for an
        orthogonal D.
    transform_alpha : float, default=1.0
        Threshold of ``transform_algorithm="threshold"``.
    transform_n_nonzero_coefs : int, default=None
        Nonzeros per sample for "omp"; None: ``max(1, n_components_ // 10)``.
    dict_init : array-like of shape (n_components, n_features), default=None
        Start of the solver: a dictionary with orthonormal rows (e.g. the DCT basis for
        image patches). None: a Haar-random start drawn from ``random_state``.
    method, n_blocks, stepsize, max_iter, tol : default=None
        Solver settings passed to `rssm.minimize` when set (None: rssm's defaults).
    random_state : int, RandomState, Generator or None, default=None
        Seed of the start (Haar random) and of the solver's block pairs. None: one int
        drawn from NumPy's global random state (scikit-learn's convention), so fits
        differ unless ``np.random.seed`` was called; an int gives the same bits every
        fit.

    Attributes
    ----------
    components_ : ndarray of shape (``n_components_``, n_features)
        The atoms (orthonormal rows), ordered by the energy of their codes on the training
        data; each row's largest entry is positive.
    n_components_ : int
        Number of atoms.
    objective_ : float
        ||Y^T Q||_1 at the solution.
    result_ : rssm.Result
        The solver's run; ``n_iter_``, ``stop_reason_`` and ``converged_`` summarize it.
    n_features_in_, feature_names_in_
        As in scikit-learn.

    Examples
    --------
    >>> import numpy as np
    >>> from rssm.estimators import OrthogonalDictionaryLearning
    >>> rng = np.random.default_rng(0)
    >>> q = np.linalg.qr(rng.standard_normal((8, 8)))[0]            # a planted dictionary
    >>> X = (rng.standard_normal((500, 8)) * (rng.random((500, 8)) < 0.2)) @ q.T
    >>> odl = OrthogonalDictionaryLearning(max_iter=200, random_state=0).fit(X)
    >>> bool(np.allclose(odl.components_ @ odl.components_.T, np.eye(8)))
    True
    >>> bool(np.allclose(odl.inverse_transform(odl.transform(X)), X))
    True
    """

    def __init__(self, n_components=None, *, transform_algorithm=None, transform_alpha=1.0,
                 transform_n_nonzero_coefs=None, dict_init=None, method=None, n_blocks=None,
                 stepsize=None, max_iter=None, tol=None, random_state=None):
        self.n_components = n_components
        self.transform_algorithm = transform_algorithm
        self.transform_alpha = transform_alpha
        self.transform_n_nonzero_coefs = transform_n_nonzero_coefs
        self.dict_init = dict_init
        self.method = method
        self.n_blocks = n_blocks
        self.stepsize = stepsize
        self.max_iter = max_iter
        self.tol = tol
        self.random_state = random_state

    def _check_transform_params(self, p: int | None = None) -> int | None:
        """Check the transform's parameters (in fit too, so that a wrong one surfaces where
        it is set, not at scoring time in a grid search); return OMP's number of nonzero
        codes for ``p`` atoms (None for the other algorithms or without ``p``)."""
        name = type(self).__name__
        if self.transform_algorithm not in TRANSFORM_ALGORITHMS:
            raise ValueError(f"{name}: transform_algorithm must be None, 'threshold' or 'omp', "
                             f"got {self.transform_algorithm!r}")
        if self.transform_algorithm == "threshold":
            check_float(self.transform_alpha, "transform_alpha", name, open_lo=False)
        if self.transform_algorithm != "omp" or p is None:
            return None
        if self.transform_n_nonzero_coefs is None:
            return max(1, p // 10)
        return check_int(self.transform_n_nonzero_coefs, "transform_n_nonzero_coefs", 1, p,
                         name)

    @interruptible_fit
    @single_blas()
    def fit(self, X, y=None):
        """Learn the dictionary from X (n_samples, n_features); ``y`` is ignored.

        X may be an in-memory array or an out-of-core one (a memory-mapped ``.npy`` file,
        an h5py or Zarr dataset, a Dask array), which is streamed, never read whole.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            The samples, one per row.
        y : None
            Ignored.

        Returns
        -------
        self : OrthogonalDictionaryLearning
            The fitted estimator.
        """
        X = check_X(self, X, reset=True)
        m, n = X.shape
        name = type(self).__name__
        p = n if self.n_components is None else check_int(
            self.n_components, "n_components", 1, n, name, " (the number of atoms) or None")
        self._check_transform_params(p)
        data = rssm.data.samples(X, check_finite=True) if is_out_of_core(X) else X.T
        with quieted(LayoutWarning):
            # The layout is the estimator's own (one sample per row, passed transposed):
            # ODL's guess from few samples (m < n) does not apply to it.
            try:
                problem = ODL(data, p)
            except InvalidValue as exc:
                if exc.argument != "y":
                    raise
                # (in the estimator's words: ODL's "y" is X here, and "X" the dictionary)
                raise ValueError(f"{name}: X is all zeros: every orthogonal dictionary fits "
                                 "it equally, so there is nothing to learn") from None
        x0 = None
        if self.dict_init is not None:
            init = check_array(self.dict_init, dtype=np.float64, input_name="dict_init")
            if init.shape != (p, n):
                raise ValueError(f"{name}: dict_init must have shape (n_components, n_features) "
                                 f"= {(p, n)}, got {init.shape}")
            if np.abs(init @ init.T - np.eye(p)).max() > 1e-6:
                raise ValueError(f"{name}: dict_init must have orthonormal rows (|D D^T - I| "
                                 "<= 1e-6)")
            x0 = np.ascontiguousarray(init.T)
        res = self._run(problem, x0, random_start=x0 is None)
        q = res.x
        energy = np.zeros(p)
        total = 0.0
        for _, _, blk in row_chunks(X):
            c = blk @ q
            energy += np.einsum("ij,ij->j", c, c)
            total += float(np.einsum("ij,ij->", blk, blk))
        if p < n and total > 0 and energy.sum() < LOW_ENERGY * (p / n) * total:
            # min ||Y^T Q||_1 over a partial Q is least where the data have least energy
            # (0 along a feature that never varies): the atoms then say little about X.
            warnings.warn(
                f"{name}: the {p} atoms hold {energy.sum() / total:.2%} of the data's energy "
                f"(||X Q||_F^2 / ||X||_F^2), where {p} orthonormal directions drawn at random "
                f"hold {p / n:.2%} on average: a partial orthogonal dictionary minimizes "
                "||X Q||_1, which is least along directions where the data have little "
                "energy. To learn sparse atoms among the data's dominant directions, reduce "
                f"the data first (e.g. make_pipeline(PCA({p}), {name}()), a complete "
                "dictionary there), or use OrthogonalSparsePCA",
                UserWarning, stacklevel=library_stacklevel())
        order = np.argsort(-energy, kind="stable")
        self.components_ = flip_signs(q[:, order].T)
        self.n_components_ = p
        self.objective_ = float(res.fun)
        return self

    @property
    def _n_features_out(self) -> int:
        return self.n_components_

    def transform(self, X):
        """Codes of X in the dictionary (see ``transform_algorithm``).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            The samples, one per row (in memory or out of core, as for `fit`).

        Returns
        -------
        ndarray of shape (n_samples, ``n_components_``)
            The codes.
        """
        check_is_fitted(self)
        self._check_transform_params()
        X = check_X(self, X, reset=False)
        return map_rows(X, self._codes, self.n_components_)

    def _codes(self, blk: np.ndarray) -> np.ndarray:
        c = blk @ self.components_.T
        if self.transform_algorithm == "threshold":
            a = float(self.transform_alpha)
            return np.sign(c) * np.maximum(np.abs(c) - a, 0.0)
        if self.transform_algorithm == "omp":
            p = self.n_components_
            k = self._check_transform_params(p)
            if k < p:
                drop = np.argpartition(np.abs(c), p - k, axis=1)[:, : p - k]
                np.put_along_axis(c, drop, 0.0, axis=1)
        return c

    def inverse_transform(self, X):
        """Samples from codes: ``X @ components_``.

        Parameters
        ----------
        X : array-like of shape (n_samples, ``n_components_``)
            Codes, as returned by `transform`.

        Returns
        -------
        ndarray of shape (n_samples, n_features)
            The samples.
        """
        check_is_fitted(self)
        z = check_array(X, dtype=np.float64)
        if z.shape[1] != self.n_components_:
            raise ValueError(f"X has {z.shape[1]} columns, but {type(self).__name__} has "
                             f"n_components_ = {self.n_components_}")
        return z @ self.components_
