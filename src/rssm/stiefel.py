"""Geometry of the Stiefel manifold St(n, p) = {X in R^{n x p} : X^T X = I}.

Pure functions on NumPy arrays. Every formula names the place in the paper
(``shared/paper/rssm-paper.tex``) where it is stated; labels are the LaTeX labels.

Costs are for X of size n x p and a column set C of size c; nothing here forms an
n x n matrix.
"""

from __future__ import annotations

import math

import numpy as np

from rssm._validation import (
    InvalidType,
    InvalidValue,
    as_float_matrix,
    as_int,
    as_positive_float,
    check_generator,
    describe,
    max_abs,
)
from rssm.threads import single_blas

__all__ = [
    "submanifold_step",
    "full_step",
    "block_descent_direction",
    "block_step",
    "block_candidate",
    "descent_direction",
    "full_retraction_step",
    "full_candidate",
    "sym",
    "skew",
    "tangent_projection",
    "block_tangent_projection",
    "polar",
    "project_submanifold_block",
    "retract",
    "random_point",
    "feasibility",
    "check_point",
    "as_point",
]

#: Below this ratio of smallest to largest eigenvalue of the Gram matrix, `polar`
#: switches from the Gram route to a thin SVD. Gram route orthogonality error is about
#: eps * cond(Xi)^2, so 0.1 keeps it within ~10 eps.
_GRAM_MIN_RATIO = 0.1
#: Newton-Schulz polar iterations are used while ||Xi^T Xi - I||_F <= this (each step
#: maps the deviation E to about -3/4 E^2, so from 0.1 five steps reach rounding level).
_NS_MAX_DEV = 0.1
#: ... and stop one step after ||Q^T Q - I||_F <= this (that step brings it to ~eps).
_NS_TOL = 1e-8
_NS_MAX_STEPS = 8
#: Re-projection rounds after an SVD polar factor in the RSSM step (see `submanifold_step`).
_REPROJECT_ROUNDS = 2


def sym(a: np.ndarray) -> np.ndarray:
    """Symmetric part (a + a^T) / 2 of a square matrix.

    Parameters
    ----------
    a : ndarray, shape (k, k)
        Square matrix.

    Returns
    -------
    ndarray, shape (k, k)
        (a + a^T) / 2, a new array.
    """
    return 0.5 * (a + a.T)


def skew(a: np.ndarray) -> np.ndarray:
    """Skew-symmetric part (a - a^T) / 2 of a square matrix.

    Parameters
    ----------
    a : ndarray, shape (k, k)
        Square matrix.

    Returns
    -------
    ndarray, shape (k, k)
        (a - a^T) / 2, a new array.
    """
    return 0.5 * (a - a.T)


def _checked(x, xi, name: str, cols=None, cols_name: str = "sel"
             ) -> tuple[np.ndarray, np.ndarray]:
    """``x`` (n x p, p <= n) and ``xi`` (n x p, or n x |C| with ``cols``) as finite
    float64 matrices, or a ValueError / TypeError naming the argument (an audit: an xi of
    shape (6, 1) beside an x of (6, 3) broadcast into a (6, 3) result without a word)."""
    x = as_float_matrix(x, "x")
    xi = as_float_matrix(xi, name)
    n, p = x.shape
    if p > n:
        raise InvalidValue("x", f"x must be n x p with p <= n (a point of St(n, p)), got "
                                f"shape {x.shape}")
    if cols is not None and not isinstance(cols, slice):
        idx = np.asarray(cols)
        if idx.dtype.kind not in "iu" or idx.ndim != 1:
            raise InvalidValue(cols_name, f"{cols_name} must be a slice or a 1-D array of "
                                          f"column indices (integers), got {describe(cols)}")
        if idx.size and (idx.min() < -p or idx.max() >= p):
            raise InvalidValue(cols_name, f"{cols_name} holds a column index outside "
                                          f"0..{p - 1}: {idx.tolist()}")
        if np.unique(idx % p).size != idx.size:
            # (a repeated column returned two different new columns for it; a user's
            # audit)
            raise InvalidValue(cols_name, f"{cols_name} repeats a column: {idx.tolist()}; a "
                                          "column set C names each column once")
    want = (n, p) if cols is None else (n, int(np.arange(p)[cols].size))
    if xi.shape != want:
        raise InvalidValue(name, f"{name} must have shape {want}"
                                 f"{'' if cols is None else ' (n x the columns C)'} beside x "
                                 f"of shape {x.shape}, got {xi.shape}")
    return x, xi


def _gamma(gamma) -> float:
    """The step ``gamma`` as a finite float (NaN or inf failed deep in an SVD); a 0-d
    array of a real dtype counts as its number."""
    kind = np.asarray(gamma).dtype.kind if isinstance(gamma, np.ndarray) else None
    if isinstance(gamma, np.ndarray) and gamma.ndim == 0 and kind in "iuf":
        gamma = gamma.item()
    if isinstance(gamma, bool) or not isinstance(gamma, (int, float, np.integer,
                                                         np.floating)):
        raise InvalidType("gamma", f"gamma must be a real number, got "
                                   f"{type(gamma).__name__}")
    if not math.isfinite(float(gamma)):
        raise InvalidValue("gamma", f"gamma must be finite, got {float(gamma)}")
    return float(gamma)


