"""The dictionary and sparse PCA sections of ``python -m benchmarks.estimators`` (see
there), and what every section shares: the extra settings of the rssm estimators, timing,
interpolation at equal levels and the curve figures."""

from __future__ import annotations

import math
import os
import time
import warnings
from collections.abc import Callable

import numpy as np

#: Extra settings of every rssm estimator: ``--quick`` caps the iterations.
RSSM_KW: dict = {}
#: Folder of the figures (set by ``benchmarks.estimators.main``).
OUT_DIR = [os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "estimators")]


def timed(fn: Callable):
    """(fn(), wall seconds)."""
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


# -- dictionaries ------------------------------------------------------------------------
def _patches(quick: bool):
    from skimage import data
    from sklearn.feature_extraction.image import extract_patches_2d

    names = ("camera", "astronaut") if quick else ("camera", "astronaut", "coins", "moon",
                                                   "coffee", "chelsea")
    per, per_test = (100, 30) if quick else (2000, 500)
    train, test = [], []
    for i, name in enumerate(names):
        img = getattr(data, name)()
        if img.ndim == 3:
            img = img[..., :3] @ np.array([0.2125, 0.7154, 0.0721])
        img = np.asarray(img, dtype=np.float64) / 255.0
        for seed, out, k in ((i, train, per), (100 + i, test, per_test)):
            p = extract_patches_2d(img, (8, 8), max_patches=k, random_state=seed)
            p = p.reshape(len(p), 64)
            out.append(p - p.mean(axis=1, keepdims=True))
    return names, np.vstack(train), np.vstack(test)


def dct_basis() -> np.ndarray:
    """The 64 orthonormal 2-D DCT-II atoms (rows) of row-major 8x8 patches."""
    from scipy.fft import dct

    c = dct(np.eye(8), norm="ortho", axis=0)
    return np.kron(c, c)


def lasso_curve(atoms: np.ndarray, y: np.ndarray, alphas, orthogonal: bool):
    """(relative error, mean l1 per patch, mean nonzeros per patch) for each alpha."""
    from sklearn.decomposition import sparse_encode

    out = []
    norm = np.linalg.norm(y)
    for a in alphas:
        if orthogonal:
            c = y @ atoms.T
            c = np.sign(c) * np.maximum(np.abs(c) - a, 0.0)
        else:
            c = sparse_encode(y, atoms, algorithm="lasso_lars", alpha=a)
        err = np.linalg.norm(y - c @ atoms) / norm
        out.append((err, np.abs(c).sum(axis=1).mean(), np.count_nonzero(c, axis=1).mean()))
    return np.array(out)


def at_level(curve: np.ndarray, level: float, col: int) -> float:
    """Column ``col`` of the curve interpolated at relative error ``level`` (NaN outside)."""
    order = np.argsort(curve[:, 0])
    e, v = curve[order, 0], curve[order, col]
    if not e[0] <= level <= e[-1]:
        return math.nan
    return float(np.interp(level, e, v))


LEVELS = (0.05, 0.1, 0.2)


def section_dictionary(quick: bool) -> list[dict]:
    from sklearn.decomposition import PCA, DictionaryLearning, MiniBatchDictionaryLearning

    from rssm.estimators import OrthogonalDictionaryLearning
    from rssm.stepsizes import Geometric

    names, train, test = _patches(quick)
    it = 2 if quick else 200
    fits = {
        "rssm ODL": lambda: OrthogonalDictionaryLearning(
            random_state=0, **RSSM_KW).fit(train).components_,
        "rssm ODL from DCT": lambda: OrthogonalDictionaryLearning(
            dict_init=dct_basis(), random_state=0, **RSSM_KW).fit(train).components_,
        # a geometric step scaled by the data: a first move of about 0.3 rad
        "rssm ODL from DCT, geometric": lambda: OrthogonalDictionaryLearning(
            dict_init=dct_basis(), random_state=0, stepsize=Geometric(
                0.3 / np.linalg.norm(train, axis=1).sum(), 0.99), **RSSM_KW).fit(
                    train).components_,
        "DCT": lambda: dct_basis(),
        "PCA basis": lambda: PCA(64).fit(train).components_,
        "MiniBatchDictionaryLearning": lambda: MiniBatchDictionaryLearning(
            64, alpha=0.1, batch_size=256, max_iter=it, random_state=0).fit(train).components_,
        "DictionaryLearning": lambda: DictionaryLearning(
            64, alpha=0.1, max_iter=it if quick else 30, random_state=0).fit(
                train[:2000]).components_,
    }
    alphas = np.geomspace(1e-5, 0.3, 5 if quick else 18)
    rows, curves = [], {}
    for name, fit in fits.items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            atoms, t = timed(fit)
        ortho = np.abs(atoms @ atoms.T - np.eye(len(atoms))).max() < 1e-8
        curve = lasso_curve(atoms, test, alphas, ortho)
        curves[name] = curve
        row = {"method": name, "images": "+".join(names), "train": len(train),
               "test": len(test), "orthogonal": bool(ortho), "time_s": t,
               "l1_exact": float(np.abs(test @ atoms.T).sum(axis=1).mean()) if ortho
               else math.nan,
               "l1_exact_train": float(np.abs(train @ atoms.T).sum(axis=1).mean()) if ortho
               else math.nan}
        for lev in LEVELS:
            row[f"l1_at_{lev:g}"] = at_level(curve, lev, 1)
            row[f"nnz_at_{lev:g}"] = at_level(curve, lev, 2)
        rows.append(row)
    plot_curves(curves, "relative reconstruction error (held-out patches)",
                 "mean l1 norm of the codes", "dictionary")
    return rows


