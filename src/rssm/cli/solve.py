"""``rssm solve PROBLEM``: one run of RSSM or RSM on a built-in problem.

The problems and their instance options come from `rssm.problems.REGISTRY` (the keywords
of each class's ``synthetic``) and `rssm.problems.registry.DATA` (what a data file needs);
nothing here names a problem. Exit status: 0 after a run, 2 for bad usage (before the
run), 130 after Ctrl-C (the run so far is printed and saved), 1 when a result file could
not be written.
"""

from __future__ import annotations

import argparse
import inspect
import shlex
import sys
from collections.abc import Sequence

import numpy as np

from rssm._validation import iterations
from rssm.cli import data as data_cli
from rssm.cli import output, stepsize
from rssm.cli._common import (
    Formatter,
    Given,
    Parser,
    StdoutClosed,
    UsageError,
    first_line,
    given,
    int_at_least,
    nonneg_float,
    nonneg_int,
    out,
    param_type,
    positive_float,
    positive_int,
    threads,
)
from rssm.cli._core import result_to_dict, stepsize_from_spec

__all__ = ["add_parser", "run", "problem_options", "progress", "document"]

#: Library argument names whose command-line option has another name.
_ALIASES = {"n_blocks": "--blocks"}


def problem_options(cls) -> list[tuple[str, inspect.Parameter]]:
    """Keyword parameters of ``cls.synthetic`` other than ``seed``, as (option, parameter).

    Parameters
    ----------
    cls : type
        A problem class of `rssm.problems.REGISTRY`.

    Returns
    -------
    list of (str, inspect.Parameter)
        The command-line option (``--n-inliers``) and the parameter it sets.
    """
    out = []
    for name, param in inspect.signature(cls.synthetic).parameters.items():
        if name in ("seed", "cls", "self") or param.kind in (
                inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            continue
        out.append(("--" + name.replace("_", "-"), param))
    return out


#: The budgets, in epochs, that built-ins declare (`Problem.default_max_epochs`, whatever
#: rule the run uses; a test checks them against the problems): the help of
#: ``--max-iter`` names the problem's.
DECLARED_EPOCHS = {"odl": 3000, "sparse_pca": 20000, "sparse_basis": 2000}


def _add_common(p: argparse.ArgumentParser, name: str | None = None) -> None:
    from rssm.blocks import SELECTION_RULES
    from rssm.solvers import DEFAULT_METHOD, DEFAULT_TOL, METHODS

    g = p.add_argument_group("method")
    g.add_argument("--method", choices=sorted(METHODS), default=None,
                   help="RSSM (Algorithm alg-RSSM) or the Riemannian subgradient method "
                        f"(default: {DEFAULT_METHOD}, or rssm when --blocks or a --selection other "
                        "than uniform is given, as rssm.minimize)")
    g.add_argument("--blocks", type=int_at_least(2), default=None,
                   help="RSSM's number of column blocks l (2 <= l <= p; selects rssm when "
                        "--method is not given) "
                        "(default: min(5, p))")
    g.add_argument("--selection", choices=sorted(SELECTION_RULES), default="uniform",
                   help="block-pair rule of RSSM (uniform is the paper's)")
    stepsize.add_options(p)
    b = p.add_argument_group("budget and output")
    epochs = DECLARED_EPOCHS.get(name, 1000)
    b.add_argument("--max-iter", type=nonneg_int, default=None,
                   help=f"iteration limit (default, when no limit at all is given: {epochs} "
                        f"epochs, i.e. {epochs} RSM iterations or {epochs} l/2 RSSM "
                        "iterations" + (", the budget this problem declares"
                                        if name in DECLARED_EPOCHS else "") + ")")
    b.add_argument("--max-time", type=positive_float, default=None,
                   help="solver-time limit in seconds (default: none)")
    b.add_argument("--target-error", type=nonneg_float, default=None,
                   help="stop once the ground-truth error is at most this (default: none)")
    b.add_argument("--tol", type=nonneg_float, default=None, metavar="TOL",
                   help="tolerance of the convergence test: stop (success) once the recent "
                        "iterates lie within TOL ||X||_F of each other and their subgradients "
                        f"cancel or vanish; 0 turns it off (default: {DEFAULT_TOL:g})")
    b.add_argument("--verify-steps", type=nonneg_int, default=None, metavar="N",
                   help="trial points of the bundle check (and steps of the zigzag after "
                        "it) that confirm a verdict of the convergence test before the run "
                        "stops; a point that lowers f withdraws it and the run goes on from "
                        "there; 0 turns it off "
                        "(default: 24 on verdicts whose subgradients cancel only in part, "
                        "cancel above 1e-3; given: every verdict)")
    b.add_argument("--no-clip-steps", action="store_true",
                   help="take the step rule's steps as they are, Algorithm 1 to the letter "
                        "(default: a step longer than the diameter of the block it moves is "
                        "shortened to it; options={'clip_steps': False} in Python)")
    b.add_argument("--stationarity-tol", type=positive_float, default=None, metavar="TOL",
                   help="also record ||P_T(G)||_F and stop once it is at most TOL at a "
                        "recording point (reason stationary; for smooth costs; default: none)")
    b.add_argument("--record-stationarity", action="store_true",
                   help="record ||P_T(G)||_F (one full subgradient per recorded row, off the "
                        "clock) in the trace's stationarity column")
    b.add_argument("--stagnation-epochs", type=positive_float, default=None, metavar="E",
                   help="stop once the best cost has not decreased by more than "
                        "--stagnation-rtol (relative) over E epochs (reason no_progress; "
                        "default: none)")
    b.add_argument("--stagnation-rtol", type=positive_float, default=1e-8, metavar="R",
                   action=Given,
                   help="relative decrease that counts as progress for --stagnation-epochs")
    b.add_argument("--seed", type=nonneg_int, default=0,
                   help="seed of the data (synthetic), the start (independent stream) "
                        "and the block selection")
    b.add_argument("--record-every", type=positive_int, default=None,
                   help="record the trace every this many iterations "
                        "(default: max_iter // 200, or 10)")
    b.add_argument("--threads", type=threads, default="auto", metavar="auto|N",
                   help="threads during the run: 'auto' (default: one data-chunk worker per "
                        "core) or N workers; BLAS runs on one thread and the result is the "
                        "same to the bit for any setting")
    b.add_argument("--out", default=None, metavar="FILE|DIR",
                   help="write the trace to FILE (.csv: one row per recorded point; "
                        ".json: settings, summary and trace), or to the folder DIR (no "
                        "suffix; created if needed) the solution X.npy, trace.csv and "
                        "settings.json (default: not written). An existing file, or a "
                        "folder holding a run, is refused unless --overwrite")
    b.add_argument("--overwrite", action="store_true",
                   help="replace an earlier result at --out")
    b.add_argument("--quiet", action="store_true",
                   help="no progress bar (a bar appears on a terminal for runs longer than "
                        "half a second)")


def add_parser(sub) -> None:
    """The ``solve`` command and one sub-command per registered problem.

    Parameters
    ----------
    sub : argparse._SubParsersAction
        The sub-commands of the ``rssm`` parser (``add_subparsers()``'s result).
    """
    from rssm.problems import REGISTRY
    from rssm.problems.registry import DATA

    solve = sub.add_parser(
        "solve", help="one run on a built-in problem", formatter_class=Formatter,
        description="Run RSSM or RSM once on a synthetic instance of a built-in problem, "
                    "print a summary table and optionally save the trace. Each problem "
                    "takes its own size options: see `rssm solve PROBLEM --help`. "
                    f"{', '.join(n for n in REGISTRY if n in DATA)} also run on a data file "
                    "(--data FILE, one sample per row).")
    probs = solve.add_subparsers(dest="problem", metavar="PROBLEM", parser_class=Parser)
    probs.required = True
    for name, cls in REGISTRY.items():
        pp = probs.add_parser(name, help=first_line(cls.__doc__), formatter_class=Formatter,
                              description=first_line(cls.synthetic.__doc__))
        g = pp.add_argument_group(f"{name} instance (arguments of {cls.__name__}.synthetic)")
        options = problem_options(cls)
        for opt, param in options:
            parser, kind = param_type(param)
            default = None if param.default is inspect.Parameter.empty else param.default
            g.add_argument(opt, type=parser, default=default, dest=f"syn_{param.name}",
                           metavar=kind.upper(), action=Given,
                           help=f"{param.name} of {cls.__name__}.synthetic (default: "
                                + ("the problem's own rule" if default is None else
                                   str(default)) + ")" + data_cli.data_help(name, param.name))
        data_cli.add_options(pp, name, {param.name for _, param in options})
        _add_common(pp, name)
        pp.set_defaults(option_of={a.dest: a.option_strings[0] for a in pp._actions
                                   if a.option_strings and a.dest != "help"})


def option_for(args: argparse.Namespace, argument: str | None) -> str | None:
    """The command-line option of a library argument name, or None.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed command line (its ``option_of`` table).
    argument : str or None
        A library argument name (``"n_blocks"``, ``"p"``).

    Returns
    -------
    str or None
        The option (``"--blocks"``, ``"--p"``), or None when there is none.
    """
    if argument is None:
        return None
    if argument in _ALIASES:
        return _ALIASES[argument]
    table = getattr(args, "option_of", {})
    for dest in (argument, f"syn_{argument}", f"data_{argument}"):
        if dest in table:
            return table[dest]
    return None


def progress(args, problem=None):
    """A tqdm bar over the run's iterations (or solver time), fed at recording points by
    the callback; drawn only on a terminal and without --quiet.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed command line of ``rssm solve PROBLEM`` (its ``--max-iter``,
        ``--max-time``, ``--method``, ``--blocks`` and ``--quiet``).
    problem : Problem, optional
        The problem, whose declared epochs and p set the default budget (`budget`).

    Returns
    -------
    rssm.experiments.progress.SolveProgress
        The progress bar, also the run's callback; close it after the run.
    """
    from rssm.experiments.progress import SolveProgress

    return SolveProgress(budget(args, problem), args.max_time,
                         enabled=not args.quiet and sys.stderr.isatty())


def budget(args, problem=None) -> int | None:
    """The iteration limit in force: ``--max-iter``, or minimize's default budget (the
    problem's declared epochs, else 1000; l/2 RSSM iterations each) when no limit at all
    is given; None under ``--max-time`` alone.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed command line of ``rssm solve PROBLEM``.
    problem : Problem, optional
        The problem (its `Problem.default_max_epochs` and p); None: the default epochs.

    Returns
    -------
    int or None
        The iteration limit, or None when only ``--max-time`` limits the run.
    """
    from rssm.solvers.options import DEFAULT_METHOD, DEFAULT_N_BLOCKS, default_budget

    if args.max_iter is not None or args.max_time is not None:
        return args.max_iter
    method = args.method or DEFAULT_METHOD
    ell = 1 if method == "rsm" else (args.blocks or DEFAULT_N_BLOCKS)
    if problem is not None and method == "rssm":
        ell = min(ell, problem.shape[1])
    epochs = None if problem is None else problem.default_max_epochs()
    return default_budget(ell, epochs)


#: Entries of the parsed namespace that are not settings of the run.
_NOT_SETTINGS = ("command", "problem", "given", "option_of", "quiet", "out", "overwrite")


#: Data files up to this size get a SHA-256 in the run's record (larger ones: size and
#: modification time only, so that a record never costs a second pass over a large file).
HASH_BYTES = 256 * 2**20


def data_file(path: str) -> dict:
    """What identifies the data file of a run: its absolute path, size, modification time
    and (up to `HASH_BYTES`) SHA-256; a folder (a Zarr store) by path and time only.

    Parameters
    ----------
    path : str
        The data file (or folder) of ``--data``.

    Returns
    -------
    dict
        ``path``, and where the file can be read ``modified`` (ISO 8601, UTC), and for a
        file ``bytes`` and (up to `HASH_BYTES`) ``sha256``.
    """
    import datetime
    import hashlib
    from pathlib import Path

    p = Path(path)
    out: dict = {"path": str(p.resolve())}
    try:
        st = p.stat()
    except OSError:
        return out
    out["modified"] = datetime.datetime.fromtimestamp(
        st.st_mtime, tz=datetime.timezone.utc).isoformat(timespec="seconds")
    if p.is_file():
        out["bytes"] = st.st_size
        if st.st_size <= HASH_BYTES:
            h = hashlib.sha256()
            with p.open("rb") as fh:
                for block in iter(lambda: fh.read(2**20), b""):
                    h.update(block)
            out["sha256"] = h.hexdigest()
    return out


def document(args, argv: Sequence[str], res, instance: dict, problem) -> dict:
    """Settings and summary of a run, as written to ``.json`` and ``settings.json``:
    every option of the command line, the instance, and `rssm.cli._core.result_to_dict`.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed command line of ``rssm solve PROBLEM``.
    argv : sequence of str
        The command-line arguments (after ``rssm``), recorded as the command.
    res : Result
        The run's result.
    instance : dict
        The settings of the instance: the synthetic instance's arguments, or the data
        settings (`rssm.cli.data.problem_from_data`), to which `data_file` is added.
    problem : Problem
        The problem that was solved (its ``repr`` and budget are recorded).

    Returns
    -------
    dict
        JSON-serializable: the command, problem, instance, machine, seed, options,
        budget in force, trace spacing, method settings, summary and the full result.
    """
    options = {k: v for k, v in sorted(vars(args).items())
               if k not in _NOT_SETTINGS and not k.startswith(("syn_", "data_"))}
    from rssm.experiments.io import machine_info

    result = result_to_dict(res)
    if getattr(args, "data", None):
        instance = {**instance, "file": data_file(args.data)}
    return {
        "command": "rssm " + " ".join(shlex.quote(a) for a in argv),
        "problem": args.problem,
        "repr": repr(problem),
        ("data" if getattr(args, "data", None) else "synthetic"): instance,
        # where and with what it ran (rssm, Python, NumPy, BLAS, CPU), as `rssm reproduce`
        # records it: a run's bits depend on the machine and the libraries
        "machine": machine_info(),
        "seed": args.seed,
        "start": "initial_point(numpy.random.default_rng([seed, 1]))",
        "options": options,
        # (options.max_iter is what was given; this, what the run had)
        "max_iter_in_force": budget(args, problem),
        # the iterations between the trace's rows (the last row aside), as recorded: one
        # value, or several where a run without an iteration budget thinned its trace
        # (`rssm.Record`; a user's audit found nothing saying so)
        "trace_spacing": _spacing(res.trace),
        **{k: result.get(k) for k in ("method", "n_blocks", "selection", "stepsize",
                                      "threads")},
        "summary": {"cost": result.get("fun"), **{k: result.get(k) for k in (
            "stop_reason", "message", "success", "n_iter", "time", "flops", "error",
            "feasibility", "stationarity")}},
        "result": result,  # everything the Result says of itself
    }


def _spacing(trace) -> list[int]:
    """The distinct gaps between successive trace rows, the last row left out (it is
    recorded wherever the run ends): empty where the run ended before its second row
    (rows 0 and 46 of a run recording every 100 iterations)."""
    import numpy as np

    its = np.asarray(trace.get("iteration", ()), dtype=np.int64)
    return sorted({int(g) for g in np.diff(its[:-1])})


def _first(trace: dict, key: str, fmt: str) -> str:
    """The trace's first value of ``key``, or "n/a" for a run that recorded no row (data
    unreadable as it started: the summary indexed the empty trace and ended the command
    with a traceback, --out unwritten; a user's audit)."""
    col = trace.get(key)
    return format(col[0], fmt) if col is not None and len(col) else "n/a"


def _minimize(problem, x0, args, rule, callback):
    """The one call of the solver (its keywords follow `rssm.minimize`)."""
    import rssm
    from rssm.blocks import epoch_iterations
    from rssm.stopping import AnyOf, CostStagnation, MinStationarity

    stops = []
    if args.stationarity_tol is not None:
        stops.append(MinStationarity(args.stationarity_tol))
    if args.stagnation_epochs is not None:
        ell = 1 if args.method == "rsm" else (args.blocks or min(5, problem.shape[1]))
        stops.append(CostStagnation(args.stagnation_epochs, args.stagnation_rtol,
                                    epoch=epoch_iterations(ell)))
    record = rssm.Record(every=args.record_every,
                         stationarity=args.stationarity_tol is not None
                         or args.record_stationarity)
    return rssm.minimize(problem, x0, method=args.method, stepsize=rule,
                         options={"n_blocks": args.blocks, "selection": args.selection,
                                  "verify_steps": args.verify_steps,
                                  "clip_steps": not args.no_clip_steps},
                         max_iter=args.max_iter, max_time=args.max_time,
                         target_error=args.target_error, seed=args.seed, tol=args.tol,
                         record=record, threads=args.threads, callback=callback,
                         stop=AnyOf(*stops) if stops else None)


def _summary(rows: list[tuple[str, str]]) -> str:
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k.ljust(width)}  {v}" for k, v in rows)