def tangent_projection(x: np.ndarray, xi: np.ndarray) -> np.ndarray:
    """Project ``xi`` onto the tangent space T_X St(n, p).

    P_T(xi) = xi - X sym(X^T xi)  (Section 2.1, after eq. ``eq-Rsubdiff``).
    Cost: 4 n p^2 flops. Computed in float64; ``xi`` must have the shape of ``x``.

    Parameters
    ----------
    x : array_like, shape (n, p)
        Point X on St(n, p), p <= n; finite, real.
    xi : array_like, shape (n, p)
        Euclidean direction (a subgradient G, for the Riemannian subgradient P_T(G));
        finite, real.

    Returns
    -------
    ndarray, shape (n, p)
        P_T(xi), in float64.
    """
    x, xi = _checked(x, xi, "xi")
    return _tangent_projection(x, xi)


def _tangent_projection(x: np.ndarray, xi: np.ndarray) -> np.ndarray:
    """`tangent_projection` without its checks (for rssm's own float64 arrays; NaN
    passes through)."""
    return xi - x @ sym(x.T @ xi)


def block_tangent_projection(
    x: np.ndarray, cols: np.ndarray | slice, xi_c: np.ndarray
) -> np.ndarray:
    """Project ``xi_c`` onto the tangent space of the submanifold block M_{X_{-C}} at X_C.

    P(xi_C) = X_C skew(X_C^T xi_C) + (I - X X^T) xi_C  (formula before Algorithm
    ``alg-RSSM``; eq. ``eq-partialRiemsubgrad``), computed by the four steps in the proof
    of Proposition ``prop-periteration``:

    1. Y = X^T xi_C                   (p x c, 2 n p c flops)
    2. Y[C, :] <- sym(Y[C, :])        (c^2)
    3. X Y                            (2 n p c flops)
    4. xi_C - X Y                     (n c)

    Parameters
    ----------
    x : ndarray, shape (n, p)
        Point on St(n, p).
    cols : ndarray of int or slice
        The column set C (in the order the columns of ``xi_c`` refer to).
    xi_c : ndarray, shape (n, c)
        Euclidean direction for the columns C.

    Returns
    -------
    ndarray, shape (n, c)
        P(xi_C), the tangent vector of M_{X_{-C}} at X_C, in float64 (the partial
        Riemannian subgradient P(G_C) for xi_C = G_C).
    """
    x, xi_c = _checked(x, xi_c, "xi_c", cols, "cols")
    y = x.T @ xi_c
    yc = y[cols, :]
    y[cols, :] = 0.5 * (yc + yc.T)
    return xi_c - x @ y


#: `polar` rescales input whose largest entry lies outside [_POLAR_UNIT, 1 / _POLAR_UNIT].
_POLAR_UNIT = 1e-50


def polar(xi: np.ndarray) -> np.ndarray:
    """Polar factor of ``xi``: the projection onto St(n, k) (eq. ``eq-polarretr``).

    Uses the k x k Gram matrix when ``xi`` is well conditioned (cond(xi)^2 <= 10, the
    case in every solver step, where xi = X - gamma * tangent), which costs
    4 n k^2 + O(k^3) flops; otherwise a thin SVD, which stays accurate to machine
    precision for ill-conditioned input. Either way ||Q^T Q - I|| is O(eps).

    Parameters
    ----------
    xi : array_like, shape (n, k)
        Finite real matrix, n >= k, of full column rank (the zero matrix is refused).

    Returns
    -------
    ndarray, shape (n, k)
        Q = U V^T for the thin SVD xi = U S V^T: the point of St(n, k) nearest to ``xi``
        in the Frobenius norm, in float64.
    """
    xi = as_float_matrix(xi, "xi")               # lists and integers too; finite, 2-D
    if xi.shape[0] < xi.shape[1]:
        raise ValueError(f"polar needs n >= k (an n x k matrix with orthonormal columns "
                         f"to be), got shape {xi.shape}")
    if xi.size and not xi.any():
        raise ValueError("polar of the zero matrix is not defined (any point is as near)")
    if xi.size:
        # polar(c Xi) = polar(Xi) for c > 0: far from 1 (the starts' data products, up to
        # the data's scale squared), Xi is measured in units of its largest entry first,
        # so that ||Xi^T Xi - I|| neither overflows nor underflows
        top = max_abs(xi)
        if top > 0 and not _POLAR_UNIT <= top <= 1.0 / _POLAR_UNIT:
            xi = xi / top
    q = _polar_gram(xi)
    return q if q is not None else NUMPY_OPS.svd_polar(xi)


