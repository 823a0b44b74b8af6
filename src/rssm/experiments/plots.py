"""Figures like the paper's ``fig-rsr1`` and ``fig-odl1``: two log-log panels, error
against flops and against CPU seconds, median over seeds with a min-max band.
"""

from __future__ import annotations

import copy
import os
import tempfile
import warnings
from collections.abc import Sequence
from pathlib import Path

import matplotlib
import matplotlib.ticker
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from rssm._validation import library_stacklevel  # noqa: E402
from rssm.experiments.analysis import Run, median_band, method_order  # noqa: E402
from rssm.experiments.configs import MethodSpec, temp_prefix  # noqa: E402
from rssm.experiments.io import replace_atomically  # noqa: E402

__all__ = ["STYLES", "plot_comparison", "seed_line", "zero_floor"]

#: Colour, line style and marker per method key (distinct also in grey print).
STYLES = {
    "rsm": ("black", "-", "o"),
    "rssm-l3": ("tab:blue", "--", "s"),
    "rssm-l5": ("tab:orange", "-.", "^"),
    "rssm-l10": ("tab:green", ":", "D"),
}
_EXTRA = ["tab:red", "tab:purple", "tab:brown", "tab:pink"]


def _style(key: str, i: int):
    return STYLES.get(key, (_EXTRA[i % len(_EXTRA)], "-", "v"))