# -- sparse PCA --------------------------------------------------------------------------
def adjusted_ev_ratio(x: np.ndarray, comps: np.ndarray) -> float:
    """Adjusted variance of the scores x @ V^T (rows of V scaled to unit norm) over the total
    variance of x (centred): Zou, Hastie and Tibshirani (2006)."""
    nrm = np.linalg.norm(comps, axis=1)
    v = comps[nrm > 0] / nrm[nrm > 0, None]
    if not len(v):
        return 0.0
    r = np.linalg.qr(x @ v.T, mode="r")
    return float(np.sum(np.diag(r) ** 2) / np.sum(x * x))


def section_sparse_pca(quick: bool) -> list[dict]:
    from sklearn.datasets import load_breast_cancer, load_digits
    from sklearn.decomposition import SparsePCA
    from sklearn.preprocessing import StandardScaler

    from rssm.estimators import OrthogonalSparsePCA
    from rssm.stepsizes import Geometric

    sets = {"digits": load_digits, "breast_cancer": load_breast_cancer}
    if quick:
        sets = {"breast_cancer": load_breast_cancer}
    r = 5
    rows = []
    for dname, load in sets.items():
        x = load(return_X_y=True)[0]
        if quick:
            x = x[:150]
        x = StandardScaler().fit_transform(x)
        x = x[:, x.std(axis=0) > 0]
        corr = x.T @ x / len(x)
        step = Geometric(1.0 / np.linalg.eigvalsh(corr)[-1], 0.99)  # SparsePCA's reference
        grid = np.geomspace(0.02, 4.0, 3 if quick else 9)
        fits = {}
        for k, a in enumerate(grid):
            sk_alpha = float(np.geomspace(0.05, 30.0, len(grid))[k])
            fits[("rssm", a)] = (OrthogonalSparsePCA, dict(mu=float(a)))
            fits[("rssm, geometric", a)] = (OrthogonalSparsePCA,
                                            dict(mu=float(a), stepsize=step))
            fits[("SparsePCA", sk_alpha)] = (SparsePCA, dict(
                alpha=sk_alpha, max_iter=30 if quick else 1000))
        for (name, a), (cls, kw) in fits.items():
            if cls is OrthogonalSparsePCA:
                kw = {**kw, **RSSM_KW}
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                est, t = timed(lambda c=cls, k=kw, x=x: c(r, random_state=0, **k).fit(x))
            comps = est.components_
            nrm = np.linalg.norm(comps, axis=1)
            v = comps[nrm > 0] / nrm[nrm > 0, None]  # a zero loading is counted apart
            rows.append({"data": dname, "method": name, "penalty": a,
                         "nonzero_frac": float(np.mean(comps != 0)),
                         "ev_ratio": adjusted_ev_ratio(x, comps),
                         "orthogonality": float(np.abs(v @ v.T - np.eye(len(v))).max())
                         if len(v) else math.nan,
                         "zero_loadings": int(np.sum(nrm == 0)), "time_s": t})
    curves = {}
    for row in rows:
        curves.setdefault(f"{row['method']} ({row['data']})", []).append(
            (row["nonzero_frac"], row["ev_ratio"], 0.0))
    plot_curves({k: np.array(v) for k, v in curves.items()}, "fraction of nonzero loadings",
                 "adjusted explained variance ratio", "sparse_pca", logy=False)
    return rows


def sparse_pca_summary(rows: list[dict], levels=(0.2, 0.4, 0.6)) -> list[dict]:
    """Explained variance of each method interpolated at equal fractions of nonzeros."""
    out = []
    keys = sorted({(r["data"], r["method"]) for r in rows})
    for data, meth in keys:
        sel = [r for r in rows if r["data"] == data and r["method"] == meth]
        curve = np.array([(r["nonzero_frac"], r["ev_ratio"]) for r in sel])
        row = {"data": data, "method": meth,
               "orthogonality_max": float(np.nanmax([r["orthogonality"] for r in sel])),
               "zero_loadings_max": max(r["zero_loadings"] for r in sel),
               "time_median_s": float(np.median([r["time_s"] for r in sel]))}
        for lev in levels:
            row[f"ev_at_{lev:g}"] = at_level(curve, lev, 1)
        out.append(row)
    return out


def plot_curves(curves: dict, xlabel: str, ylabel: str, name: str, logy: bool = True):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for label, c in curves.items():
        o = np.argsort(c[:, 0])
        ax.plot(c[o, 0], c[o, 1], marker="o", ms=3, label=label)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if logy:
        ax.set_yscale("log")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(OUT_DIR[0], f"{name}.png"), dpi=110)
    plt.close(fig)
