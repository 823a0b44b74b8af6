"""Helpers shared by the benchmark scripts: the machine line, CSV writing, problems,
starts, solvers and the plain NumPy reference step. No benchmark section lives here, so
every script can import it without import cycles."""

from __future__ import annotations

import csv
import math
import os
import platform
import time
from collections.abc import Callable

import numpy as np

import rssm
from rssm import stiefel
from rssm.blocks import Partition, UniformPairs
from rssm.solvers.rsm import RSMSolver
from rssm.solvers.rssm import RSSMSolver

PC = time.perf_counter


def machine() -> str:
    """One line describing the machine and the BLAS."""
    try:
        with open("/proc/cpuinfo") as fh:
            model = next((ln.split(":", 1)[1].strip() for ln in fh if ln.startswith("model name")),
                         platform.processor())
    except OSError:
        model = platform.processor()
    blas = "?"
    try:
        cfg = np.show_config(mode="dicts")
        b = cfg["Build Dependencies"]["blas"]
        blas = f"{b.get('name')} {b.get('version')}"
    except Exception:  # noqa: BLE001 - best effort description
        pass
    return (f"{model}, {os.cpu_count()} logical CPUs, Python {platform.python_version()}, "
            f"NumPy {np.__version__}, BLAS {blas}, BLAS threads "
            f"{os.environ.get('OPENBLAS_NUM_THREADS', '?')}; machine shared with other jobs")


def write_csv(path: str, rows: list[dict]) -> None:
    if not rows:
        return
    keys = list(rows[0])
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=keys)
        w.writeheader()
        w.writerows(rows)


def fit_slope(xs, ys) -> float:
    """Least-squares slope of log y against log x."""
    lx, ly = np.log(np.asarray(xs, float)), np.log(np.asarray(ys, float))
    return float(np.polyfit(lx, ly, 1)[0])


# Problems and solvers -----------------------------------------------------------------------
def dpcp(n: int, p: int, m: int, seed: int = 0) -> rssm.problems.DPCP:
    """DPCP with the paper's 30 % inliers, d = n - p."""
    n_in = int(round(0.3 * m))
    return rssm.problems.DPCP.synthetic(n=n, d=n - p, n_inliers=n_in, n_outliers=m - n_in,
                                        seed=seed)


def start(prob, seed: int = 0) -> np.ndarray:
    """Haar-random start. Offset seed: ``ODL.synthetic(seed=s)`` draws X* as the first
    draw of default_rng(s), so starting from random_point with the same s would start at X*."""
    return stiefel.random_point(*prob.shape, np.random.default_rng(10_000 + seed))


def make_solver(prob, x0, ell: int | None, seed: int = 0):
    rng = np.random.default_rng(seed)
    if ell is None:
        return RSMSolver(prob, x0, None, None, rng)
    return RSSMSolver(prob, x0, Partition.uniform(prob.shape[1], ell), UniformPairs(), rng)


def data_of(prob) -> np.ndarray:
    return prob.yt if hasattr(prob, "yt") else prob.y


# Section 1 and 2: per-iteration cost --------------------------------------------------------
def dominant_gemms(yt: np.ndarray, x: np.ndarray, c: int) -> Callable[[], None]:
    """The two products of one iteration on c columns, alone: G_C^T = W_C Yt^T and
    Z_C^T = X_C^T Yt (2 m n c flops each), same shapes and layouts as in the oracle."""
    m = yt.shape[1]
    w = np.ones((c, m))
    z = np.empty((c, m))
    xc = x[:, :c]

    def run() -> None:
        np.matmul(w, yt.T)
        np.matmul(xc.T, yt, out=z)

    return run


def first_time(res, tol: float) -> float:
    err, t = res.trace["error"], res.trace["time"]
    hit = np.flatnonzero(err <= tol)
    return float(t[hit[0]]) if hit.size else math.inf



def plain_numpy_step(prob, kind: str):
    """A plain NumPy RSM/RSSM step, written the obvious way: Yt^T X recomputed in full
    every iteration, fancy-indexed column blocks, tangent projection and SVD polar."""
    yt = data_of(prob)
    m = yt.shape[1]
    is_dpcp = kind == "dpcp"

    def subgrad(x):
        z = yt.T @ x
        if is_dpcp:
            r = np.linalg.norm(z, axis=1)
            return yt @ (z / np.where(r > 0, r, np.inf)[:, None]) / m
        return yt @ np.sign(z)

    def polar(a):
        u, _, vt = np.linalg.svd(a, full_matrices=False)
        return u @ vt

    def rsm(x, gamma, rng):
        g = subgrad(x)
        xtg = x.T @ g
        return polar(x - gamma * (g - x @ (0.5 * (xtg + xtg.T))))

    def rssm_step(x, gamma, rng, blocks):
        i, j = rng.choice(len(blocks), 2, replace=False)
        c = np.concatenate([blocks[i], blocks[j]])
        g = subgrad(x)[:, c]
        y = x.T @ g
        y[c] = 0.5 * (y[c] + y[c].T)
        xi = x[:, c] - gamma * (g - x @ y)
        rest = np.setdiff1d(np.arange(x.shape[1]), c)
        xr = x[:, rest]
        x = x.copy()
        x[:, c] = polar(xi - xr @ (xr.T @ xi))
        return x

    return rsm, rssm_step




def pymanopt_problem(prob, man=None):
    """``prob``'s cost and Euclidean subgradient as a Pymanopt problem on ``man`` (default
    Pymanopt's ``Stiefel(n, p)`` with its own retraction; the peers' setup: Pymanopt
    computes both in full each call)."""
    import pymanopt

    if man is None:
        man = pymanopt.manifolds.Stiefel(*prob.shape)

    @pymanopt.function.numpy(man)
    def cost(x):
        return prob.cost(x)

    @pymanopt.function.numpy(man)
    def egrad(x):
        return prob.subgradient(x)

    return pymanopt.Problem(man, cost, euclidean_gradient=egrad)