def _eigh(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Eigen-decomposition of a small symmetric matrix (LAPACK dsyevd, read from the
    lower triangle); ascending eigenvalues.

    Goes through NumPy, not SciPy, on purpose: NumPy's and SciPy's wheels each bundle
    their own OpenBLAS with its own thread pool. A SciPy LAPACK call right after NumPy's
    GEMMs makes the two pools fight for the cores (measured: a 90 x 90 eigh after a
    5000 x 100 by 100 x 90 product cost 9.7 ms through SciPy against 3.9 ms through NumPy,
    GEMM included, in default threads on 2 cores). Every solver path uses NumPy's pool
    alone, so one thread limit (`rssm.threads`) governs all of it."""
    return np.linalg.eigh(a, UPLO="L")


# -- the kernels of the solvers and of rssm.torch -------------------------------------------
#
# Written once for any array library whose arrays support ``@``, ``.T``, indexing by a
# slice or an integer index (read and write) and in-place arithmetic (NumPy arrays and
# torch tensors do). The few operations beyond that come from an `ArrayOps` object:
# `NUMPY_OPS` for the solvers (the default of every kernel), `rssm.torch`'s for tensors.


class ArrayOps:
    """The operations the kernels need beyond ``@``, indexing and in-place arithmetic,
    for one array library. This base class is NumPy's (float64 arrays, the solvers');
    `rssm.torch` subclasses it for tensors of any device and of float32 or float64."""

    @staticmethod
    def finite(a) -> bool:
        """Whether every entry of ``a`` is finite.

        Parameters
        ----------
        a : array
            Any array of the library.

        Returns
        -------
        bool
            True when no entry is NaN or infinite.
        """
        return bool(np.isfinite(a).all())

    @staticmethod
    def add_diag(a, value: float) -> None:
        """a += value * I, in place.

        Parameters
        ----------
        a : array, shape (k, k)
            Square matrix, overwritten.
        value : float
            Added to each diagonal entry.
        """
        if a.flags.c_contiguous:
            a.reshape(-1)[:: a.shape[0] + 1] += value    # a view: cheaper than a.flat
        else:
            a.flat[:: a.shape[0] + 1] += value

    @staticmethod
    def fro(a) -> float:
        """The Frobenius norm of ``a`` (float64: what `numpy.linalg.norm` computes, the
        square root of the dot product of the raveled array with itself, without its
        dispatch).

        Parameters
        ----------
        a : array
            Any array of the library.

        Returns
        -------
        float
            ||a||_F.
        """
        v = a.ravel(order="K")
        return math.sqrt(float(v.dot(v)))

    @staticmethod
    def ns_tol(a) -> float:
        """Newton-Schulz stops one step after ||Q^T Q - I||_F falls below this: about
        sqrt(eps) of ``a``'s dtype, so that the last step reaches eps.

        Parameters
        ----------
        a : array, shape (n, k)
            The matrix being orthonormalized (its dtype and size set the tolerance).

        Returns
        -------
        float
            The tolerance; here 1e-8 (`_NS_TOL`), for float64.
        """
        return _NS_TOL

    @staticmethod
    def eigh(a):
        """(w, v), ascending eigenvalues of the symmetric ``a`` in float64; None when the
        decomposition fails.

        Parameters
        ----------
        a : array, shape (k, k)
            Symmetric matrix (read from its lower triangle).

        Returns
        -------
        tuple (w, v) or None
            Eigenvalues w, shape (k,), ascending, and orthonormal eigenvectors v, shape
            (k, k), in columns, so that a = v diag(w) v^T; None where the decomposition
            failed (NumPy's raises `numpy.linalg.LinAlgError` instead).
        """
        return _eigh(a)

    @staticmethod
    def sqrt(w):
        """Entrywise square root.

        Parameters
        ----------
        w : array
            Nonnegative entries (the eigenvalues of `eigh`).

        Returns
        -------
        array
            sqrt(w), the shape of ``w``.
        """
        return np.sqrt(w)

    @staticmethod
    def like(b, a):
        """``b`` in the dtype of ``a`` (the float64 eigenvectors for a float32 ``a``).

        Parameters
        ----------
        b : array
            Array to convert.
        a : array
            Array whose dtype is wanted.

        Returns
        -------
        array
            ``b`` itself here (NumPy's `eigh` keeps ``a``'s dtype); a subclass whose
            `eigh` computes in float64 converts it.
        """
        return b

    @staticmethod
    def cols(a, sel):
        """The columns ``sel`` of ``a``.

        Parameters
        ----------
        a : array, shape (n, p)
            Matrix.
        sel : slice or integer index
            Column set C, indices into the p columns (an int array or tensor).

        Returns
        -------
        array, shape (n, c)
            a[:, sel] (a view for a slice, a copy for an index).
        """
        return a[:, sel]

    @staticmethod
    def svd_polar(xi):
        """U V^T from the thin SVD of ``xi``.

        Parameters
        ----------
        xi : array, shape (n, k)
            Matrix, n >= k.

        Returns
        -------
        array, shape (n, k)
            The polar factor U V^T of xi = U S V^T (eq. ``eq-polarretr``).
        """
        u, _, vt = np.linalg.svd(xi, full_matrices=False)
        return u @ vt


#: The operations of NumPy arrays, the default of every kernel.
NUMPY_OPS = ArrayOps()


def _polar_gram(xi, ops: ArrayOps = NUMPY_OPS):
    """Polar factor of ``xi`` from its Gram matrix G = Xi^T Xi; None when G is too ill
    conditioned for it (smallest / largest eigenvalue <= `_GRAM_MIN_RATIO`, or not
    finite), in which case the caller falls back to a thin SVD. A factor returned is
    finite.

    Near the manifold (||G - I||_F <= `_NS_MAX_DEV`, every step with gamma ||P(G_C)|| <~
    0.3) it runs the Newton-Schulz iteration Q <- Q (3 I - Q^T Q) / 2, which converges
    quadratically to the same polar factor: with Q^T Q = I + E the step maps E to
    -3/4 E^2 + 1/4 E^3, so 2-4 steps of two n x k x k products each, cheaper than a
    LAPACK eigh of the k x k matrix at the solvers' sizes (k = 90: 1.0 ms for dsyevd
    against ~0.3 ms). Otherwise Q = Xi V diag(w)^{-1/2} V^T from G = V diag(w) V^T."""
    gram = xi.T @ xi
    if not ops.finite(gram):
        return None
    ops.add_diag(gram, -1.0)                            # E = G - I
    dev = ops.fro(gram)
    if dev <= _NS_MAX_DEV:
        q = _newton_schulz(xi, gram, dev, ops)
        if q is not None:
            return q
        gram = xi.T @ xi                                # overwritten (no convergence: rare)
    else:
        ops.add_diag(gram, 1.0)                         # G again (its diagonal to rounding)
        if float(gram.diagonal().min()) < 0.5:
            # (g - 1) + 1 is exact for g in [0.5, 2] (Sterbenz) but loses eps / g of a
            # small g: Xi of small scale (1e-8: feasibility 0.1) needs G itself. Never
            # in a solver step, where G = I + gamma^2 D^T D >= I.
            gram = xi.T @ xi
    wv = ops.eigh(gram)
    if wv is None:
        return None
    w, v = wv
    lo, hi = float(w[0]), float(w[-1])
    if not (lo > _GRAM_MIN_RATIO * hi and lo > 0.0):
        return None
    return xi @ ops.like((v / ops.sqrt(w)) @ v.T, xi)


def _newton_schulz(q, e, dev: float, ops: ArrayOps = NUMPY_OPS):
    """Newton-Schulz polar iteration from Q with Q^T Q = I + E (``e``, overwritten) and
    ||E||_F = ``dev`` < 1; None if it has not converged in `_NS_MAX_STEPS` steps."""
    tol = ops.ns_tol(q)
    for _ in range(_NS_MAX_STEPS):
        e *= -0.5
        ops.add_diag(e, 1.0)                            # I - E/2
        q = q @ e
        if dev <= tol:
            return q
        e = q.T @ q
        ops.add_diag(e, -1.0)
        dev = ops.fro(e)
    return None


def submanifold_step(
    x: np.ndarray, sel: np.ndarray | slice, g: np.ndarray, gamma: float
) -> np.ndarray:
    """One RSSM update of the columns C (line 3 of Algorithm ``alg-RSSM``), fused.

    Returns P_{M_{X_{-C}}}(X_C - gamma * P(G_C)) where P(G_C) is the partial Riemannian
    subgradient (eq. ``eq-partialRiemsubgrad``) computed by the four steps of
    Prop. ``prop-periteration``, and the projection is the general form of
    Lemma ``lem-projsubmfdblk``, polar((I - X_{-C} X_{-C}^T) Xi) (eq. ``eq-projsubmfdblk``).
    The same arithmetic as `block_tangent_projection` followed by
    `project_submanifold_block`, with fewer temporaries. ``x`` is not modified.

    Cost: 8 n p c (four n x p x c products) + 4 n c + 4 n c^2 + O(c^3) flops. Computed in
    float64; ``g`` is n x |C| and finite, ``gamma`` a finite number.

    Parameters
    ----------
    x : array_like, shape (n, p)
        Current point X on St(n, p).
    sel : ndarray of int or slice
        The column set C: indices into the p columns of ``x``, in the order of the
        columns of ``g``.
    g : array_like, shape (n, c)
        Euclidean subgradient G_C for the columns C (c = |C|).
    gamma : float
        Step size.

    Returns
    -------
    ndarray, shape (n, c)
        The new columns X_C^+ in the order of ``sel``, float64; the columns outside C do
        not change.
    """
    x, g = _checked(x, g, "g", sel)
    gamma = _gamma(gamma)
    with np.errstate(over="ignore", invalid="ignore"):
        neg, _ = block_descent_direction(x, sel, g)
    _check_step_finite(neg, gamma)
    with np.errstate(over="ignore"):      # (huge steps: the polar factor rescales)
        return block_step(x, sel, neg, gamma)


def full_step(x: np.ndarray, g: np.ndarray, gamma: float) -> np.ndarray:
    """One RSM update, polar(X - gamma P_T(G)) (eqs. ``eq-Rsubdiff``, ``eq-polarretr``),
    with fewer temporaries than `tangent_projection` + `retract`. ``x`` is not modified.

    Cost: 4 n p^2 + 4 n p + 4 n p^2 + O(p^3) flops. Computed in float64; ``g`` has the
    shape of ``x`` and is finite, ``gamma`` a finite number.

    Parameters
    ----------
    x : array_like, shape (n, p)
        Current point X on St(n, p).
    g : array_like, shape (n, p)
        Euclidean subgradient G at X.
    gamma : float
        Step size.

    Returns
    -------
    ndarray, shape (n, p)
        The new point X^+ on St(n, p), float64.
    """
    x, g = _checked(x, g, "g")
    gamma = _gamma(gamma)
    with np.errstate(over="ignore", invalid="ignore"):
        neg = descent_direction(x, g)
    _check_step_finite(neg, gamma)
    with np.errstate(over="ignore"):      # (huge steps: the polar factor rescales)
        return full_retraction_step(x, neg, gamma)


def _check_step_finite(neg: np.ndarray, gamma: float) -> None:
    """A ValueError naming ``g`` where the step gamma P(G) overflows float64: the SVD of the
    polar factor then ran on inf and NaN, and never returned (a user's audit: a finite g
    with entries near 1e308)."""
    with np.errstate(over="ignore", invalid="ignore"):
        top = abs(gamma) * float(np.abs(neg).max()) if neg.size else 0.0
    if not (math.isfinite(top) and np.isfinite(neg).all()):
        raise InvalidValue("g", "the step gamma * P(g) overflows float64 (g has entries up "
                                "to its range, or gamma is too large beside it): scale g "
                                "or gamma down")


def block_descent_direction(x, sel, g):
    """First half of `submanifold_step`: the negated partial Riemannian subgradient
    -P(G_C) = X Y - G_C (eq. ``eq-partialRiemsubgrad``, Y = X^T G_C with Y[C] symmetrized)
    and S = skew(X_C^T G_C) = X_C^T P(G_C) (c x c), whose blocks give the
    A_X^{-1}-norm of the step (Lemma ``lem-cindep``). ``x`` and ``g`` are not modified.
    Any array library (see `ArrayOps`); ``sel`` is a slice or an integer index.

    Cost: 4 n p c + n c + O(c^2) flops.

    Parameters
    ----------
    x : ndarray or torch.Tensor, shape (n, p)
        Current point X on St(n, p).
    sel : slice or integer index
        The column set C: indices into the p columns of ``x`` (an int array or tensor),
        in the order of the columns of ``g``.
    g : ndarray or torch.Tensor, shape (n, c)
        Euclidean subgradient G_C for the columns C, in the dtype of ``x``.

    Returns
    -------
    neg : ndarray or torch.Tensor, shape (n, c)
        -P(G_C), a new array.
    s : ndarray or torch.Tensor, shape (c, c)
        skew(X_C^T G_C), rows and columns in the order of ``sel``.
    """
    y = x.T @ g                          # Y = X^T G_C                (p x c)
    yc = y[sel]
    ys = 0.5 * (yc + yc.T)
    s = yc - ys                          # skew(Y[C]): X_C^T P(G_C)
    y[sel] = ys                          # Y[C] <- sym(Y[C])
    neg = x @ y                          # X Y                        (n x c)
    neg -= g                             # -P(G_C) = X Y - G_C
    return neg, s


def block_step(x: np.ndarray, sel, neg: np.ndarray, gamma: float) -> np.ndarray:
    """Second half of `submanifold_step`: the new columns
    P_{M_{X_{-C}}}(X_C - gamma P(G_C)) (eq. ``eq-projsubmfdblk``) from ``neg`` = -P(G_C) of
    `block_descent_direction`. The solver's kernel: its arguments are not checked and keep
    their dtype (`submanifold_step` checks them and computes in float64).

    Parameters
    ----------
    x : ndarray, shape (n, p)
        Current point X on St(n, p).
    sel : slice or ndarray of int
        The column set C: indices into the p columns of ``x``, in the order of the
        columns of ``neg``.
    neg : ndarray, shape (n, c)
        -P(G_C) from `block_descent_direction` (not modified).
    gamma : float
        Step size.

    Returns
    -------
    ndarray, shape (n, c)
        The new columns X_C^+, in the order of ``sel``.
    """
    return block_candidate(x, sel, neg, gamma)[0]


def block_candidate(x, sel, neg, gamma: float, ops: ArrayOps = NUMPY_OPS):
    """`block_step` for any array library: (new columns, whether the SVD fallback
    ran, after which the columns may be non-finite).

    Parameters
    ----------
    x : ndarray or torch.Tensor, shape (n, p)
        Current point X on St(n, p).
    sel : slice or integer index
        The column set C: indices into the p columns of ``x`` (an int array or tensor),
        in the order of the columns of ``neg``.
    neg : ndarray or torch.Tensor, shape (n, c)
        -P(G_C) from `block_descent_direction` (not modified).
    gamma : float
        Step size.
    ops : ArrayOps, optional
        The array library's operations (`NUMPY_OPS` by default).

    Returns
    -------
    new : ndarray or torch.Tensor, shape (n, c)
        P_{M_{X_{-C}}}(X_C - gamma P(G_C)) (eq. ``eq-projsubmfdblk``), in the dtype of
        ``x``.
    unchecked : bool
        True when the SVD fallback ran (Xi ill conditioned): ``new`` may then hold NaN or
        inf, which the caller checks; False when it came from the Gram route and is
        finite.
    """
    # (a step of 1e308 with the cap off: the products overflow, the polar factor rescales;
    # no NumPy warning, as from the public steps)
    with np.errstate(over="ignore", invalid="ignore"):
        xi = neg * gamma
        xi += ops.cols(x, sel)           # Xi = X_C - gamma P(G_C)
        return _project_block(x, sel, xi, ops)


def _project_block(x, sel, xi, ops: ArrayOps):
    """polar((I - X_{-C} X_{-C}^T) Xi) (Lemma ``lem-projsubmfdblk``), ``xi`` overwritten:
    (new columns, whether the SVD fallback ran)."""
    w = x.T @ xi                         # W = X^T Xi, W[C] = 0: X W = X_{-C} X_{-C}^T Xi
    w[sel] = 0.0
    xi -= x @ w
    q = _polar_gram(xi, ops)
    if q is not None:
        return q, False
    # Xi ill conditioned: only for steps with gamma ||P(G_C)|| >~ 3, far beyond the theory's
    # gamma < 1/L. The SVD polar factor is orthonormal, but its rounding error (about
    # eps * cond(Xi)) leaks into span(X_{-C}); project it out again and re-orthonormalize.
    # Two rounds keep ||X^T X - I|| at the eps level up to gamma ||P(G_C)|| ~ 1e100.
    q = ops.svd_polar(xi)
    for _ in range(_REPROJECT_ROUNDS):
        w = x.T @ q
        w[sel] = 0.0
        xi = q - x @ w
        q = _polar_gram(xi, ops)  # well conditioned now: the Gram route, else the SVD
        q = ops.svd_polar(xi) if q is None else q
    return q, True


def descent_direction(x, g):
    """First half of `full_step`: -P_T(G) = X sym(X^T G) - G (eq. ``eq-Rsubdiff``); any
    array library. Unchecked; ``x`` and ``g`` are not modified.

    Parameters
    ----------
    x : ndarray or torch.Tensor, shape (n, p)
        Current point X on St(n, p).
    g : ndarray or torch.Tensor, shape (n, p)
        Euclidean subgradient G at X, in the dtype of ``x``.

    Returns
    -------
    ndarray or torch.Tensor, shape (n, p)
        -P_T(G), a new array.
    """
    return descent_direction_parts(x, g)[0]


def descent_direction_parts(x, g):
    """(`descent_direction`, X^T G): the direction and the p x p product it was formed
    from (whose skew part is X^T P_T(G)); any array library.

    Parameters
    ----------
    x : ndarray or torch.Tensor, shape (n, p)
        Current point X on St(n, p).
    g : ndarray or torch.Tensor, shape (n, p)
        Euclidean subgradient G at X, in the dtype of ``x``.

    Returns
    -------
    neg : ndarray or torch.Tensor, shape (n, p)
        -P_T(G) (eq. ``eq-Rsubdiff``), a new array.
    y : ndarray or torch.Tensor, shape (p, p)
        X^T G.
    """
    y = x.T @ g
    ys = y + y.T                         # 2 sym(X^T G)
    neg = x @ ys
    neg *= 0.5                           # X sym(X^T G)
    neg -= g                             # -P_T(G)
    return neg, y


def full_retraction_step(x: np.ndarray, neg: np.ndarray, gamma: float) -> np.ndarray:
    """Second half of `full_step`: polar(X - gamma P_T(G)) from ``neg`` = -P_T(G). The
    solver's kernel: its arguments are not checked (`full_step` checks them).

    Parameters
    ----------
    x : ndarray, shape (n, p)
        Current point X on St(n, p).
    neg : ndarray, shape (n, p)
        -P_T(G) from `descent_direction` (not modified).
    gamma : float
        Step size.

    Returns
    -------
    ndarray, shape (n, p)
        The new point polar(X - gamma P_T(G)) (eq. ``eq-polarretr``).
    """
    return full_candidate(x, neg, gamma)[0]


def full_candidate(x, neg, gamma: float, ops: ArrayOps = NUMPY_OPS):
    """`full_retraction_step` for any array library: (new X, whether the SVD fallback ran).

    Parameters
    ----------
    x : ndarray or torch.Tensor, shape (n, p)
        Current point X on St(n, p).
    neg : ndarray or torch.Tensor, shape (n, p)
        -P_T(G) from `descent_direction` (not modified).
    gamma : float
        Step size.
    ops : ArrayOps, optional
        The array library's operations (`NUMPY_OPS` by default).

    Returns
    -------
    new : ndarray or torch.Tensor, shape (n, p)
        polar(X - gamma P_T(G)) (eq. ``eq-polarretr``), in the dtype of ``x``.
    unchecked : bool
        True when the SVD fallback ran: ``new`` may then hold NaN or inf, which the
        caller checks; False when it came from the Gram route and is finite.
    """
    with np.errstate(over="ignore", invalid="ignore"):   # (as in `block_candidate`)
        xi = neg * gamma
        xi += x                          # X - gamma P_T(G)
        q = _polar_gram(xi, ops)
        if q is not None:
            return q, False
        return ops.svd_polar(xi), True


def project_submanifold_block(
    x: np.ndarray, cols: np.ndarray | slice, big_xi: np.ndarray
) -> np.ndarray:
    """Project ``big_xi`` (n x c) onto the submanifold block M_{X_{-C}}.

    Lemma ``lem-projsubmfdblk``: P(Xi) = polar((I - X_{-C} X_{-C}^T) Xi). We use this
    general form rather than the shortcut polar(Xi), so rounding errors cannot make the
    updated block drift out of orthogonality with the untouched columns. X_{-C} X_{-C}^T Xi
    is applied as X W with W = X^T Xi and W[C] = 0, so no n x n matrix and no copy of
    X_{-C} is formed. Where (I - X_{-C} X_{-C}^T) Xi is (nearly) rank deficient, the polar
    factor's rounding leaks into span(X_{-C}) (0.99 for Xi = [X_0, X_2], C = {0, 1}): it is
    projected out again and the block re-orthonormalized, as the solver's kernel does
    (`block_candidate`). Computed in float64. Cost: 6 n p c + 4 n c^2 + O(c^3) flops (the
    re-projection, when it runs, as much again).

    Parameters
    ----------
    x : array_like, shape (n, p)
        Point X on St(n, p); its columns outside C span the space the result is kept
        orthogonal to.
    cols : ndarray of int or slice
        The column set C: indices into the p columns of ``x``, in the order of the
        columns of ``big_xi``.
    big_xi : array_like, shape (n, c)
        The block Xi to project (in a step, X_C - gamma P(G_C)); finite, and not in
        span(X_{-C}).

    Returns
    -------
    ndarray, shape (n, c)
        P(Xi), float64: c orthonormal columns orthogonal to X_{-C}, so that X with its
        columns C replaced by them is on St(n, p).
    """
    x, xi = _checked(x, big_xi, "big_xi", cols, "cols")
    w = x.T @ xi
    w[cols, :] = 0.0
    q = polar(xi - x @ w)                # checked (finite, nonzero) and rescaled
    for _ in range(_REPROJECT_ROUNDS):
        w = x.T @ q
        w[cols, :] = 0.0
        if not float(np.abs(w).max(initial=0.0)) > _LEAK:
            break
        q = polar(q - x @ w)
    return q


#: `project_submanifold_block` projects its result out of span(X_{-C}) again above this.
_LEAK = 1e-14


def retract(x: np.ndarray, xi: np.ndarray) -> np.ndarray:
    """Polar retraction Retr_X(xi) = P_St(X + xi) (eq. ``eq-polarretr``); ``xi`` has the
    shape of ``x``.

    Parameters
    ----------
    x : array_like, shape (n, p)
        Point X on St(n, p).
    xi : array_like, shape (n, p)
        Tangent vector at X (any finite matrix is accepted: X + xi is projected).

    Returns
    -------
    ndarray, shape (n, p)
        Retr_X(xi) = polar(X + xi), a point of St(n, p), in float64.
    """
    x, xi = _checked(x, xi, "xi")
    return polar(x + xi)


@single_blas()
def random_point(n: int, p: int, rng: np.random.Generator) -> np.ndarray:
    """Haar-distributed random point on St(n, p).

    QR of an n x p standard Gaussian matrix with the signs of diag(R) made positive,
    which makes Q exactly Haar distributed.

    Parameters
    ----------
    n, p : int
        Sizes, 1 <= p <= n.
    rng : numpy.random.Generator
        Source of randomness (required: no global state is used).

    Returns
    -------
    numpy.ndarray
        An n x p matrix with orthonormal columns.
    """
    check_generator(rng)
    n = as_int(n, "n")
    p = as_int(p, "p")
    if not 1 <= p <= n:
        raise ValueError(f"random_point needs 1 <= p <= n, got n={n}, p={p}")
    g = rng.standard_normal((n, p))
    q, r = np.linalg.qr(g)
    d = np.sign(np.diag(r))
    d[d == 0] = 1.0
    return q * d


def feasibility(x: np.ndarray) -> float:
    """Return ||X^T X - I||_max, the largest entrywise deviation from orthonormality.

    ``x`` is any 2-D real array (converted to float64); NaN or Inf entries give NaN or
    Inf. Raises ``TypeError``/``ValueError`` naming ``x`` for other input.

    Parameters
    ----------
    x : array_like, shape (n, p)
        Matrix to measure (may be empty).

    Returns
    -------
    float
        The largest absolute entry of X^T X - I; 0.0 for an empty matrix.
    """
    return _feasibility(as_float_matrix(x, "x", allow_empty=True, finite=False))


def _feasibility(x: np.ndarray) -> float:
    with np.errstate(over="ignore", invalid="ignore"):   # entries of 1e200: inf, said so
        g = x.T @ x
    g[np.diag_indices_from(g)] -= 1.0
    return float(np.max(np.abs(g))) if g.size else 0.0


def check_point(x: np.ndarray, atol: float = 1e-8, name: str = "x") -> float:
    """Raise ``ValueError`` saying how far ``x`` is from St(n, p) if it is off by > ``atol``;
    return that distance, ||X^T X - I||_max.

    The message reports ||X^T X - I||_max and the tolerance, and suggests
    `rssm.stiefel.polar` to project a nearby matrix onto the manifold. ``x`` must be a
    2-D real array (else ``TypeError``/``ValueError`` naming ``name``) and ``atol`` a
    finite number > 0.

    Parameters
    ----------
    x : array_like, shape (n, p)
        Matrix to check.
    atol : float, optional
        Largest accepted ||X^T X - I||_max.
    name : str, optional
        The argument's name in the error messages.

    Returns
    -------
    float
        ||X^T X - I||_max, at most ``atol``.

    Raises
    ------
    ValueError
        ``x`` has NaN or infinite entries or is off St(n, p) by more than ``atol``.
    """
    atol = as_positive_float(atol, "atol")
    arr = as_float_matrix(x, name, allow_empty=True, finite=False)
    if not np.isfinite(arr).all():
        raise ValueError(f"{name} is not on the Stiefel manifold: it has "
                         f"{int(arr.size - np.isfinite(arr).sum())} NaN or infinite entries")
    dev = _feasibility(arr)
    if not np.isfinite(dev) or dev > atol:
        raise ValueError(
            f"{name} is not on the Stiefel manifold: ||{name}^T {name} - I||_max = {dev:.3e} "
            f"exceeds the tolerance {atol:.1e}; pass a matrix with orthonormal columns "
            f"(rssm.stiefel.polar({name}) projects a full-rank matrix onto the manifold)"
        )
    return dev


#: The tolerance to which a float32 / float16 point is checked (a start, a ground truth):
#: an orthonormal matrix rounded to float32 is off St(n, p) by about 1e-7, to float16 by
#: about 1e-3 (it is then projected in float64).
FLOAT32_ATOL = 1e-5
FLOAT16_ATOL = 2e-2
#: A float64 point accepted by `check_point` but off St(n, p) by more than this is
#: projected (`polar`): within the check's 1e-8 a start scaled by 1 - 4e-9 had a lower
#: DPCP cost than every feasible point and came back as the best point, off by 8e-9.
#: Points made by QR, eigh or a run are within a few 1e-16 and are kept bit for bit.
PROJECT_ABOVE = 1e-13


def low_precision_atol(dtype) -> float | None:
    """The check's tolerance for a point of ``dtype`` rounded from an orthonormal matrix
    (float32, float16, bfloat16), or None for float64 and the rest.

    Parameters
    ----------
    dtype : numpy.dtype, type, torch.dtype or None
        The point's dtype (None for input without one, such as a list). Read by name, so
        that a torch tensor's ``torch.float32`` counts as float32 (it was checked to
        float64's 1e-8 while the same matrix in NumPy passed; a user's audit) and so do
        JAX's and ml_dtypes' ``bfloat16``.

    Returns
    -------
    float or None
        `FLOAT32_ATOL` for float32, `FLOAT16_ATOL` for float16 and bfloat16 (whose
        rounding of an orthonormal matrix measured 5e-4 to 2.4e-3), else None.
    """
    if dtype is None:
        return None
    try:
        name = np.dtype(dtype).name
    except TypeError:
        name = str(dtype).rsplit(".", 1)[-1]      # torch.float32 -> "float32"
    if name == "float32":
        return FLOAT32_ATOL
    if name in ("float16", "bfloat16"):
        return FLOAT16_ATOL
    return None


def checked_point(x, name: str, shape, atol: float = 1e-8) -> np.ndarray:
    """``x`` as a float64 copy on St(n, p): checked to ``atol`` (a float32 or float16
    point to its own precision, `low_precision_atol`), and projected onto the manifold
    (`polar`) where it is off by more than `PROJECT_ABOVE`.

    Parameters
    ----------
    x : array_like
        The candidate point: a finite real matrix.
    name : str
        The argument's name in the error messages.
    shape : tuple of (int or None)
        The expected shape (n, p); None accepts any size on that axis.
    atol : float, optional
        Largest accepted ||X^T X - I||_max for a float64 ``x`` (at least
        `low_precision_atol` for a float32 or float16 one).

    Returns
    -------
    ndarray
        A float64 copy of ``x`` on St(n, p): ``x``'s values where it is off the manifold
        by at most `PROJECT_ABOVE`, else their polar factor.

    Raises
    ------
    TypeError, ValueError
        ``x`` is not a finite real matrix of ``shape`` or is off St(n, p) by more than
        the tolerance.
    """
    low = low_precision_atol(getattr(x, "dtype", None))
    arr = as_float_matrix(x, name, shape=shape, copy=True)
    dev = check_point(arr, atol=atol if low is None else max(atol, low), name=name)
    return polar(arr) if dev > PROJECT_ABOVE else arr


def as_point(value, name: str, shape: tuple[int | None, int | None], atol: float = 1e-8):
    """None stays None; anything else must be a finite real matrix of ``shape`` (None: any
    size on that axis) with orthonormal columns (to ``atol``), returned as a float64 copy.
    Used for the ground truths the problems accept (true subspace, dictionary, ...).

    Parameters
    ----------
    value : array_like or None
        The point, or None.
    name : str
        The argument's name in the error messages.
    shape : tuple of (int or None)
        The expected shape (n, p); None accepts any size on that axis.
    atol : float, optional
        Largest accepted ||X^T X - I||_max (float32 and float16 input to their own
        precision, as in `checked_point`).

    Returns
    -------
    ndarray or None
        None for None, else the float64 copy of `checked_point` (projected onto St(n, p)
        when off it by more than `PROJECT_ABOVE`).
    """
    if value is None:
        return None
    return checked_point(value, name, shape, atol)

