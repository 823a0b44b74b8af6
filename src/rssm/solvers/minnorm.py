"""The least-norm point of a convex hull, from the Gram matrix of its vertices.

min_{lambda in simplex} ||sum_i lambda_i g_i||^2 = min lambda^T M lambda, M_ij = <g_i, g_j>.
Solved exactly by Wolfe's active-set method (Wolfe, "Finding the nearest point in a
polytope", Math. Programming 11, 1976): keep a set S of vertices whose affine hull holds
the current point, add the vertex most opposed to it, and drop vertices whose weight the
affine minimizer would make negative. It ends after finitely many steps; the bundles here
hold at most a few dozen vectors.
"""

from __future__ import annotations

import numpy as np

__all__ = ["min_norm_point"]


try:        # LAPACK's gesv as np.linalg.solve calls it, without its per-call checks
    from numpy.linalg import _umath_linalg as _ul
    _SOLVE1 = _ul.solve1
except (ImportError, AttributeError):        # pragma: no cover - another NumPy layout
    _SOLVE1 = None


def _affine_min(m: np.ndarray, idx: np.ndarray | None = None) -> np.ndarray | None:
    """Weights (summing to 1) of the least-norm point of the affine hull of the vertices
    with Gram matrix ``m``; None when the system is singular beyond repair.

    With ``idx``, ``m`` is `_bordered`'s matrix of all the vertices and the hull is that
    of the vertices ``idx``."""
    if idx is None:
        m = _bordered(m)
        idx = np.arange(m.shape[0] - 1)
    k = idx.size
    sel = np.append(idx, m.shape[0] - 1)
    a = m[sel[:, None], sel]
    rhs = np.zeros(k + 1)
    rhs[k] = 1.0
    sol = None
    if _SOLVE1 is not None:
        # the gufunc np.linalg.solve runs (the same bits); a singular system leaves NaN,
        # and np.linalg.solve then says so as it always did
        with np.errstate(all="ignore"):
            sol = _SOLVE1(a, rhs, signature="dd->d")
        if not np.isfinite(sol).all():
            sol = None
    if sol is None:
        try:
            sol = np.linalg.solve(a, rhs)
        except np.linalg.LinAlgError:
            sol = np.linalg.lstsq(a, rhs, rcond=None)[0]
    w = sol[:k]
    return w if np.isfinite(w).all() else None


def _bordered(m: np.ndarray) -> np.ndarray:
    """[[M, 1], [1^T, 0]]: the matrix of the affine least-norm systems of all the vertices
    (a system on some of them takes its rows and columns and the last ones)."""
    w = m.shape[0]
    a = np.empty((w + 1, w + 1))
    a[:w, :w] = m
    a[:w, w] = 1.0
    a[w, :w] = 1.0
    a[w, w] = 0.0
    return a


