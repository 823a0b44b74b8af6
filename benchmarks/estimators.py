"""rssm.estimators against scikit-learn (issue #21).

    python -m benchmarks.estimators [--quick] [--out DIR] [--only SECTION ...]

Sections (each writes DIR/SECTION.csv and a figure DIR/SECTION.png, and prints a table):

* ``subspace``: RobustSubspace (DPCP) against PCA, a MinCovDet-based PCA (eigenvectors of
  the MCD scatter), EllipticEnvelope, IsolationForest and LocalOutlierFactor on the paper's
  synthetic model: unit-norm inliers in a d-dimensional subspace (noise 1e-3), unit-norm
  Gaussian outliers, contamination 0-80%. Largest principal angle to the true subspace
  (degrees), outlier ROC AUC, fit time.
* ``digits``: scikit-learn's bundled digits; the inliers are one digit class, the outliers
  another class at 10-50%. ROC AUC and fit time (no true subspace here).
* ``wide``: RobustSubspace on wide data (100 samples, 200-1000 features, 30% outliers, a
  5-dimensional subspace, noise 1e-3): the default fit, which solves DPCP within the
  span of the samples, against the same fit in all n features (as before that reduction)
  and PCA. Largest principal angle, outlier ROC AUC, fit time, interleaved per instance.
* ``dictionary``: OrthogonalDictionaryLearning against DictionaryLearning,
  MiniBatchDictionaryLearning, the 2-D DCT basis and the PCA basis on 8x8 patches of
  scikit-image's bundled images (DC removed per patch). Codes are the lasso codes of each
  dictionary over a grid of penalties (soft thresholding for orthogonal ones, sparse_encode
  for the others); the l1 norm of the codes per patch is interpolated at equal relative
  reconstruction errors on held-out patches. Fit time.
* ``sparse_pca``: OrthogonalSparsePCA against SparsePCA on standardized digits and breast
  cancer data over a grid of penalties: adjusted explained variance (Zou et al.) against
  the number of nonzero loadings, orthogonality max |V V^T - I| of the unit-norm loadings,
  fit time; the variance is interpolated at equal sparsity.

rssm runs with its defaults ("rssm") and with a fixed geometric step ("rssm, geometric"),
because the default rule of today's rssm can fail on these problems (#18).
Times are wall-clock seconds of ``fit``, methods interleaved per instance, BLAS threads as
the environment sets them. ``--quick`` runs tiny sizes (tests/test_bench_estimators.py).
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import sys
import time
import warnings

import numpy as np

from benchmarks.estimators_decomp import (
    LEVELS,
    OUT_DIR,
    RSSM_KW,
    section_dictionary,
    section_sparse_pca,
    sparse_pca_summary,
    timed,
)

SECTIONS = ("subspace", "digits", "wide", "dictionary", "sparse_pca")
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "estimators")


def max_angle(s: np.ndarray, u: np.ndarray) -> float:
    """Largest principal angle (degrees) between span(s) and span(u), orthonormal columns."""
    sv = np.linalg.svd(s.T @ u, compute_uv=False)
    return float(np.degrees(np.arccos(np.clip(sv.min(), -1.0, 1.0))))


def _orth(a: np.ndarray) -> np.ndarray:
    return np.linalg.qr(a)[0]


# -- robust subspace ---------------------------------------------------------------------
def _subspace_methods(d: int, center: bool):
    """name -> fit(x) returning (basis n x d or None, scores: higher = more normal)."""
    from sklearn.covariance import EllipticEnvelope, MinCovDet
    from sklearn.decomposition import PCA
    from sklearn.ensemble import IsolationForest
    from sklearn.neighbors import LocalOutlierFactor

    from rssm.estimators import RobustSubspace
    from rssm.stepsizes import Geometric

    def rssm_fit(step):
        def fit(x):
            est = RobustSubspace(d, center=center, stepsize=step, random_state=0,
                                 **RSSM_KW).fit(x)
            return est.components_.T, est.score_samples(x)
        return fit

    def pca(x):
        est = PCA(d).fit(x)
        res = x - est.inverse_transform(est.transform(x))
        return est.components_.T, -np.linalg.norm(res, axis=1)

    def mcd_pca(x):
        keep = x.std(axis=0) > 0
        mcd = MinCovDet(random_state=0).fit(x[:, keep])
        u = np.zeros((x.shape[1], d))
        u[keep] = np.linalg.eigh(mcd.covariance_)[1][:, ::-1][:, :d]
        c = x.copy()
        c[:, keep] -= mcd.location_
        return u, -np.linalg.norm(c - (c @ u) @ u.T, axis=1)

    def envelope(x):
        keep = x.std(axis=0) > 0
        return None, EllipticEnvelope(random_state=0).fit(x[:, keep]).score_samples(x[:, keep])

    def iforest(x):
        return None, IsolationForest(random_state=0).fit(x).score_samples(x)

    def lof(x):
        return None, LocalOutlierFactor().fit(x).negative_outlier_factor_

    return {"rssm": rssm_fit(None), "rssm, geometric": rssm_fit(Geometric(0.1, 0.9)),
            "PCA": pca, "MinCovDet PCA": mcd_pca, "EllipticEnvelope": envelope,
            "IsolationForest": iforest, "LOF": lof}


def _run_methods(methods, x, labels, truth, base: dict) -> list[dict]:
    from sklearn.metrics import roc_auc_score

    rows = []
    for name, fit in methods.items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                (basis, score), t = timed(lambda fit=fit: fit(x))
            except Exception as exc:  # a baseline that cannot run here is reported, not fatal
                rows.append({**base, "method": name, "angle_deg": math.nan, "auc": math.nan,
                             "time_s": math.nan, "note": type(exc).__name__})
                continue
        angle = max_angle(truth, _orth(basis)) if truth is not None and basis is not None \
            else math.nan
        rows.append({**base, "method": name, "angle_deg": angle,
                     "auc": float(roc_auc_score(labels, score)), "time_s": t, "note": ""})
    return rows


def section_subspace(quick: bool) -> list[dict]:
    """The paper's DPCP model (Section 5.1): unit-norm inliers S g / ||g|| in a d-dim
    subspace and unit-norm Gaussian outliers o / ||o|| (so that the norm tells nothing),
    here with noise 1e-3 added to the inliers."""
    n, d, m = (10, 2, 200) if quick else (30, 5, 1000)
    fracs = (0.0, 0.3, 0.6) if quick else (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8)
    seeds = range(1 if quick else 3)
    methods = _subspace_methods(d, center=False)
    rows = []
    for seed in seeds:
        for frac in fracs:
            rng = np.random.default_rng([seed, int(100 * frac)])
            s = _orth(rng.standard_normal((n, d)))
            m_out = max(1, int(round(m * frac)))  # AUC needs both classes: >= 1 outlier
            g = rng.standard_normal((m - m_out, d))
            inl = (g / np.linalg.norm(g, axis=1, keepdims=True)) @ s.T
            inl += 1e-3 * rng.standard_normal(inl.shape)
            o = rng.standard_normal((m_out, n))
            x = np.vstack([inl, o / np.linalg.norm(o, axis=1, keepdims=True)])
            labels = np.r_[np.ones(m - m_out), np.zeros(m_out)]
            rows += _run_methods(methods, x, labels, s,
                                 {"seed": seed, "contamination": frac, "n": n, "d": d, "m": m})
    return rows


def section_digits(quick: bool) -> list[dict]:
    from sklearn.datasets import load_digits

    x_all, y_all = load_digits(return_X_y=True)
    pairs = [(0, 3)] if quick else [(a, (a + 3) % 10) for a in range(10)]
    fracs = (0.3,) if quick else (0.1, 0.3, 0.5)
    d = 10
    methods = _subspace_methods(d, center=True)
    rows = []
    for a, b in pairs:
        inl = x_all[y_all == a]
        pool = x_all[y_all == b]
        for frac in fracs:
            k = min(len(pool), int(round(len(inl) * frac / (1 - frac))))
            out = pool[np.random.default_rng(a).permutation(len(pool))[:k]]
            x = np.vstack([inl, out])
            labels = np.r_[np.ones(len(inl)), np.zeros(k)]
            rows += _run_methods(methods, x, labels, None,
                                 {"inlier_digit": a, "outlier_digit": b,
                                  "contamination": k / len(x), "d": d})
    return rows


def section_wide(quick: bool) -> list[dict]:
    """RobustSubspace with fewer samples than features: in the span of the samples (the
    default) and in all n features (`RobustSubspace._span` switched off)."""
    from sklearn.decomposition import PCA

    from rssm.estimators import RobustSubspace

    class FullSpace(RobustSubspace):
        def _span(self, data, d):
            return None

    d, m = 5, 100
    sizes = (150,) if quick else (200, 500, 1000)

    def fit_with(cls):
        def fit(x):
            est = cls(d, random_state=0).fit(x)
            return est.components_.T, est.score_samples(x)
        return fit

    def pca(x):
        est = PCA(d).fit(x)
        return est.components_.T, -np.linalg.norm(x - est.inverse_transform(est.transform(x)),
                                                   axis=1)

    methods = {"rssm": fit_with(RobustSubspace), "rssm, all features": fit_with(FullSpace),
               "PCA": pca}
    rows = []
    for n in sizes:
        rng = np.random.default_rng(n)
        s = _orth(rng.standard_normal((n, d)))
        m_out = 30
        inl = rng.standard_normal((m - m_out, d)) @ s.T
        inl += 1e-3 * rng.standard_normal(inl.shape)
        x = np.vstack([inl, rng.standard_normal((m_out, n))])
        labels = np.r_[np.ones(m - m_out), np.zeros(m_out)]
        rows += _run_methods(methods, x, labels, s, {"n": n, "m": m, "d": d})
    return rows


# -- output --------------------------------------------------------------------------------

def _plot_subspace(rows: list[dict], name: str, key: str, cols=("angle_deg", "auc")):
    """Median over seeds (or digit pairs) of ``cols`` against the outlier fraction."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(cols), figsize=(5 * len(cols), 3.8), squeeze=False)
    for meth in dict.fromkeys(r["method"] for r in rows):
        sel = [r for r in rows if r["method"] == meth]
        xs = sorted({round(float(r[key]), 3) for r in sel})
        for ax, col in zip(axes[0], cols, strict=True):
            vals = [[float(r[col]) for r in sel if round(float(r[key]), 3) == v] for v in xs]
            if not np.all(np.isnan(vals[0])):
                ax.plot(xs, [np.median(v) for v in vals], marker="o", label=meth)
            ax.set_xlabel("fraction of outliers")
            ax.set_ylabel({"angle_deg": "largest principal angle (deg)",
                           "auc": "outlier ROC AUC"}[col])
            if col == "angle_deg":
                ax.set_yscale("log")
    axes[0, -1].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(OUT_DIR[0], f"{name}.png"), dpi=110)
    plt.close(fig)