def _refuse_unused(args) -> None:
    """Options that would do nothing with the others given are refused, as ``--delta``
    without ``--stepsize paper`` is (they were ignored without a word)."""
    if given(args, "stagnation_rtol") and args.stagnation_epochs is None:
        raise UsageError("argument --stagnation-rtol: only used with --stagnation-epochs")
    if args.overwrite and args.out is None:
        raise UsageError("argument --overwrite: only used with --out (the files it may "
                         "replace)")
    if args.verify_steps and args.tol == 0:
        raise UsageError("argument --verify-steps: the check confirms verdicts of the "
                         "convergence test, which --tol 0 turns off")
    if args.target_error is not None and getattr(args, "data", None) is not None:
        # the library's message tells a Python user how to give a problem its truth
        raise UsageError("argument --target-error: needs a ground truth, which only a "
                         "generated instance has (a --data file has none); leave it out, "
                         "or stop on --max-iter, --max-time or --tol")


def run(args, argv: Sequence[str]) -> int:
    """Run ``rssm solve``; return the exit status.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed command line of ``rssm solve PROBLEM``.
    argv : sequence of str
        The command-line arguments (after ``rssm``), recorded as the command in the
        saved settings.

    Returns
    -------
    int
        The exit status: 0; 130 when the run was interrupted; 1 when the data could not
        be read to the end.

    Raises
    ------
    UsageError
        When an option is invalid or does not apply to the run.
    """
    from rssm.problems import REGISTRY
    from rssm.solvers import DEFAULT_METHOD
    from rssm.stopping import StopReason

    args.method_given = args.method is not None
    if args.method is None:   # blocks or a pair rule mean RSSM, as in rssm.minimize
        asks = args.blocks is not None or args.selection != "uniform"
        args.method = "rssm" if asks else DEFAULT_METHOD
    _refuse_unused(args)
    target = output.plan(args.out, args.overwrite)
    cls = REGISTRY[args.problem]
    if getattr(args, "data", None) is not None:
        problem, instance, label = data_cli.problem_from_data(args, cls, args.problem,
                                                              problem_options(cls))
    else:
        data_cli.refuse_without_data(args)
        instance = {k[4:]: v for k, v in vars(args).items() if k.startswith("syn_")}
        try:
            problem = cls.synthetic(**instance, seed=args.seed)
        except (ValueError, TypeError) as exc:
            if getattr(exc, "argument", None) in instance or not instance:
                raise        # one named option: the command line names it (issue 19)
            # a condition on several options, or on the data they generated (named by
            # the library's own argument, "a", "yt", "b": --a is the step's exponent, and
            # it was named for sparse PCA's --theta 1e200, a user's audit): name them all
            # (sizes left to the instance, ODL's and sparse PCA's m, are not options given)
            opts = " ".join(f"--{k.replace('_', '-')} {v}" for k, v in instance.items()
                            if v is not None)
            raise UsageError(f"the synthetic instance ({opts}): {exc}") from None
        # sizes left to the instance (ODL's m) as the instance resolved them
        shown = {k: getattr(problem, k, v) if v is None else v for k, v in instance.items()}
        label = f"{args.problem} {', '.join(f'{k}={v}' for k, v in shown.items())}"
    n, p = problem.shape
    if args.method == "rssm" and p < 2:
        # the option that chose RSSM: --method, or --blocks / --selection without it
        opt = ("--method" if args.method_given else "--blocks" if args.blocks is not None
               else "--selection")
        fix = "use --method rsm" if opt == "--method" else f"drop {opt} (RSM, the default)"
        raise UsageError(f"argument {opt}: RSSM needs p >= 2 columns to form 2 blocks, got "
                         f"p={p}; {fix}")
    if args.method == "rsm" and (args.blocks is not None or args.selection != "uniform"):
        opt = "--blocks" if args.blocks is not None else "--selection"
        raise UsageError(f"argument {opt}: --method rsm moves all columns at once and has no "
                         "blocks; use --method rssm")
    if args.method == "rssm" and args.blocks is not None and not 2 <= args.blocks <= p:
        raise UsageError(f"argument --blocks: n_blocks must satisfy 2 <= n_blocks <= p = {p}, "
                         f"got {args.blocks}")
    x0 = problem.initial_point(np.random.default_rng([args.seed, 1]))
    rule = stepsize_from_spec(stepsize.spec_from_args(args, problem))
    bar = progress(args, problem)
    try:
        res = _minimize(problem, x0, args, rule, bar)
    finally:
        bar.close()
    method = res.method.upper() + (f" (l={res.n_blocks}, {res.selection})"
                                   if res.method == "rssm" else "")
    rows = [
        ("problem", f"{label} seed={args.seed}  (St({n}, {p}))"),
        ("method", method),
        ("step size", repr(rule)),
        ("stop reason", f"{res.stop_reason.value}: {res.message}"),
        ("iterations", str(res.n_iter)),
        ("solver time", f"{res.time:.4g} s"),
        ("threads", res.threads),
        ("flops", f"{res.flops:.4g}"),
        ("initial cost", _first(res.trace, "cost", ".10g")),
        ("final cost", f"{res.fun:.10g}"),
        ("initial error", _first(res.trace, "error", ".4g") if problem.has_error else "n/a"),
        ("final error", f"{res.error:.4g}" if problem.has_error else "n/a"),
        ("success", f"{res.success}  (True only when a convergence test fired)"),
        *([("stationarity", f"{res.stationarity:.4g}  (||P_T(G)||_F at the last row)")]
          if res.stationarity == res.stationarity else []),
        ("feasibility", f"{res.feasibility:.2e}  (||X^T X - I||_max)"),
    ]
    interrupted = res.stop_reason is StopReason.INTERRUPTED
    written = []
    write_error = None
    if target is not None:
        # the files first: a reader that closes stdout early (``| head``), or a figure of
        # the summary that fails, must not cost the run. Ctrl-C (or SIGTERM) is held while
        # they are written, then acted on as an interrupt of the run (one that came there
        # left only trace.csv, no summary)
        from rssm._interrupt import HeldInterrupt

        with HeldInterrupt() as held:
            doc = document(args, argv, res, instance, problem)
            try:
                written = output.write(target, doc, res.trace, res.x)
            except output.WriteError as exc:
                # raised after the summary: a write that failed (a full disk) left the
                # run's outcome nowhere, with a .csv or .json target (a user's audit)
                write_error = exc
        interrupted = interrupted or held.interrupted
    # Problem-specific figures (e.g. sparse PCA's explained variance and sparsity).
    extra = problem.summary(res.x) if callable(getattr(problem, "summary", None)) else {}
    rows += [(k.replace("_", " "), f"{v:.6g}") for k, v in extra.items()
             if k not in ("cost", "error")]
    try:
        out(_summary(rows))
    except StdoutClosed:
        # the reader left (``| head``): the write error still comes first, exit 1 (a
        # review: it was lost in the quiet exit 141 of a closed stdout)
        if write_error is not None:
            raise write_error from None
        raise
    if write_error is not None:
        raise write_error
    if target is not None:
        points = len(res.trace["iteration"])
        out(f"{', '.join(written)} ({points} recorded points) written to {target.path}"
            if target.folder else f"trace: {points} points written to {target.path}")
    if interrupted:
        saved = f"; the run so far is saved in {target.path}" if target is not None else ""
        print(f"rssm: interrupted after {iterations(res.n_iter)}{saved}", file=sys.stderr)
        return 130
    if res.stop_reason is StopReason.DATA_ERROR:
        # the data could not be read to the end: a script must not take this for a run
        saved = f"; the run so far is saved in {target.path}" if target is not None else ""
        print(f"rssm: the data could not be read: {res.message}{saved}", file=sys.stderr)
        return 1
    return 0
