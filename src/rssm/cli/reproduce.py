"""``rssm reproduce``: the paper's experiments (Section 5), with figures, CSV, JSON and a
report. Measured durations are in docs/cli.md, not here."""

from __future__ import annotations

import shlex
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from rssm.cli._common import (
    Formatter,
    UsageError,
    formats,
    note_not_redrawn,
    out,
    out_folder,
    positive_float,
    positive_int,
)

__all__ = ["add_parser", "run"]


def add_parser(sub) -> None:
    """The ``reproduce`` command.

    Parameters
    ----------
    sub : argparse._SubParsersAction
        The sub-commands of the ``rssm`` parser (``add_subparsers()``'s result).
    """
    from rssm.experiments.configs import PROBLEMS

    rep = sub.add_parser(
        "reproduce", help="run the paper's experiments (Section 5): figures, CSV, JSON, report",
        formatter_class=Formatter,
        description="Run RSM and RSSM (l = 3, 5, 10) with the paper's settings on several "
                    "seeds, then write results.csv, results.json, one PNG and PDF figure per "
                    "problem and report.md into --out. Results are saved as each run ends. "
                    "How long the full `rssm reproduce all --tuned` and --quick take, "
                    "measured: docs/cli.md.")
    rep.add_argument("experiment", choices=sorted(PROBLEMS) + ["all"],
                     help="which experiment")
    rep.add_argument("--out", default="rssm-results", metavar="DIR", help="output folder")
    rep.add_argument("--seeds", type=positive_int, default=5, metavar="N",
                     help="number of seeds (0, 1, ..., N-1)")
    rep.add_argument("--quick", action="store_true",
                     help="1/15 of the iteration budgets (same sizes)")
    rep.add_argument("--budget", type=positive_float, default=None, metavar="FACTOR",
                     help="multiply the iteration budgets by FACTOR in (0, 1] (at least 4 "
                          "iterations; overrides --quick); for tests and quick looks "
                          "(default: 1, the full budgets)")
    rep.add_argument("--tuned", action="store_true",
                     help="also run part 2: each method with its step size chosen from a grid "
                          "(paper schedule, geometric decay), reporting time to 1e-8")
    rep.add_argument("--resume", action="store_true",
                     help="keep the runs already in DIR/results.csv and run the rest")
    rep.add_argument("--overwrite", action="store_true",
                     help="delete earlier results in DIR first")
    rep.add_argument("--formats", default="png,pdf",
                     help="comma-separated figure formats (png, pdf, svg)")
    rep.add_argument("--quiet", action="store_true",
                     help="no progress bar and no per-run lines")


class _StderrLog:
    """One line per finished run on stderr; advisory: once stderr is gone (a closed pipe),
    the experiment goes on without it."""

    def __init__(self) -> None:
        self.alive = True

    def __call__(self, msg: str) -> None:
        if not self.alive:
            return
        try:
            print(f"rssm: {msg}", file=sys.stderr, flush=True)
        except (BrokenPipeError, OSError, ValueError):
            self.alive = False


def run(args, argv: Sequence[str]) -> int:
    """Run ``rssm reproduce``; return the exit status (130 after Ctrl-C).

    Parameters
    ----------
    args : argparse.Namespace
        The parsed command line of ``rssm reproduce``.
    argv : sequence of str
        The command-line arguments (after ``rssm``), recorded as the command in the
        results.

    Returns
    -------
    int
        The exit status: 0, or 130 after Ctrl-C (the finished runs are saved).

    Raises
    ------
    UsageError
        When options conflict or are out of range, or the runner refuses ``--out`` or
        ``--resume``.
    """
    from rssm.experiments import make_configs, render, reproduce
    from rssm.experiments.configs import QUICK_DIVISOR

    fmts = formats(args.formats)
    if args.resume and args.overwrite:
        raise UsageError("argument --resume: not allowed with argument --overwrite")
    if args.budget is not None and args.budget > 1:
        raise UsageError(f"argument --budget: must be in (0, 1], got {args.budget:g}")
    if args.budget == 1.0:
        # the full budgets, as the help says: the full run's settings (150 recorded points,
        # no "reduced run" banner, resumable without --budget); it overrides --quick
        args.budget, args.quick = None, False
    configs = make_configs(quick=args.quick, scale=args.budget)
    out_folder(args.out)
    if args.experiment != "all":
        configs = {args.experiment: configs[args.experiment]}
    # Progress bar on a terminal; one line per finished run otherwise (logs, nohup).
    tty = sys.stderr.isatty()
    progress = False if args.quiet else tty
    log = None if args.quiet or tty else _StderrLog()
    command = "rssm " + " ".join(shlex.quote(a) for a in argv)
    t0 = time.perf_counter()
    try:
        reproduce(configs, args.out, range(args.seeds),
                  quick=args.quick or args.budget is not None, tuned=args.tuned,
                  budget_scale=(args.budget if args.budget is not None
                                else 1.0 / QUICK_DIVISOR if args.quick else 1.0),
                  resume=args.resume, overwrite=args.overwrite, progress=progress,
                  command=command, log=log)
    except KeyboardInterrupt:
        print(f"rssm: interrupted; finished runs are saved in {args.out}; "
              "continue with --resume", file=sys.stderr)
        return 130
    except ValueError as exc:
        # the runner's refusals of the folder ("--out X already holds results.csv", "--resume:
        # ..."): said as every other refusal of an option is, "argument --out: ..."
        text = str(exc)
        for opt in ("--out", "--resume"):
            if text.startswith(opt + " ") or text.startswith(opt + ":"):
                raise UsageError(f"argument {opt}: {text[len(opt):].lstrip(': ')}") from None
        raise
    written = render(Path(args.out) / "results.csv", args.out, fmts, report=True)
    if not args.quiet:
        # the figures and report, and results.csv and results.json beside them
        out(f"rssm: {len(written) + 2} files written to {args.out} in "
            f"{time.perf_counter() - t0:.1f} s (report: {Path(args.out) / 'report.md'})")
    # a warning, not progress: --quiet does not hide it
    note_not_redrawn(written, fmts)
    return 0