def _write(rows: list[dict], path: str) -> None:
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def _table(rows: list[dict], group: tuple[str, ...], cols: tuple[str, ...]) -> str:
    """Median of ``cols`` per ``group`` as a Markdown table."""
    keys = list(dict.fromkeys(tuple(r[g] for g in group) for r in rows))
    lines = ["| " + " | ".join(group + cols) + " |", "|" + "---|" * (len(group) + len(cols))]
    for k in keys:
        sel = [r for r in rows if tuple(r[g] for g in group) == k]
        vals = [np.nanmedian([float(r[c]) for r in sel]) if not all(
            math.isnan(float(r[c])) for r in sel) else math.nan for c in cols]
        lines.append("| " + " | ".join([f"{v:g}" if isinstance(v, float) else str(v)
                                        for v in k] + [f"{v:.4g}" for v in vals]) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="tiny sizes (seconds)")
    ap.add_argument("--out", default=OUT, help=f"output folder (default {OUT})")
    ap.add_argument("--only", nargs="*", choices=SECTIONS, default=list(SECTIONS))
    ap.add_argument("--replot", action="store_true",
                    help="redraw the subspace and digits figures from the CSVs in --out")
    args = ap.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    OUT_DIR[0] = args.out
    if args.replot:
        for name, key, cols in (("subspace", "contamination", ("angle_deg", "auc")),
                                ("digits", "level", ("auc",))):
            with open(os.path.join(args.out, f"{name}.csv"), newline="") as fh:
                _plot_subspace(list(csv.DictReader(fh)), name, key, cols)
        return 0
    if args.quick:
        RSSM_KW["max_iter"] = 100
    t0 = time.perf_counter()
    if "subspace" in args.only:
        rows = section_subspace(args.quick)
        _write(rows, os.path.join(args.out, "subspace.csv"))
        _plot_subspace(rows, "subspace", "contamination")
        print("\n## Robust subspace, synthetic (median over seeds)\n")
        print(_table(rows, ("contamination", "method"), ("angle_deg", "auc", "time_s")))
    if "digits" in args.only:
        rows = section_digits(args.quick)
        for r in rows:
            r["level"] = round(r["contamination"], 1)
        _write(rows, os.path.join(args.out, "digits.csv"))
        _plot_subspace(rows, "digits", "level", ("auc",))
        print("\n## Robust subspace, digits (median over digit pairs)\n")
        print(_table(rows, ("level", "method"), ("auc", "time_s")))
    if "wide" in args.only:
        rows = section_wide(args.quick)
        _write(rows, os.path.join(args.out, "wide.csv"))
        print("\n## Robust subspace, 100 samples of n features\n")
        print(_table(rows, ("n", "method"), ("angle_deg", "auc", "time_s")))
        for n in dict.fromkeys(r["n"] for r in rows):
            t = {r["method"]: r["time_s"] for r in rows if r["n"] == n}
            print(f"n = {n}: fit in all features / in the span of the samples "
                  f"{t['rssm, all features'] / t['rssm']:.1f}x")
    if "dictionary" in args.only:
        rows = section_dictionary(args.quick)
        _write(rows, os.path.join(args.out, "dictionary.csv"))
        print("\n## Orthogonal dictionary, 8x8 patches\n")
        cols = tuple(f"{k}_at_{lev:g}" for lev in LEVELS for k in ("l1", "nnz"))
        print(_table(rows, ("method",), ("l1_exact_train", "l1_exact") + cols + ("time_s",)))
    if "sparse_pca" in args.only:
        rows = section_sparse_pca(args.quick)
        _write(rows, os.path.join(args.out, "sparse_pca.csv"))
        summ = sparse_pca_summary(rows)
        _write(summ, os.path.join(args.out, "sparse_pca_summary.csv"))
        print("\n## Sparse PCA, 5 components, explained variance at equal sparsity\n")
        print(_table(summ, ("data", "method"), tuple(k for k in summ[0] if k.startswith(
            "ev_at")) + ("orthogonality_max", "zero_loadings_max", "time_median_s")))
    print(f"\n{'quick' if args.quick else 'full'} run, {time.perf_counter() - t0:.0f} s; "
          f"results in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
