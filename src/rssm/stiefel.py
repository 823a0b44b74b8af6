"""Geometry of the Stiefel manifold St(n, p) = {X in R^{n x p} : X^T X = I}.

Pure functions on NumPy arrays. Every formula names the place in the paper
(``shared/paper/rssm-paper.tex``) where it is stated; labels are the LaTeX labels.

Costs are for X of size n x p and a column set C of size c; nothing here forms an
n x n matrix.
"""

from __future__ import annotations

import numpy as np

from rssm._validation import check_generator

__all__ = [
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
]

#: Below this ratio of smallest to largest eigenvalue of the Gram matrix, `polar`
#: switches from the Gram route to a thin SVD. Gram route orthogonality error is about
#: eps * cond(Xi)^2, so 0.1 keeps it within ~10 eps.
_GRAM_MIN_RATIO = 0.1


def sym(a: np.ndarray) -> np.ndarray:
    """Symmetric part (a + a^T) / 2 of a square matrix."""
    return 0.5 * (a + a.T)


def skew(a: np.ndarray) -> np.ndarray:
    """Skew-symmetric part (a - a^T) / 2 of a square matrix."""
    return 0.5 * (a - a.T)


def tangent_projection(x: np.ndarray, xi: np.ndarray) -> np.ndarray:
    """Project ``xi`` onto the tangent space T_X St(n, p).

    P_T(xi) = xi - X sym(X^T xi)  (Section 2.1, after eq. ``eq-Rsubdiff``).
    Cost: 4 n p^2 flops.
    """
    return xi - x @ sym(x.T @ xi)


def block_tangent_projection(x: np.ndarray, cols: np.ndarray | slice, xi_c: np.ndarray) -> np.ndarray:
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
    """
    y = x.T @ xi_c
    yc = y[cols, :]
    y[cols, :] = 0.5 * (yc + yc.T)
    return xi_c - x @ y


def polar(xi: np.ndarray) -> np.ndarray:
    """Polar factor of ``xi``: the projection onto St(n, k) (eq. ``eq-polarretr``).

    Uses the k x k Gram matrix when ``xi`` is well conditioned (cond(xi)^2 <= 10, the
    case in every solver step, where xi = X - gamma * tangent), which costs
    4 n k^2 + O(k^3) flops; otherwise a thin SVD, which stays accurate to machine
    precision for ill-conditioned input. Either way ||Q^T Q - I|| is O(eps).

    Parameters
    ----------
    xi : ndarray, shape (n, k), n >= k, full column rank

    Returns
    -------
    ndarray, shape (n, k)
    """
    gram = xi.T @ xi
    w, v = np.linalg.eigh(gram)
    if w[0] > _GRAM_MIN_RATIO * w[-1] and w[0] > 0.0:
        return xi @ ((v / np.sqrt(w)) @ v.T)
    u, _, vt = np.linalg.svd(xi, full_matrices=False)
    return u @ vt


def project_submanifold_block(x: np.ndarray, cols: np.ndarray | slice, big_xi: np.ndarray) -> np.ndarray:
    """Project ``big_xi`` (n x c) onto the submanifold block M_{X_{-C}}.

    Lemma ``lem-projsubmfdblk``: P(Xi) = polar((I - X_{-C} X_{-C}^T) Xi). We use this
    general form rather than the shortcut polar(Xi), so rounding errors cannot make the
    updated block drift out of orthogonality with the untouched columns. X_{-C} X_{-C}^T Xi
    is applied as X W with W = X^T Xi and W[C] = 0, so no n x n matrix and no copy of
    X_{-C} is formed. Cost: 4 n p c + 4 n c^2 + O(c^3) flops.
    """
    w = x.T @ big_xi
    w[cols, :] = 0.0
    return polar(big_xi - x @ w)


def retract(x: np.ndarray, xi: np.ndarray) -> np.ndarray:
    """Polar retraction Retr_X(xi) = P_St(X + xi) (eq. ``eq-polarretr``)."""
    return polar(x + xi)


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
    """
    check_generator(rng)
    n, p = int(n), int(p)
    if not 1 <= p <= n:
        raise ValueError(f"random_point needs 1 <= p <= n, got n={n}, p={p}")
    g = rng.standard_normal((n, p))
    q, r = np.linalg.qr(g)
    d = np.sign(np.diag(r))
    d[d == 0] = 1.0
    return q * d


def feasibility(x: np.ndarray) -> float:
    """Return ||X^T X - I||_max, the largest entrywise deviation from orthonormality."""
    x = np.asarray(x, dtype=np.float64)
    g = x.T @ x
    g[np.diag_indices_from(g)] -= 1.0
    return float(np.max(np.abs(g))) if g.size else 0.0


def check_point(x: np.ndarray, atol: float = 1e-8, name: str = "x") -> None:
    """Raise ``ValueError`` saying how far ``x`` is from St(n, p) if it is off by > ``atol``.

    The message reports ||X^T X - I||_max and the tolerance, and suggests
    `rssm.stiefel.polar` to project a nearby matrix onto the manifold.
    """
    dev = feasibility(x)
    if not np.isfinite(dev) or dev > atol:
        raise ValueError(
            f"{name} is not on the Stiefel manifold: ||{name}^T {name} - I||_max = {dev:.3e} "
            f"exceeds the tolerance {atol:.1e}; pass a matrix with orthonormal columns "
            f"(rssm.stiefel.polar({name}) projects a full-rank matrix onto the manifold)"
        )
