"""`RobustSubspace`: robust subspace recovery by dual principal component pursuit (DPCP).

The estimator solves the DPCP problem of Section 5.1 (eq. ``eq-RSR``, eq. (29) of the
paper; docs/paper-map.md),

    min_{B in St(n', p)} (1/m) sum_j ||B^T y_j|| / ||y_j||,    p = n' - d',

on the samples y_j scaled to unit norm (so that no sample weighs more than another, however
large), with rssm's solvers. The minimizer B spans the orthogonal complement of the inliers'
subspace; ``components_`` is an orthonormal basis of the subspace itself.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
from sklearn.base import (
    BaseEstimator,
    ClassNamePrefixFeaturesOutMixin,
    OutlierMixin,
    TransformerMixin,
)
from sklearn.utils.validation import check_array, check_is_fitted

import rssm
from rssm._validation import library_stacklevel, max_abs, shown_outside
from rssm.data import is_out_of_core
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
from rssm.problems import CompositeProblem, NormLoss
from rssm.threads import single_blas

__all__ = ["RobustSubspace", "auto_dimension"]

#: Rows of the subsample that sets the shift and the lift of ``center=True``.
SHIFT_SAMPLE = 10_000

#: Samples whose largest entry lies outside this range are scaled by a power of 2 for the
#: solver (exactly the same f; `RobustSubspace.fit`), in memory; out of core, data outside
#: `STREAM_SCALE` is refused (measured: the fit as at unit scale at 1e-148 and 1e148;
#: at 1e-149 the residuals' squares underflow, at 1e149 the weights leave their range).
SAFE_SCALE = (1e-100, 1e100)
STREAM_SCALE = (1e-145, 1e145)

#: Quantiles of the "auto" outlier threshold (see `RobustSubspace`).
AUTO_LOW, AUTO_HIGH = 0.25, 0.999
#: Distances at most this times the median sample norm count as 0 (rounding) in "auto".
EXACT = 1e-8
#: Samples this near the subspace, relative to their norm, but not on it are named by the
#: warning of "auto" when the noise scale reads 0 and they are at least NEAR_SHARE of the
#: samples (an outlier in few dimensions can lie that near by chance).
NEAR = 1e-2
NEAR_SHARE = 0.05
#: "auto" warns when the samples closer to the subspace than this fraction of the lower
#: quartile of the distances are at least NEAR_SHARE of them and 4 times the share the
#: noise model puts there (chi-square noise with 1 degree of freedom: 1.3 %; with more,
#: far less): a group that near is not the lower tail of the noise that set the quartile,
#: which outliers then set (fewer than about a quarter of the samples are inliers).
FAR_BELOW = 0.05


def auto_dimension(eigenvalues: np.ndarray, smallest: int = 1) -> int:
    """The k >= ``smallest`` that maximizes lambda_k / lambda_{k+1} (eigenvalues sorted in
    decreasing order, floored at n eps lambda_1 so that exactly low-rank data has a finite
    ratio), k <= len - 1.

    Parameters
    ----------
    eigenvalues : array-like of shape (n,)
        Eigenvalues (of a scatter matrix), in any order; n >= 2.
    smallest : int
        The least k considered, 1 <= smallest <= n - 1.

    Returns
    -------
    int
        The k of the largest gap ratio.
    """
    lam = np.asarray(eigenvalues, dtype=np.float64)
    if lam.ndim != 1 or lam.size < 2 or not np.isfinite(lam).all():
        raise ValueError("auto_dimension: eigenvalues must be a 1-D array of at least 2 finite "
                         f"numbers, got shape {lam.shape}"
                         + ("" if np.isfinite(lam).all() else " with NaN or infinite entries"))
    if (isinstance(smallest, (bool, np.bool_))
            or not isinstance(smallest, (int, np.integer))
            or not 1 <= smallest <= lam.size - 1):
        raise ValueError(f"auto_dimension: smallest must be an int in [1, {lam.size - 1}] "
                         f"(1 <= k <= len(eigenvalues) - 1), got {smallest!r}")
    lam = np.sort(lam)[::-1]
    floor = max(lam[0] * lam.size * np.finfo(float).eps, np.finfo(float).tiny)
    lam = np.maximum(lam, floor)
    ratio = lam[:-1] / lam[1:]
    return smallest + int(np.argmax(ratio[smallest - 1:]))


class RobustSubspace(ClassNamePrefixFeaturesOutMixin, OutlierMixin, TransformerMixin,
                     SolverMixin, BaseEstimator):
    """Robust subspace recovery and outlier detection by DPCP on the Stiefel manifold.

    Fits a d-dimensional subspace to data in which inliers lie near the subspace and
    outliers (up to well over half of the samples) anywhere, by dual principal component
    pursuit (eq. ``eq-RSR``) solved with RSSM or RSM. As a transformer it projects onto the
    subspace, like `sklearn.decomposition.PCA`; as an outlier detector it scores samples by
    their distance to it, like `sklearn.covariance.EllipticEnvelope`.

    Parameters
    ----------
    n_components : int or "auto", default="auto"
        Subspace dimension d, 1 <= d <= n_features - 1. ``"auto"``: the d that maximizes
        the eigenvalue ratio lambda_d / lambda_{d+1} of the scatter matrix of the samples
        scaled to unit norm (the matrix the DPCP start is computed from). Each sample weighs
        at most 1/m there, so inliers spread over a d-dimensional subspace give d large
        eigenvalues and outliers in general position a flat rest; the largest ratio marks
        the edge. It misjudges inliers whose own spectrum has a larger gap than the
        inlier/outlier edge, and data whose outliers do not fill the n_features - d
        directions off the subspace (fewer outliers than that, or fewer samples than
        features: then the largest gap is the edge of the outliers or of the samples'
        span, and a `UserWarning` says so when the samples do not span the features);
        pass an int then.
    center : bool, default=False
        False: a linear subspace through 0, the paper's model. True: an affine subspace,
        fitted in homogeneous coordinates: the samples, shifted by their coordinatewise
        median, get a constant extra coordinate c (the median distance to the shift), which
        turns a d-dimensional affine subspace into a (d+1)-dimensional linear one that DPCP
        recovers. Centring by the mean, as PCA does, would let the outliers move the
        subspace; the median shift only conditions the lift (any shift gives the same
        model). ``mean_`` is then the point of the subspace nearest to the shift. Pass
        ``n_components`` with it: on the lifted samples ``"auto"`` sees a weaker gap (the
        lift takes part of each inlier) and, where the median lies off the affine
        subspace, one dimension too many (docs/estimators.md).
    contamination : "auto" or float in (0, 1), default="auto"
        Sets ``offset_``, the threshold of `predict`. A float: the fraction of training
        samples declared outliers (``offset_`` is that percentile of the training scores).
        ``"auto"``: a sample is an outlier when its distance to the subspace exceeds
        t = q * sqrt(F^-1(0.999) / F^-1(0.25)), with q the 0.25-quantile of the training
        distances and F the chi-square distribution with nu degrees of freedom: for
        inliers with isotropic Gaussian noise of scale sigma the squared distance is
        sigma^2 chi-square(n_features - d), so t is their 0.999-quantile, with sigma
        estimated from the lower quartile, which stays among the inliers while more than a
        quarter of the samples are inliers. Noise of different scales in different
        directions (features in different units) has a heavier tail: the squared distance
        is a weighted sum of chi-square(1) variables, which Satterthwaite's approximation
        reads as a scaled chi-square with nu = (tr S)^2 / tr(S^2) degrees of freedom, S
        the second moment of the residuals (the samples' coordinates in
        ``normal_components_``) of the samples at or below the median distance, both
        traces estimated without the bias of few samples (``noise_dof_``; nu =
        n_features - d for isotropic noise, down to 1 where one direction dominates).
        Without it, unscaled wine had 52 % of its samples declared outliers (6 % with
        it; 7 % standardized). Zero samples (on every subspace) are left out of the
        quartile. When a quarter of the samples or more
        lie on the subspace exactly, sigma reads 0 and every other sample is an outlier
        (right for noise-free inliers); a `UserWarning` says so when 5 % of the samples
        or more lie within 1 % of their norm of the subspace without lying on it. When a
        quarter of the samples or fewer are inliers, the quartile is the outliers' scale
        and few samples are flagged: a `UserWarning` says so when 5 % of the samples or
        more (and 4 times what the noise model puts there) lie closer to the subspace
        than 0.05 times the quartile; pass the expected fraction then.
    method, n_blocks, stepsize, max_iter, tol : default=None
        Solver settings passed to `rssm.minimize` when set (None: rssm's defaults).
    random_state : int, RandomState, Generator or None, default=None
        Seed of the block pairs of RSSM (``method="rssm"``); the default method, RSM, and
        the spectral start draw nothing, so it changes nothing there. None: one int drawn
        from NumPy's global random state (scikit-learn's convention).

    Attributes
    ----------
    components_ : ndarray of shape (``n_components_``, n_features)
        Orthonormal basis of the subspace (rows), ordered by the scatter of the unit-norm
        samples along them; each row's largest entry is positive.
    normal_components_ : ndarray of shape (n_features - ``n_components_``, n_features)
        Orthonormal basis of its orthogonal complement (the DPCP solution).
    n_components_ : int
        The subspace dimension d.
    mean_ : ndarray of shape (n_features,)
        A point of the (affine) subspace; zeros when ``center=False``.
    offset_ : float
        ``decision_function = score_samples - offset_``.
    noise_dof_ : float
        With ``contamination="auto"``: the degrees of freedom nu of the residual noise that
        set ``offset_`` (see ``contamination``); NaN with a fraction.
    result_ : rssm.Result
        The solver's run; ``n_iter_``, ``stop_reason_`` and ``converged_`` summarize it.
        With fewer samples than features (in memory) it runs in the r coordinates of the
        samples' span, on St(r, r - d) (docs/estimators.md, "more features than
        samples").
    n_features_in_, feature_names_in_
        As in scikit-learn.

    Examples
    --------
    >>> import numpy as np
    >>> from rssm.estimators import RobustSubspace
    >>> rng = np.random.default_rng(0)
    >>> inliers = rng.standard_normal((300, 3)) @ rng.standard_normal((3, 20))
    >>> X = np.vstack([inliers, rng.standard_normal((200, 20))])  # 40% outliers
    >>> est = RobustSubspace(n_components=3, contamination=0.4, max_iter=100,
    ...                      random_state=0).fit(X)
    >>> est.components_.shape, int((est.predict(X) == -1).sum())
    ((3, 20), 200)
    """

    def __init__(self, n_components="auto", *, center=False, contamination="auto",
                 method=None, n_blocks=None, stepsize=None, max_iter=None, tol=None,
                 random_state=None):
        self.n_components = n_components
        self.center = center
        self.contamination = contamination
        self.method = method
        self.n_blocks = n_blocks
        self.stepsize = stepsize
        self.max_iter = max_iter
        self.tol = tol
        self.random_state = random_state

    # -- fit --------------------------------------------------------------------------------
    def _check_params(self, n: int) -> None:
        name = type(self).__name__
        if n < 2:
            raise ValueError(f"{name} needs n_features >= 2 (a subspace of dimension 1 <= d <= "
                             f"n_features - 1), got n_features = {n}")
        if not isinstance(self.center, (bool, np.bool_)):
            raise ValueError(f"{name}: center must be True or False, got {self.center!r}")
        if not (isinstance(self.contamination, str) and self.contamination == "auto"):
            if isinstance(self.contamination, str):
                raise ValueError(f"{name}: contamination must be 'auto' or a number in (0, 1), "
                                 f"got {self.contamination!r}")
            check_float(self.contamination, "contamination", name, lo=0.0, hi=1.0)
        if not (isinstance(self.n_components, str) and self.n_components == "auto"):
            check_int(self.n_components, "n_components", 1, n - 1, name,
                      " (the subspace dimension) or 'auto'")

    @interruptible_fit
    @single_blas()
    def fit(self, X, y=None):
        """Fit the subspace to X (n_samples, n_features); ``y`` is ignored.

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
        self : RobustSubspace
            The fitted estimator.
        """
        X = check_X(self, X, reset=True)
        m, n = X.shape
        self._check_params(n)
        if not isinstance(self.n_components, str) and m < self.n_components:
            # (scikit-learn's PCA refuses it too: the subspace is not determined)
            raise ValueError(f"{type(self).__name__}: n_components={self.n_components} needs "
                             f"at least {self.n_components} samples to determine the "
                             f"subspace, got n_samples = {m}")
        center = bool(self.center)
        shift, lift = np.zeros(n), 0.0
        if center:
            sub = np.asarray(X[:: max(1, math.ceil(m / SHIFT_SAMPLE))], dtype=np.float64)
            shift = np.median(sub, axis=0)
            lift = float(np.median(np.linalg.norm(sub - shift, axis=1))) or 1.0

        # One pass: the weights 1/(m ||y_j||) and the scatter of the unit-norm samples.
        nl = n + center
        weights = np.empty(m)
        scatter = np.zeros((nl, nl))
        top = spread = 0.0
        for lo, hi, blk in row_chunks(X):
            y = _lifted(blk, shift, lift) if center else blk
            top = max(top, max_abs(y))
            spread = max(spread, max_abs(y[:, :n]))
            norms = np.linalg.norm(y, axis=1)
            inv = np.zeros_like(norms)
            np.divide(1.0, norms, out=inv, where=norms > 0)
            weights[lo:hi] = inv / m
            yn = y * inv[:, None]
            scatter += yn.T @ yn
        if spread == 0 and m:
            # (an audit: all-zero X was fitted to an arbitrary coordinate axis, "converged"
            # at iteration 0, where the other estimators refuse it)
            raise ValueError(
                f"{type(self).__name__}: " + (
                    ("X has 1 sample (n_samples = 1)" if m == 1 else
                     "every sample of X is the same point") + ", and with center=True "
                    "every affine subspace through it fits X equally" if center else
                    "X is all zeros: every subspace fits it equally")
                + ", so there is nothing to learn")
        evals, evecs = np.linalg.eigh(scatter)
        if isinstance(self.n_components, str):
            d = auto_dimension(evals, 1 + center) - center
            rank = int(np.count_nonzero(evals > evals[-1] * nl * np.finfo(float).eps))
            if rank < nl:
                warnings.warn(
                    f"{type(self).__name__}: n_components='auto' chose d = {d}, but the "
                    f"samples span only {rank} of the {nl} dimensions"
                    f"{' (with the lift of center=True)' if center else ''} that their "
                    "scatter matrix resolves (fewer samples than features, features that "
                    "are 0, combinations of others or 1e-8 times smaller), so the "
                    "outliers cannot fill the directions off the subspace and the largest "
                    "eigenvalue gap may be the edge of the samples' span or of the outliers, "
                    "not of the inliers' subspace; pass n_components=<the subspace "
                    "dimension>",
                    UserWarning, stacklevel=library_stacklevel())
        else:
            d = int(self.n_components)
        p = n - d
        # Data or weights far from unit scale (the data inside the range the problems
        # take, [1e-150, 1e150]): the problem gets the data times 2^e and the weights
        # times 2^-e, the same f exactly, both then near the geometric mean of the two
        # scales; else the weights 1/(m ||y_j||) left their range at 1e149 and the
        # residuals' squares underflowed at 1e-149 (an audit). In memory only (a file
        # would need a scaled copy); data and weights in range are left as they are.
        e = 0
        low, high = STREAM_SCALE
        if top and is_out_of_core(X) and not low <= top <= high:
            raise ValueError(
                f"{type(self).__name__}: the largest entry of X is "
                f"{shown_outside(top, low, high)} in magnitude"
                f"{' (with the shift and lift of center=True)' if center else ''}, outside "
                f"[{low:g}, {high:g}], the range the fit takes out of core (in memory it "
                "scales such data itself); scale the data first (e.g. divide by its "
                "largest entry)")
        heaviest = float(weights.max()) if m else 0.0
        if (top and heaviest and not is_out_of_core(X)
                and not all(SAFE_SCALE[0] <= v <= SAFE_SCALE[1] for v in (top, heaviest))):
            # both the data and the weights (1 / (m ||y_j||): a sample far smaller than the
            # largest one weighs far more) in range: 2^e halves their ratio's exponent
            e = (math.frexp(heaviest)[1] - math.frexp(top)[1]) // 2
            weights = np.ldexp(weights, -e)
        data = self._problem_data(X, shift, lift, e)
        span = self._span(data, d + center)     # the linear subspace's dimension
        if span is None:
            # DPCP's spectral start (the bottom-p eigenvectors), as `DPCP.initial_point`.
            x0 = np.ascontiguousarray(evecs[:, :p])
            problem = CompositeProblem(data, p, NormLoss.norm(), sample_weights=weights,
                                       name="dpcp")
            b = self._run(problem, x0).x
        else:
            b = self._fit_in_span(data, span, scatter, weights, d + center)

        if center:  # {y : B_top^T y + lift b_last = 0}: normals U, nearest point y0
            u, s, vt = np.linalg.svd(b[:n], full_matrices=False)
            sinv = np.zeros_like(s)
            np.divide(1.0, s, out=sinv, where=s > s[0] * 1e-12)
            normal = u
            self.mean_ = shift - lift * (u @ (sinv * (vt @ b[n])))
        else:
            normal = np.linalg.qr(b)[0]
            self.mean_ = np.zeros(n)
        q = np.linalg.qr(normal, mode="complete")[0]
        comp = q[:, p:]
        # Order the basis by the scatter of the unit-norm samples along it (y0 and the lift
        # are orthogonal to it, so the scatter of the lifted samples gives it).
        compl = np.vstack([comp, np.zeros((1, d))]) if center else comp
        _, w = np.linalg.eigh(compl.T @ scatter @ compl)
        self.components_ = flip_signs((comp @ w[:, ::-1]).T)
        self.normal_components_ = flip_signs(normal.T)
        self.n_components_ = d

        dist = map_rows(X, self._dist_and_norm, 2)
        auto = isinstance(self.contamination, str)
        self.noise_dof_ = self._noise_dof(X, dist[:, 0], dist[:, 1]) if auto else math.nan
        self.offset_ = self._offset(dist[:, 0], dist[:, 1], self.noise_dof_)
        return self

    def _columns_meaning(self, p: int) -> str:
        return (f"number of directions normal to the subspace (n_features - n_components "
                f"= {p})")

    def _span(self, data, d: int) -> np.ndarray | None:
        """An orthonormal basis V (n' x r) of the span of the samples (n' x m, lifted when
        ``center``) when they have fewer dimensions than the features (in memory, r < n'),
        else None; d is the dimension of the linear subspace (d + 1 when ``center``).

        Every sample y lies in span(V), and the DPCP solution's complement (the subspace)
        does too: for any d-dimensional S, the orthonormalized projection of S onto span(V)
        captures each y at least as well. So the problem is solved in the r coordinates
        V^T y, on St(r, r - d) instead of St(n', n' - d), and the normals are completed
        by the complement of span(V) (on which every sample is 0). From the spectral
        start the complement's columns of the full problem would never move; the run in
        span(V) is still another path, since the step rule's cap and the convergence test
        are relative to ||X||_F = sqrt(r - d) there. Its cost per iteration is m r (r - d)
        instead of m n' (n' - d) plus the retraction's n' (n' - d)^2: 100 samples of 1000
        features took 25 s before, 0.4 s now (`python -m benchmarks.estimators --only
        wide`). Not with ``n_blocks`` set: blocks chosen for n' - d columns are kept."""
        if not isinstance(data, np.ndarray) or self.n_blocks is not None:
            return None
        nl, m = data.shape
        if m >= nl:
            return None
        u, sv, _ = np.linalg.svd(data, full_matrices=False)
        if not sv.size or not sv[0] > 0:
            return None
        r = int(np.count_nonzero(sv > sv[0] * max(nl, m) * np.finfo(float).eps))
        if not d < r < nl:
            return None
        return np.ascontiguousarray(u[:, :r])

    def _fit_in_span(self, data: np.ndarray, v: np.ndarray, scatter: np.ndarray,
                     weights: np.ndarray, d: int) -> np.ndarray:
        """DPCP in the coordinates of span(V) (`_span`); the normals in n' coordinates:
        the complement of span(V), then V times the reduced solution."""
        r = v.shape[1]
        _, w = np.linalg.eigh(v.T @ scatter @ v)
        x0 = np.ascontiguousarray(w[:, : r - d])
        problem = CompositeProblem(np.ascontiguousarray(v.T @ data), r - d, NormLoss.norm(),
                                   sample_weights=weights, name="dpcp")
        b_r = self._run(problem, x0).x
        outside = np.linalg.qr(v, mode="complete")[0][:, r:]
        return np.hstack([outside, v @ b_r])

    def _noise_dof(self, X, dist: np.ndarray, norms: np.ndarray) -> float:
        """Satterthwaite's degrees of freedom (tr Sigma)^2 / tr(Sigma^2) of the residuals
        of the samples at or below the median distance (zero samples left out), Sigma
        their second moment in the basis ``normal_components_``, estimated without the
        bias of few samples; in [1, n_features - d], which it is when S is 0."""
        k = self.normal_components_.shape[0]
        seen = norms > 0
        med = float(np.median(dist[seen] if seen.any() else dist))
        keep = (dist <= med) & (seen if seen.any() else True)
        if not med > 0:
            return float(k)
        count = int(np.count_nonzero(keep))
        if count < 3:
            return float(k)
        s = np.zeros((k, k))
        for lo, hi, blk in row_chunks(X):
            # in units of the median distance: squares of data up to 1e150 stay finite
            r = (blk[keep[lo:hi]] - self.mean_) @ self.normal_components_.T / med
            s += r.T @ r
        s /= count
        t1 = float(np.trace(s))
        t2 = float(np.sum(s * s))
        if not t1 > 0:
            return float(k)
        # (tr S)^2 and tr(S^2) of a sample second moment overstate tr(S)^2 / tr(S^2)'s
        # spread with few samples (N samples in k dimensions: tr(S^2) ~ tr(Sigma^2) +
        # tr(Sigma)^2 / N): the unbiased estimates for Gaussian residuals, N = count,
        # E tr(S^2) = ((N + 1) tr(Sigma^2) + tr(Sigma)^2) / N, E tr(S)^2 = tr(Sigma)^2 +
        # 2 tr(Sigma^2) / N (360 samples in 195 dimensions read 94 without them).
        n_ = float(count)
        b = n_ * n_ / ((n_ + 2.0) * (n_ - 1.0)) * (t2 - t1 * t1 / n_)
        if not b > 0:
            return float(k)
        a = t1 * t1 - 2.0 * b / n_
        return float(min(float(k), max(1.0, a / b)))

    def _problem_data(self, X, shift: np.ndarray, lift: float, e: int = 0):
        """The samples as the problem takes them (n' x m in memory, times 2^e, or
        streamed)."""
        if not is_out_of_core(X):
            y = np.asarray(X, dtype=np.float64).T
            y = np.vstack([y - shift[:, None], np.full((1, y.shape[1]), lift)]) \
                if self.center else y
            return np.ldexp(y, e) if e else y
        if not self.center:
            return rssm.data.samples(X, check_finite=False)
        try:
            import dask.array as da
        except ImportError:
            raise ImportError(
                "RobustSubspace(center=True) on out-of-core data lifts it lazily with Dask: "
                "pip install 'rssm[dask]', or pass center=False or an in-memory array"
            ) from None
        src = X if type(X).__module__.split(".")[0] == "dask" else da.from_array(
            X, chunks=(max(1, (32 * 2**20) // (8 * X.shape[1])), X.shape[1]))
        ones = da.full((X.shape[0], 1), lift, chunks=(src.chunks[0], 1))
        # a file lifted through Dask keeps the run's p x m cache on disk, as the file
        # itself would (Dask's default, in memory, grew with m: 1.8 GB for a 1.2 GB file)
        native = type(X).__module__.split(".")[0] == "dask"
        return rssm.data.samples(da.concatenate([src - shift, ones], axis=1),
                                 check_finite=False, cache="auto" if native else "disk")

    def _distances(self, c: np.ndarray) -> np.ndarray:
        """The distance of each row of ``c`` (samples minus ``mean_``) to the linear
        subspace. Rows with an entry above `HUGE_ROW` are divided by it before the product
        (which overflowed: a finite sample at 1e308 scored nan, not -inf; an audit), the
        others are not, so their bits are those of the product itself."""
        top = np.abs(c).max(axis=1, initial=0.0)
        huge = ~(top <= HUGE_ROW)
        if not huge.any():
            return _row_norms(c @ self.normal_components_.T)
        dist = np.empty(c.shape[0])
        fine = ~huge
        dist[fine] = _row_norms(c[fine] @ self.normal_components_.T)
        big, scale = c[huge], top[huge]
        with np.errstate(over="ignore", invalid="ignore"):
            part = _row_norms((big / np.where(np.isfinite(scale), scale, 1.0)[:, None])
                              @ self.normal_components_.T) * scale
        dist[huge] = np.where(np.isfinite(scale), part, np.inf)
        return dist

    def _dist_and_norm(self, blk: np.ndarray) -> np.ndarray:
        c = blk - self.mean_
        # (the distance as `score_samples` computes it: a training sample at the offset
        # gets the same score there, to the last bit)
        return np.column_stack([self._distances(c), np.linalg.norm(c, axis=1)])

    def _offset(self, dist: np.ndarray, norms: np.ndarray, k: float) -> float:
        if not isinstance(self.contamination, str):
            return float(np.percentile(-dist, 100.0 * float(self.contamination)))
        from scipy.stats import chi2

        # A zero sample lies on every subspace: it says nothing about the noise.
        seen = norms > 0
        if seen.any():
            dist, norms = dist[seen], norms[seen]
        q = float(np.quantile(dist, AUTO_LOW))
        t = q * math.sqrt(chi2.ppf(AUTO_HIGH, k) / chi2.ppf(AUTO_LOW, k))
        # A floor at the rounding level of the data: an exactly fitted subspace leaves
        # distances of ~1e-16 ||x||, which are no evidence of anything.
        floor = EXACT * float(np.median(norms))
        below = int(np.count_nonzero(dist < FAR_BELOW * q))
        tail = float(chi2.cdf(FAR_BELOW**2 * chi2.ppf(AUTO_LOW, k), k))
        if t > floor and below >= max(NEAR_SHARE, 4.0 * tail) * dist.size:
            # Fewer than a quarter of the samples are inliers: the quartile is the
            # outliers' scale, and almost nothing is flagged (a data scientist's audit:
            # 80 % outliers, the right subspace, 0-4 % of them flagged, without a word).
            flagged = int(np.count_nonzero(dist > t))
            warnings.warn(
                f"{type(self).__name__}: {below} of the {dist.size} nonzero training samples "
                "lie closer "
                f"to the subspace than {FAR_BELOW:g} times the lower quartile of the "
                "distances, far below the rest: if they are the inliers, at most about a "
                "quarter of the samples are inliers, and contamination='auto', which reads "
                "the noise scale from "
                f"that quartile, declares only {flagged} samples outliers; pass "
                "contamination=<the expected fraction of outliers>",
                UserWarning, stacklevel=library_stacklevel())
        if t <= floor:
            # A quarter of the samples or more lie on the subspace exactly: the noise
            # scale reads 0, and samples near it but not on it are outliers. Right for
            # noise-free inliers; say so when some samples are that near.
            near = int(np.count_nonzero((dist > floor) & (dist <= NEAR * norms)))
            if near >= NEAR_SHARE * dist.size:     # not an outlier near it by chance
                warnings.warn(
                    f"{type(self).__name__}: {dist.size - np.count_nonzero(dist > floor)} "
                    f"of {dist.size} training samples lie exactly on the subspace, so "
                    "contamination='auto' reads the noise scale as 0 and declares every "
                    f"other sample an outlier, {near} of them within {NEAR:g} of their "
                    "norm of the subspace; if those are noisy inliers, pass "
                    "contamination=<the expected fraction of outliers>",
                    UserWarning, stacklevel=library_stacklevel())
        return -max(t, floor)

    # -- transform and outlier scores ---------------------------------------------------------
    @property
    def _n_features_out(self) -> int:
        return self.n_components_

    def transform(self, X):
        """Coordinates of X in the subspace: ``(X - mean_) @ components_.T``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            The samples, one per row (in memory or out of core, as for `fit`).

        Returns
        -------
        ndarray of shape (n_samples, ``n_components_``)
            The coordinates.
        """
        check_is_fitted(self)
        X = check_X(self, X, reset=False)
        return map_rows(X, lambda b: (b - self.mean_) @ self.components_.T,
                        self.n_components_)

    def inverse_transform(self, X):
        """The points of the subspace with coordinates X: ``X @ components_ + mean_``.

        Parameters
        ----------
        X : array-like of shape (n_samples, ``n_components_``)
            Coordinates, as returned by `transform`.

        Returns
        -------
        ndarray of shape (n_samples, n_features)
            The points.
        """
        check_is_fitted(self)
        z = check_array(X, dtype=np.float64)
        if z.shape[1] != self.n_components_:
            raise ValueError(f"X has {z.shape[1]} columns, but {type(self).__name__} has "
                             f"n_components_ = {self.n_components_}")
        return z @ self.components_ + self.mean_

    def score_samples(self, X):
        """Minus the Euclidean distance of each sample to the (affine) subspace: higher is
        more normal, as for scikit-learn's outlier detectors.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            The samples, one per row (in memory or out of core, as for `fit`).

        Returns
        -------
        ndarray of shape (n_samples,)
            The scores.
        """
        check_is_fitted(self)
        X = check_X(self, X, reset=False)
        with np.errstate(over="ignore"):
            return map_rows(X, lambda b: -self._distances(b - self.mean_), None)

    def decision_function(self, X):
        """``score_samples(X) - offset_``: negative for outliers.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            The samples, one per row.

        Returns
        -------
        ndarray of shape (n_samples,)
            The shifted scores.
        """
        return self.score_samples(X) - self.offset_

    def predict(self, X):
        """+1 for inliers, -1 for outliers (``decision_function(X) < 0``).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            The samples, one per row.

        Returns
        -------
        ndarray of shape (n_samples,)
            +1 or -1 per sample.
        """
        return np.where(self.decision_function(X) >= 0, 1, -1)


#: Samples (minus the mean) with an entry above this are scaled before their product with
#: the normals, which could overflow (n entries of 1e300 times up to 1).
HUGE_ROW = 1e150


def _row_norms(r: np.ndarray) -> np.ndarray:
    """The Euclidean norm of each row of ``r``, scaled by the row's largest entry so that
    its squares neither overflow nor underflow (`score_samples` takes samples at any
    scale: a sample at 1e200 is far away, not a NaN). Per row, not by the block's
    largest entry as `rssm.problems._data._column_norms`: a sample's scaling, and so
    whether its score is finite, must not depend on the others in its batch. (Its last
    bits may: the product before this comes from BLAS, whose kernels for one row and for
    many sum in different orders, as in scikit-learn's own transforms.)"""
    top = np.abs(r).max(axis=1, initial=0.0)
    safe = np.where(top > 0, top, 1.0)
    return top * np.linalg.norm(r / safe[:, None], axis=1)


def _lifted(blk: np.ndarray, shift: np.ndarray, lift: float) -> np.ndarray:
    """[blk - shift, lift]: the samples in homogeneous coordinates."""
    return np.concatenate([blk - shift, np.full((blk.shape[0], 1), lift)], axis=1)