def seed_line(xs: np.ndarray, err: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One run's points on a log axis: those with x > 0, and the start (x = 0, off the
    axis) as a step, its error held until the first iteration's cost (before, each method
    seemed to start at the error of its first iterate: RSM near 5e-3, RSSM l = 10 near 0.5,
    all from 0.12).

    Parameters
    ----------
    xs : numpy.ndarray of shape (m,)
        The run's horizontal values (time or flops) at its recorded points, in order.
    err : numpy.ndarray of shape (m,)
        Its errors at those points.

    Returns
    -------
    x, e : numpy.ndarray
        The points with x > 0; when the first recorded point has x <= 0, preceded by the
        first positive x with the first point's error.
    """
    pos = xs > 0
    xp, ep = xs[pos], err[pos]
    if xp.size and not pos[0]:
        xp, ep = np.r_[xp[0], xp], np.r_[err[0], ep]
    return xp, ep


def zero_floor(runs: Sequence[Run]) -> float | None:
    """Where an error of exactly 0 is drawn on the log axis, or None if no run has one.

    An error of 0 is an exact recovery, which a log axis cannot show: matplotlib drops
    the points, so a run that reached it ended in mid-air, and a figure whose errors were
    all 0 was empty (an audit). They are drawn at a tenth of the least positive error of
    the figure (1e-16 when there is none), on a dotted line labelled "0".

    Parameters
    ----------
    runs : sequence of Run
        The runs of one figure.

    Returns
    -------
    float or None
        The floor, or None when no error is 0.
    """
    errs = [r.error for r in runs if r.error.size]
    if not errs or not any((e == 0).any() for e in errs):
        return None
    pos = [float(e[e > 0].min()) for e in errs if (e > 0).any()]
    return min(pos) / 10.0 if pos else 1e-16


def plot_comparison(runs: Sequence[Run], title: str, error_label: str,
                    out_stem: str | os.PathLike, formats: Sequence[str] = ("png", "pdf"),
                    stepsizes: dict[str, str] | None = None) -> list[Path]:
    """Draw one figure (error vs flops, error vs CPU seconds) and save it.

    Parameters
    ----------
    runs : sequence of Run
        All runs of one part and problem (any methods, any seeds).
    title : str
        Figure title.
    error_label : str
        Name of the error measure (y axis).
    out_stem : path
        File name without extension; one file per format is written.
    formats : sequence of str
        Image formats, e.g. ``("png", "pdf")``.
    stepsizes : dict, optional
        Method key -> step-size text to show in the legend.

    Returns
    -------
    list of Path
        Files written.
    """
    floor = zero_floor(runs)
    if floor is not None:
        lifted = []
        for r in runs:
            r = copy.copy(r)
            r.error = np.where(r.error == 0, floor, r.error)
            lifted.append(r)
        runs = lifted
    known = any(np.isfinite(r.error).any() for r in runs)
    by_method: dict[str, list[Run]] = {}
    for r in runs:
        by_method.setdefault(r.method, []).append(r)
    fig, axes = plt.subplots(1, 2, figsize=(11.5, 5.2), constrained_layout=True)
    counts = sorted({len(v) for v in by_method.values()})
    # the seeds each curve is over: one count, or the range where the methods differ (a
    # run stopped part way: the legend said "median of 3" for methods that had 2; a
    # user's audit)
    seeds = ("no seeds" if not counts else
             f"{counts[0]} seed{'s' if counts[0] > 1 else ''}" if len(counts) == 1 else
             f"{counts[0]} to {counts[-1]} seeds (each method over the seeds it finished)")
    for i, key in enumerate(method_order(by_method)):
        color, ls, marker = _style(key, i)
        group = by_method[key]
        label = MethodSpec.from_key(key).label
        if stepsizes and key in stepsizes:
            label += f", {stepsizes[key]}"
        for ax, axis in zip(axes, ("flops", "time"), strict=True):
            grid, med, lo, hi = median_band(group, axis)
            if grid.size == 0:
                continue
            ax.fill_between(grid, lo, hi, color=color, alpha=0.15, linewidth=0)
            for r in group:  # each seed, faint, so a split across seeds stays visible
                xp, ep = seed_line(getattr(r, axis), r.error)
                # held between records, as the median and the report's tables read them
                ax.plot(xp, ep, color=color, linewidth=0.6, alpha=0.35, drawstyle="steps-post")
            ax.plot(grid, med, color=color, linestyle=ls, linewidth=1.8, label=label,
                    marker=marker, markevery=max(1, grid.size // 6), markersize=5)
    for ax, xlabel in zip(axes, ("flops (model count)", "time (s, solver only, wall clock)"),
                          strict=True):
        ax.set_xscale("log")
        ax.set_yscale("log")
        if floor is not None:
            ax.axhline(floor, color="grey", linestyle=":", linewidth=0.9)
            ax.annotate("error 0 (exact)", (0.01, floor), xycoords=("axes fraction", "data"),
                        xytext=(2, 3), textcoords="offset points", fontsize=8, color="grey")
        if not known:
            # (an audit: every error nan, "unknown", drew two empty panels and no legend)
            ax.text(0.5, 0.5, "no known error to draw:\nthe column error is nan in every row",
                    transform=ax.transAxes, ha="center", va="center", fontsize=10)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(f"error  {error_label}")
        ax.grid(True, which="major", alpha=0.35)
        ax.grid(True, which="minor", alpha=0.12)
    for ax in axes:
        # matplotlib labels 2x, 4x, 6x 10^k on a log axis under two decades, and they ran
        # into each other on the time axis of a short run (a review): from one decade to
        # three, labels at 2x and 5x 10^k; from three on, the decades only; under one,
        # matplotlib's (its linear ticks there, all labelled as 2x and 5x, ran together)
        for axis, (lo, hi) in ((ax.xaxis, ax.get_xlim()), (ax.yaxis, ax.get_ylim())):
            if not lo > 0:
                continue
            if hi / lo >= 1e3:
                axis.set_minor_formatter(matplotlib.ticker.NullFormatter())
            elif hi / lo >= 10.0:      # (under a decade matplotlib's own labels are clean)
                axis.set_minor_locator(matplotlib.ticker.LogLocator(10.0, subs=(2.0, 5.0)))
                axis.set_minor_formatter(matplotlib.ticker.LogFormatterSciNotation(
                    labelOnlyBase=False, minor_thresholds=(3.0, 3.0)))
    axes[0].set_title("error vs flops")
    axes[1].set_title("error vs time")
    handles, labels = axes[0].get_legend_handles_labels()
    if handles:
        fig.legend(handles, labels, loc="outside lower center", ncol=2,
                   fontsize=9, framealpha=0.9,
                   title=(f"thick line: median of {seeds}, drawn until half of them have "
                          "ended; shaded band: min to max over seeds;\nthin lines: each seed "
                          "from its starting error; every recorded error is held until the "
                          "next record") if counts != [1] else (
                       "one seed: its error, every recorded value held until the next "
                       "record (no median or band)"),
                   title_fontsize=9)
    fig.suptitle(title, fontsize=12)
    if not known:
        warnings.warn(f"{title}: the column error is nan (unknown) in every row; the figure "
                      "has no curve", UserWarning, stacklevel=library_stacklevel())
    out_stem = Path(out_stem)
    out_stem.parent.mkdir(parents=True, exist_ok=True)
    written = []
    for fmt in formats:
        path = out_stem.with_suffix(f".{fmt}")
        # temporary files of a draw killed before its rename (kill -9), by their own
        # prefix (a pattern of mkstemp's names also matched a user's .odl.20261126.pdf)
        for stale in path.parent.glob(f"{temp_prefix(path.stem)}*.{fmt}"):
            stale.unlink(missing_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=temp_prefix(path.stem), suffix=f".{fmt}",
                                   dir=path.parent)
        os.close(fd)
        try:
            # no creation date in PDFs, so redrawing unchanged data gives the same file
            meta = {"CreationDate": None} if fmt == "pdf" else None
            fig.savefig(tmp, dpi=130, format=fmt, metadata=meta)
            replace_atomically(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        written.append(path)
    plt.close(fig)
    return written
