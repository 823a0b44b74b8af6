"""The paper's experiments (Section ``sect-exp``): configurations, runner, result files,
figures and report, as driven by ``rssm reproduce`` and ``rssm plot``.

>>> from rssm.experiments import make_configs
>>> sorted(make_configs(quick=True))
['dpcp', 'odl']
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from rssm.experiments import io
from rssm.experiments.analysis import group_runs
from rssm.experiments.configs import (
    FIGURE_FORMATS,
    PROBLEMS,
    QUICK_DIVISOR,
    make_configs,
    sizes_text,
    stepsize_label,
)
from rssm.experiments.report import REPORT_TITLE, write_report
from rssm.experiments.runner import CSV_NAME, JSON_NAME, reproduce

__all__ = ["make_configs", "reproduce", "render", "CSV_NAME", "JSON_NAME", "PROBLEMS"]


def __getattr__(name: str):
    # `plot_comparison` (and the submodule `plots`) were reachable from here; they are read
    # when asked for, so that the package (and `rssm --help`) does not import matplotlib
    if name in ("plot_comparison", "plots"):
        import importlib

        plots = importlib.import_module("rssm.experiments.plots")
        return plots if name == "plots" else plots.plot_comparison
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | {"plot_comparison", "plots"})


def _written_by_rssm(path: Path) -> bool:
    """``path`` starts with the first line of `write_report`'s text."""
    try:
        with path.open(encoding="utf-8") as fh:
            return fh.readline().startswith(REPORT_TITLE)
    except (OSError, UnicodeDecodeError):
        return False


def not_redrawn(written: Sequence[Path]) -> list[Path]:
    """Figures beside ``written`` (what `render` returned) of the same name in another
    format that this draw did not write: drawn earlier, perhaps from fewer runs.

    Parameters
    ----------
    written : sequence of Path
        The files a draw wrote.

    Returns
    -------
    list of Path
        The existing sibling figures (same name, another of the figure formats) that
        ``written`` lacks, sorted.
    """
    drawn = {Path(w) for w in written}
    return sorted(sib for w in drawn if w.suffix[1:] in FIGURE_FORMATS
                  for fmt in FIGURE_FORMATS
                  if (sib := w.with_suffix("." + fmt)) not in drawn and sib.is_file())


def render(csv_path: str | os.PathLike, out: str | os.PathLike | None = None,
           formats: Sequence[str] = ("png", "pdf"), report: bool = True) -> list[Path]:
    """Draw the figures (and write report.md) from a results CSV.

    Parameters
    ----------
    csv_path : path
        ``results.csv`` written by `reproduce`.
    out : path, optional
        Folder for the figures; default: the CSV's folder.
    formats : sequence of str
        Image formats.
    report : bool
        Also write ``report.md``; needs ``results.json`` next to the CSV.

    Returns
    -------
    list of Path
        Files written.
    """
    # (matplotlib is read here, not when the package is: `rssm --help` and `rssm solve`
    # started in 0.6 s, 0.44 s of them importing it; a user's audit)
    from rssm.experiments.plots import plot_comparison

    csv_path = Path(csv_path)
    out = csv_path.parent if out is None else Path(out)
    rows = io.read_rows(csv_path)
    if not rows:
        raise ValueError(f"{csv_path} holds no runs to plot")
    json_path = csv_path.parent / JSON_NAME
    doc = None
    if json_path.exists():
        try:
            doc = io.read_run_json(json_path)
        except (OSError, ValueError) as exc:
            if report:
                raise ValueError(f"{exc}; the report needs it (--no-report draws the "
                                 "figures without it)") from None
            # the figures alone: titles from the built-in configurations
    if report and doc is not None:
        # an audit: `rssm plot --out DIR` replaced a report.md of the user's in DIR
        mine = out / "report.md"
        if mine.is_file() and not _written_by_rssm(mine):
            raise ValueError(f"{mine} is not a report rssm wrote; pass --no-report or "
                             "another --out to keep it")
    runs = group_runs(rows)
    written: list[Path] = []
    problems = doc["settings"]["problems"] if doc else {}
    choice = doc.get("tuned_choice", {}) if doc else {}
    settings = doc["settings"] if doc else {}
    scale = settings.get("budget_scale", 1.0 / QUICK_DIVISOR if settings.get("quick") else 1.0)
    reduced = f"{scale:.3g}" if settings.get("quick") or scale != 1.0 else ""
    for part, suffix in (("paper", ""), ("tuned", "-tuned")):
        names = sorted({k[1] for k in runs if k[0] == part})
        for name in names:
            sel = [r for k, r in runs.items() if k[0] == part and k[1] == name]
            cfg = problems.get(name) or (PROBLEMS[name].as_dict() if name in PROBLEMS else {})
            title = cfg.get("title", name)
            if cfg.get("synthetic"):
                title += f" [{sizes_text(name, cfg['synthetic'])}]"
            title += ": paper's step sizes" if part == "paper" else ": tuned step sizes"
            if reduced:     # a figure passed on alone still says it is not the full run
                title += f"\n(reduced run: iteration budgets {reduced} times the full ones)"
            steps = None
            if part == "tuned" and name in choice:
                steps = {k: stepsize_label(v) for k, v in choice[name].items()}
            written += plot_comparison(sel, title, cfg.get("error_label", "error"),
                                       out / f"{name}{suffix}", formats, steps)
    if report:
        if doc is None:
            raise ValueError(f"report.md needs {json_path} next to the CSV")
        path = out / "report.md"
        figures = {w.name for w in written}
        io.atomic_write_text(path, write_report(runs, doc, figures))
        written.append(path)
    return written
