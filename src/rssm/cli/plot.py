"""``rssm plot``: redraw the figures (and report.md) of a reproduction from its CSV."""

from __future__ import annotations

from pathlib import Path

from rssm.cli._common import (
    Formatter,
    UsageError,
    formats,
    note_not_redrawn,
    out,
    out_folder,
)

__all__ = ["add_parser", "run"]


def add_parser(sub) -> None:
    """The ``plot`` command.

    Parameters
    ----------
    sub : argparse._SubParsersAction
        The sub-commands of the ``rssm`` parser (``add_subparsers()``'s result).
    """
    plot = sub.add_parser("plot", help="redraw figures (and report.md) from a results CSV",
                          formatter_class=Formatter,
                          description="Redraw the figures of a reproduction from its "
                                      "results.csv; with results.json beside it, also "
                                      "rewrite report.md.")
    plot.add_argument("csv", metavar="RESULTS.csv", help="results.csv of `rssm reproduce`")
    plot.add_argument("--out", default=None, metavar="DIR",
                      help="folder for the figures (default: the CSV's folder)")
    plot.add_argument("--formats", default="png,pdf",
                      help="comma-separated figure formats (png, pdf, svg)")
    plot.add_argument("--no-report", action="store_true", help="do not rewrite report.md")


def run(args) -> int:
    """Run ``rssm plot``; return the exit status.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed command line of ``rssm plot``.

    Returns
    -------
    int
        The exit status, 0.

    Raises
    ------
    UsageError
        When ``RESULTS.csv`` is a folder or no file, or an option is invalid.
    """
    from rssm.experiments import render

    fmts = formats(args.formats)
    path = Path(args.csv)
    if path.is_dir() and (path / "results.csv").is_file():
        raise UsageError(f"argument RESULTS.csv: {path} is a folder; pass the file in it, "
                         f"{path / 'results.csv'}")
    if path.is_dir():
        raise UsageError(f"argument RESULTS.csv: {path} is a folder with no results.csv in "
                         "it; rssm plot redraws the results.csv that rssm reproduce --out "
                         "writes (the trace.csv of rssm solve is not one)")
    if not path.is_file():
        raise UsageError(f"argument RESULTS.csv: no such file: {path}")
    if args.out is not None:
        out_folder(args.out)
    report = not args.no_report and (path.parent / "results.json").exists()
    written = render(path, args.out, fmts, report=report)
    for w in written:
        out(w)
    note_not_redrawn(written, fmts)
    return 0
