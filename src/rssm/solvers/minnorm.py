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


def _affine_min(m: np.ndarray) -> np.ndarray | None:
    """Weights (summing to 1) of the least-norm point of the affine hull of the vertices
    with Gram matrix ``m``; None when the system is singular beyond repair."""
    k = m.shape[0]
    a = np.empty((k + 1, k + 1))
    a[:k, :k] = m
    a[:k, k] = 1.0
    a[k, :k] = 1.0
    a[k, k] = 0.0
    rhs = np.zeros(k + 1)
    rhs[k] = 1.0
    try:
        sol = np.linalg.solve(a, rhs)
    except np.linalg.LinAlgError:
        sol = np.linalg.lstsq(a, rhs, rcond=None)[0]
    w = sol[:k]
    return w if np.all(np.isfinite(w)) else None


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
        The least-norm point is the same; its weights may differ by rounding.

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
    scale = float(np.max(np.diag(gram)))
    if not scale > 0:
        lam[0] = 1.0
        return 0.0, lam
    m = gram / scale
    tol = 1e-12
    if start is not None and 0 < len(start) <= w and np.all(np.asarray(start) >= 0) \
            and float(np.sum(start)) > 0:
        lam[:len(start)] = start
        lam[lam <= tol] = 0.0
        lam /= lam.sum()
        support = [int(i) for i in np.flatnonzero(lam)]
    else:
        first = int(np.argmin(np.diag(m)))
        support = [first]
        lam[first] = 1.0
    for _ in range(max_iter):
        g = m @ lam                                   # <x, g_i> for x = sum lam_i g_i
        x2 = float(lam @ g)
        j = int(np.argmin(g))
        if g[j] >= x2 - tol or j in support:
            break                                     # x is the nearest point
        support.append(j)
        for _inner in range(w + 1):
            idx = np.array(support)
            alpha = _affine_min(m[np.ix_(idx, idx)])
            if alpha is None:
                break
            cur = lam[idx]
            if np.all(alpha > tol):
                lam[:] = 0.0
                lam[idx] = alpha
                break
            neg = alpha <= tol
            theta = float(np.min(cur[neg] / np.maximum(cur[neg] - alpha[neg], 1e-300)))
            theta = min(max(theta, 0.0), 1.0)
            new = cur + theta * (alpha - cur)
            new[new <= tol] = 0.0
            lam[:] = 0.0
            lam[idx] = new
            support = [int(i) for i, v in zip(idx, new, strict=True) if v > 0.0]
            if len(support) <= 1:
                break
        total = lam.sum()
        if total > 0:
            lam /= total
    return max(float(lam @ m @ lam), 0.0) * scale, lam