def min_norm_point(gram: np.ndarray, max_iter: int = 200,
                   start: np.ndarray | None = None) -> tuple[float, np.ndarray]:
    """Least squared norm over the convex hull of vectors with Gram matrix ``gram``.

    Parameters
    ----------
    gram : ndarray, shape (w, w)
        Symmetric positive semidefinite Gram matrix <g_i, g_j> of w >= 1 vectors.
    max_iter : int
        Cap on the outer iterations (never reached in exact arithmetic).
    start : ndarray, shape (v,), v <= w, optional
        Weights of the least-norm point of the first v vectors (this function's answer
        for them): the search starts there, with the vectors it holds, instead of at the
        shortest vector. A bundle grown by one vector at a time then costs one or two
        outer iterations per vector instead of a search from scratch (a sparse PCA fit
        spent 54 of its 58 s in the bundle check's searches, 32 affine solves each).
        Where the steps from there end short of the optimality test (<x, g_i> >=
        ||x||^2 for every vertex, to 1e-12 of the largest squared norm), as near-duplicate
        vectors in the start's support can make them, the search starts again from
        scratch; a start that is not a 1-d array of at most w finite weights >= 0 with a
        positive sum is ignored. The least-norm point is then the same; its weights may
        differ by rounding.

    Returns
    -------
    sq_norm : float
        min_{lambda >= 0, sum lambda = 1} lambda^T gram lambda (>= 0).
    weights : ndarray, shape (w,)
        A minimizing lambda.
    """
    gram = np.asarray(gram, dtype=np.float64)
    w = gram.shape[0]
    lam = np.zeros(w)
    if w == 0:
        return 0.0, lam
    scale = float(gram.diagonal().max())
    if not scale > 0:
        lam[0] = 1.0
        return 0.0, lam
    m = gram / scale
    warm = _warm_start(start, w)
    if warm is not None:
        lam, optimal = _wolfe(m, warm, max_iter)
        if optimal:
            return max(float(lam @ m @ lam), 0.0) * scale, lam
        # Not optimal where Wolfe's steps stopped: a start holding near-duplicate
        # vertices (an affinely dependent support) can stall at a point that is not the
        # least-norm one (a review: 7.99 against 2.64 with 8 vectors of 2 distinct rows),
        # and a start that was not this function's answer need not lead anywhere. From
        # scratch then, as without a start.
    first = int(m.diagonal().argmin())
    lam = np.zeros(w)
    lam[first] = 1.0
    lam, _ = _wolfe(m, lam, max_iter)
    return max(float(lam @ m @ lam), 0.0) * scale, lam


def _warm_start(start, w: int) -> np.ndarray | None:
    """``start`` as weights of the w vertices (zeros after it), or None where it is not
    a usable start: not a 1-d array of at most w finite weights >= 0 with a positive sum
    once the weights at rounding level (<= `_TOL` of the sum) are dropped."""
    if start is None:
        return None
    start = np.asarray(start, dtype=np.float64)
    if start.ndim != 1 or not 0 < start.size <= w or not np.all(np.isfinite(start)) \
            or np.any(start < 0):
        return None
    total = float(start.sum())
    if not total > 0:
        return None
    lam = np.zeros(w)
    lam[:start.size] = start / total
    lam[lam <= _TOL] = 0.0
    total = float(lam.sum())
    if not total > 0:
        return None
    return lam / total


_TOL = 1e-12


def _wolfe(m: np.ndarray, lam: np.ndarray, max_iter: int) -> tuple[np.ndarray, bool]:
    """Wolfe's steps on the normalized Gram matrix ``m`` from the weights ``lam`` (their
    nonzero entries the starting support); the weights and whether the optimality test
    <x, g_i> >= ||x||^2 - tol held for every vertex where the steps ended.

    (Written for small bundles, where NumPy's per-call overhead is most of the time: the
    same arithmetic as the textbook loop, with plain index arrays and reductions as
    methods, and the bordered matrix built once per search.)"""
    tol = _TOL
    w = m.shape[0]
    big = _bordered(m)
    support = np.flatnonzero(lam).tolist()
    optimal = False
    for _ in range(max_iter):
        g = m @ lam                                   # <x, g_i> for x = sum lam_i g_i
        x2 = float(lam @ g)
        j = int(g.argmin())
        if g[j] >= x2 - tol:
            optimal = True
            break                                     # x is the nearest point
        if j in support:
            break                                     # stalled (a degenerate support)
        support.append(j)
        for _inner in range(w + 1):
            idx = np.array(support)
            alpha = _affine_min(big, idx)
            if alpha is None:
                break
            cur = lam[idx]
            if alpha.min() > tol:
                lam[:] = 0.0
                lam[idx] = alpha
                break
            neg = alpha <= tol
            theta = float((cur[neg] / np.maximum(cur[neg] - alpha[neg], 1e-300)).min())
            theta = min(max(theta, 0.0), 1.0)
            new = cur + theta * (alpha - cur)
            new[new <= tol] = 0.0
            lam[:] = 0.0
            lam[idx] = new
            support = idx[new > 0.0].tolist()
            if len(support) <= 1:
                break
        total = lam.sum()
        if total > 0:
            lam /= total
    return lam, optimal
