"""The ``rssm`` command: ``reproduce`` the paper's experiments, ``plot`` saved results,
``solve`` one built-in problem.

Bad options print one line ``rssm: error: ...`` naming the option and what is allowed and
exit with status 2; so do ValueError/TypeError raised by the library on bad values.

Paper labels (``eq-...``, ``alg-...``) are those of the LaTeX source of A. Y.-M. Cheung,
J. Wang, M.-C. Yue, A. M.-C. So, "Randomized Submanifold Subgradient Method for
Optimization over Stiefel Manifolds", arXiv:2409.01770; here ``alg-RSSM`` = Algorithm 1
(table: docs/paper-map.md).
"""

from __future__ import annotations

import argparse
import inspect
import json
import math
import os
import shlex
import sys
import tempfile
import time
import types
import typing
from collections.abc import Sequence
from pathlib import Path

import numpy as np

__all__ = ["main", "build_parser", "DURATIONS"]

#: Measured durations, the one source of the figures quoted by ``--help``, README.md and
#: docs/cli.md (tests/test_docs.py checks that they agree). Measured on 2 CPU cores (AMD
#: EPYC) with default threads and nothing else of ours running, on 2026-11-23: ``--quick``
#: 66 s wall from a clean clone; the full ``--tuned`` run 16 min 2 s
#: (docs/reproduction/report.md); the test suite 4 min 26 s (``bash .ci/run``, clean
#: clone, 712 tests). With other jobs on the machine it takes longer (``--quick`` took
#: 2 min 43 s at load average 6).
DURATIONS = {
    "quick": "1 to 2 minutes on 2 cores",
    "full": "about 16 minutes on 2 cores",
    "tests": "about 5 minutes on 2 cores",
}

_EXAMPLES = f"""\
examples:
  rssm reproduce all --quick --out rssm-results     # the whole pipeline, {DURATIONS["quick"]}
  rssm reproduce dpcp --seeds 5 --tuned --out runs  # full DPCP figure and tuned part
  rssm plot runs/results.csv                        # redraw figures from saved data
  rssm solve dpcp --method rssm --blocks 5 --max-iter 2000 --out trace.csv
"""


class UsageError(Exception):
    """Bad command-line usage; becomes ``rssm: error: ...`` and exit status 2."""


class _Parser(argparse.ArgumentParser):
    """ArgumentParser whose errors are one line and carry no usage block."""

    def error(self, message: str) -> typing.NoReturn:
        raise UsageError(message)


class _Formatter(argparse.RawDescriptionHelpFormatter):
    """Appends ``(default: X)`` to each option's help unless the help already names its
    default or X is None."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if ("default" in text or action.default is None or action.default is argparse.SUPPRESS
                or action.option_strings == [] or isinstance(action.default, bool)):
            return text
        return text + " (default: %(default)s)"



# -- rssm solve: options from the problem registry ------------------------------------------
def _int_at_least(minimum: int):
    """argparse type: an integer >= ``minimum``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"expected an integer >= {minimum}, got {value}")
        return value

    return parse


_positive_int = _int_at_least(1)


def _threads(text: str) -> str | int:
    if text == "auto":
        return text
    try:
        return _positive_int(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(
            f"expected 'auto' or an integer >= 1, got {text!r}") from None
_nonneg_int = _int_at_least(0)


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"expected a finite number > 0, got {text}")
    return value


def _number(text: str) -> int | float:
    try:
        return int(text)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None


def _int_parser(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None


def _float_parser(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None


def _bool_parser(text: str) -> bool:
    low = text.lower()
    if low in ("1", "true", "yes", "on"):
        return True
    if low in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def _param_type(param: inspect.Parameter):
    """A parser for a ``synthetic`` keyword from its annotation or default."""
    ann = param.annotation
    if isinstance(ann, str):
        names = {part.strip() for part in ann.split("|")}
    elif ann is inspect.Parameter.empty:
        names = set()
    else:
        args = typing.get_args(ann) if isinstance(ann, types.UnionType) or typing.get_origin(
            ann) is typing.Union else (ann,)
        names = {getattr(a, "__name__", str(a)) for a in args}
    default = param.default
    if "bool" in names or isinstance(default, bool):
        return _bool_parser, "bool"
    if "int" in names and "float" not in names or (
            not names and isinstance(default, int)):
        return _int_parser, "int"
    if "float" in names or isinstance(default, float):
        return _float_parser, "float"
    if "str" in names or isinstance(default, str):
        return str, "str"
    return _number, "number"


def problem_options(cls) -> list[tuple[str, inspect.Parameter]]:
    """Keyword parameters of ``cls.synthetic`` other than ``seed``, as (option, parameter)."""
    sig = inspect.signature(cls.synthetic)
    out = []
    for name, param in sig.parameters.items():
        if name in ("seed", "cls", "self") or param.kind in (
                inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            continue
        out.append(("--" + name.replace("_", "-"), param))
    return out


def _first_line(doc: str | None) -> str:
    if not doc:
        return ""
    return inspect.cleandoc(doc).split("\n\n")[0].replace("\n", " ")


_STEP_PARAMS = {
    "paper": ("delta", "a", "rho"),
    "geometric": ("mu0", "beta"),
    "constant": ("c",),
    "invsqrt": ("c",),
}


def _add_solve_common(p: argparse.ArgumentParser) -> None:
    from rssm.blocks import SELECTION_RULES
    from rssm.solvers import METHODS

    g = p.add_argument_group("method")
    g.add_argument("--method", choices=sorted(METHODS), default="rssm",
                   help="RSSM (Algorithm alg-RSSM) or the Riemannian subgradient method")
    g.add_argument("--blocks", type=_positive_int, default=None,
                   help="RSSM's number of column blocks l (2 <= l <= p; ignored by RSM) "
                        "(default: min(5, p))")
    g.add_argument("--selection", choices=sorted(SELECTION_RULES), default="uniform",
                   help="block-pair rule of RSSM (uniform is the paper's)")
    s = p.add_argument_group("step size")
    s.add_argument("--stepsize", choices=["auto", "default", *_STEP_PARAMS], default="auto",
                   help="auto: the tuning-free rule rssm.stepsizes.Auto (docs/stepsizes.md); "
                        "default: the problem's own rule when it has one (else auto); "
                        "paper: Delta_k/(sqrt(k+2) log(k+2)) with Delta_k = delta "
                        "binom(l,2)^(a rho^k - 1) for RSSM, delta for RSM; geometric: "
                        "mu0 beta^(k/epoch); constant: c; invsqrt: c/sqrt(k+1). Parameters "
                        "not given are the problem's own when its rule (or, for the "
                        "built-ins, its reference rule: the paper's schedule for dpcp and "
                        "odl) is of that kind (default: auto)")
    s.add_argument("--delta", type=_positive_float, default=None,
                   help="paper: Delta (default: the problem's, e.g. 0.9 for dpcp, 1e-3 for odl)")
    s.add_argument("--a", type=_positive_float, default=None,
                   help="paper: exponent a (default: the problem's)")
    s.add_argument("--rho", type=_positive_float, default=None,
                   help="paper: decay rho in (0, 1] (default: the problem's)")
    s.add_argument("--mu0", type=_positive_float, default=None,
                   help="geometric: initial step (default: the problem's, if geometric)")
    s.add_argument("--beta", type=_positive_float, default=None,
                   help="geometric: decay per epoch, in (0, 1] (default: the problem's, if "
                        "geometric)")
    s.add_argument("--c", type=_positive_float, default=None,
                   help="constant / invsqrt: c (default: the problem's, if of that kind)")
    b = p.add_argument_group("budget and output")
    b.add_argument("--max-iter", type=_nonneg_int, default=None,
                   help="iteration limit (default, when no limit at all is given: 1000 "
                        "epochs, i.e. 1000 RSM iterations or 1000 l/2 RSSM iterations)")
    b.add_argument("--max-time", type=_positive_float, default=None,
                   help="solver-time limit in seconds (default: none)")
    b.add_argument("--target-error", type=_positive_float, default=None,
                   help="stop once the ground-truth error is at most this (default: none)")
    b.add_argument("--stationarity-tol", type=_positive_float, default=None, metavar="TOL",
                   help="stop once ||P_T(G)||_F at a recording point is at most TOL (reason "
                        "stationary; default: none)")
    b.add_argument("--stagnation-epochs", type=_positive_float, default=None, metavar="E",
                   help="stop once the best cost has not decreased by more than "
                        "--stagnation-rtol (relative) over E epochs (reason no_progress; "
                        "default: none)")
    b.add_argument("--stagnation-rtol", type=_positive_float, default=1e-8, metavar="R",
                   help="relative decrease that counts as progress for --stagnation-epochs")
    b.add_argument("--seed", type=_nonneg_int, default=0,
                   help="seed of the data (synthetic), the start (independent stream) "
                        "and the block selection")
    b.add_argument("--record-every", type=_positive_int, default=None,
                   help="record the trace every this many iterations "
                        "(default: max_iter // 200, or 10)")
    b.add_argument("--threads", type=_threads, default="auto", metavar="auto|N",
                   help="BLAS/OpenMP threads during the run: 'auto' (default: the machine's "
                        "pools, one thread while timed probes show it is faster) or a fixed "
                        "count N (bit-identical reruns)")
    b.add_argument("--out", default=None, metavar="FILE|DIR",
                   help="write the trace to FILE (.csv: one row per recorded point; "
                        ".json: settings, summary and trace), or to the folder DIR (no "
                        "suffix; created if needed) the solution X.npy, trace.csv and "
                        "settings.json (default: not written)")
    b.add_argument("--quiet", action="store_true",
                   help="no progress bar (a bar appears on a terminal for runs longer than "
                        "half a second)")


def _build_solve(sub) -> None:
    from rssm.problems import REGISTRY

    solve = sub.add_parser(
        "solve", help="one run on a built-in problem", formatter_class=_Formatter,
        description="Run RSSM or RSM once on a synthetic instance of a built-in problem, "
                    "print a summary table and optionally save the trace. Each problem "
                    "takes its own size options: see `rssm solve PROBLEM --help`. dpcp, odl, "
                    "sparse_pca and sparse_basis also run on a data file (--data FILE, one "
                    "sample per row).")
    probs = solve.add_subparsers(dest="problem", metavar="PROBLEM", parser_class=_Parser)
    probs.required = True
    for name, cls in REGISTRY.items():
        pp = probs.add_parser(name, help=_first_line(cls.__doc__), formatter_class=_Formatter,
                              description=_first_line(cls.synthetic.__doc__))
        g = pp.add_argument_group(f"{name} instance (arguments of {cls.__name__}.synthetic)")
        for opt, param in problem_options(cls):
            parser, kind = _param_type(param)
            default = None if param.default is inspect.Parameter.empty else param.default
            g.add_argument(opt, type=parser, default=default, dest=f"syn_{param.name}",
                           metavar=kind.upper(),
                           help=f"{param.name} of {cls.__name__}.synthetic" + (
                               " (default: the problem's own rule)"
                               if default is None else ""))
        _add_data_options(pp, name)
        _add_solve_common(pp)


# -- rssm solve --data: a user's data file ---------------------------------------------------
#: Problems that run on a data file, with the synthetic options that still apply to them
#: (the others describe the synthetic instance, which the file replaces).
_DATA_PROBLEMS = {"dpcp": ("d",), "odl": (), "sparse_pca": ("r", "mu"), "sparse_basis": ("p",)}

_DATA_HELP = {
    "dpcp": "DPCP.from_data(Yt, d=--d): inliers near a d-dimensional subspace, p = n - d",
    "odl": "ODL.from_data(Y, p=--p)",
    "sparse_pca": "SparsePCA.from_data(A, r=--r, mu=--mu): columns centred and scaled",
    "sparse_basis": "PlantedSparseBasis(Q, p=--p): rows of Q span the subspace",
}


def _add_data_options(pp: argparse.ArgumentParser, name: str) -> None:
    """``--data FILE`` and its companions, for the problems that take data."""
    if name not in _DATA_PROBLEMS:
        return
    g = pp.add_argument_group(
        "data file (instead of a synthetic instance)",
        f"The file holds ONE SAMPLE PER ROW: m rows of n numbers (scikit-learn's layout); "
        f"rssm transposes it to the API's samples-as-columns internally. Built as "
        f"{_DATA_HELP[name]}.")
    g.add_argument("--data", default=None, metavar="FILE",
                   help="data file, one sample per row: .npy, .npz (--key), .csv/.txt "
                        "(optional header row), HDF5 .h5/.hdf5 (--dataset) or Zarr "
                        "(.zarr folder or .zip; --dataset for a group)")
    g.add_argument("--key", default=None, help="array of an .npz file (when it holds several)")
    g.add_argument("--dataset", default=None,
                   help="dataset of an HDF5 file or array of a Zarr group (when there are "
                        "several), e.g. points or group/points")
    if name in ("dpcp", "odl"):
        g.add_argument("--out-of-core", choices=["auto", "always", "never"], default="auto",
                       help="stream the file a chunk of samples at a time instead of reading "
                            "it into memory (.npy, HDF5, Zarr); auto: when it exceeds a "
                            "quarter of the machine's memory")
        g.add_argument("--chunk-size", type=_positive_int, default=None, metavar="SAMPLES",
                       help="samples per chunk when streaming (default: 64 MiB of data)")
    if name == "odl":
        g.add_argument("--p", type=_positive_int, default=None, dest="data_p",
                       help="number of dictionary atoms p <= n (default: n)")


def _physical_memory() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def _problem_from_data(args, cls):
    """The problem of ``--data``: (problem, settings dict, label for the summary)."""
    from rssm.data import io as dio
    from rssm.data import samples

    name = args.problem
    option = {"path": "--data", "key": "--key", "dataset": "--dataset"}
    try:
        arr = dio.load(args.data, key=args.key, dataset=args.dataset)
    except dio.DataFileError as exc:
        raise UsageError(f"argument {option[exc.argument]}: {exc}") from None
    allowed = _DATA_PROBLEMS[name]
    for opt, param in problem_options(cls):
        if param.name not in allowed and getattr(args, f"syn_{param.name}") != param.default:
            raise UsageError(f"argument {opt}: sets the synthetic instance; not used with "
                             f"--data (options that apply: "
                             f"{', '.join('--' + a for a in allowed) or 'none'})")
    m, n = (int(s) for s in arr.shape)
    mode = getattr(args, "out_of_core", "never")
    in_ram = isinstance(arr, np.ndarray) and not isinstance(arr, np.memmap)
    mem = _physical_memory()
    stream = not in_ram and (mode == "always" or (
        mode == "auto" and mem is not None and 8 * m * n > mem // 4))
    if mode == "always" and in_ram:
        raise UsageError(f"argument --out-of-core: {Path(args.data).suffix} files are read "
                         "into memory; use .npy, HDF5 or Zarr to stream")
    settings = {"data": str(args.data), "key": args.key, "dataset": args.dataset,
                "samples": m, "features": n, "out_of_core": stream}
    if stream:
        data = samples(arr, chunk_size=args.chunk_size, check_finite=False)
        settings["chunk_size"] = data.chunk_size
    else:
        data = np.asarray(arr, dtype=np.float64).T  # a view; the problem makes its copy
    dim_option = {"dpcp": "--d", "odl": "--p", "sparse_pca": "--r", "sparse_basis": "--p"}
    try:
        if name == "dpcp":
            problem = cls.from_data(data, d=args.syn_d)
            settings["d"] = args.syn_d
        elif name == "odl":
            problem = cls.from_data(data, p=args.data_p)
            settings["p"] = problem.shape[1]
        elif name == "sparse_pca":
            problem = cls.from_data(data.T, r=args.syn_r, mu=args.syn_mu)
            settings.update(r=args.syn_r, mu=args.syn_mu)
        else:
            problem = cls(data.T, args.syn_p)
            settings["p"] = args.syn_p
    except ValueError as exc:
        msg = " ".join(str(exc).split())
        opt = "--mu" if msg.startswith("mu ") else dim_option[name]
        raise UsageError(f"argument {opt}: {msg} (the data has n = {n} features per sample, "
                         f"m = {m} samples)") from None
    extra = ", ".join(f"{k}={settings[k]}" for k in ("d", "p", "r", "mu") if k in settings)
    label = (f"{name} data={args.data} (m={m} samples, n={n}{', streamed' if stream else ''})"
             + (f" {extra}" if extra else ""))
    return problem, settings, label


def _out_folder(out: Path | None) -> Path | None:
    """``--out`` names a folder when it exists as one or has no suffix."""
    if out is None:
        return None
    return out if out.is_dir() or not out.suffix else None


def _write_out_folder(folder: Path, res, args, settings: dict, rule, problem) -> None:
    """X.npy (the solution), trace.csv and settings.json (settings and summary)."""
    from rssm.experiments.io import atomic_write_text, replace_atomically

    folder.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".X.", suffix=".npy", dir=folder)
    with os.fdopen(fd, "wb") as fh:
        np.save(fh, res.x)
    replace_atomically(tmp, folder / "X.npy")
    _write_trace(folder / "trace.csv", res, args, settings, rule)
    doc = {
        "problem": args.problem,
        "repr": repr(problem),
        ("data" if getattr(args, "data", None) else "synthetic"): settings,
        "seed": args.seed,
        "start": "initial_point(numpy.random.default_rng([seed, 1]))",
        "method": res.method, "n_blocks": res.n_blocks, "selection": res.selection,
        "stepsize": rule.describe(), "max_iter": args.max_iter, "max_time": args.max_time,
        "target_error": args.target_error, "record_every": args.record_every,
        "summary": {
            "stop_reason": res.stop_reason.value, "message": res.message,
            "n_iter": res.n_iter, "time": res.time, "flops": res.flops, "cost": res.fun,
            "error": None if math.isnan(res.error) else res.error,
            "feasibility": res.feasibility,
        },
        "files": {"X.npy": f"the solution X, {res.x.shape[0]} x {res.x.shape[1]}, float64",
                  "trace.csv": "one row per recorded point"},
    }
    atomic_write_text(folder / "settings.json", json.dumps(doc, indent=1) + "\n")


def build_parser() -> argparse.ArgumentParser:
    """The ``rssm`` argument parser."""
    from rssm import __version__
    from rssm.experiments.configs import PROBLEMS

    parser = _Parser(
        prog="rssm", formatter_class=_Formatter, epilog=_EXAMPLES,
        description="Randomized Submanifold Subgradient Method (RSSM) on the Stiefel manifold: "
                    "reproduce the paper's experiments, redraw their figures, or solve one "
                    "built-in problem. Paper: A. Y.-M. Cheung, J. Wang, M.-C. Yue, "
                    "A. M.-C. So, \"Randomized Submanifold Subgradient Method for "
                    "Optimization over Stiefel Manifolds\", arXiv:2409.01770 (labels such as "
                    "alg-RSSM = Algorithm 1: docs/paper-map.md).")
    parser.add_argument("--version", action="version", version=f"rssm {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True

    rep = sub.add_parser(
        "reproduce", help="run the paper's experiments (Section 5): figures, CSV, JSON, report",
        formatter_class=_Formatter,
        description="Run RSM and RSSM (l = 3, 5, 10) with the paper's settings on several "
                    "seeds, then write results.csv, results.json, one PNG and PDF figure per "
                    "problem and report.md into --out. Results are saved as each run ends. "
                    f"The full `rssm reproduce all --tuned` takes {DURATIONS['full']}; "
                    f"--quick {DURATIONS['quick']} (measured; see docs/cli.md).")
    rep.add_argument("experiment", choices=sorted(PROBLEMS) + ["all"],
                     help="which experiment")
    rep.add_argument("--out", default="rssm-results", metavar="DIR", help="output folder")
    rep.add_argument("--seeds", type=_positive_int, default=5, metavar="N",
                     help="number of seeds (0, 1, ..., N-1)")
    rep.add_argument("--quick", action="store_true",
                     help="1/15 of the iteration budgets (same sizes): "
                          f"{DURATIONS['quick']}")
    rep.add_argument("--budget", type=_positive_float, default=None, metavar="FACTOR",
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

    plot = sub.add_parser("plot", help="redraw figures (and report.md) from a results CSV",
                          formatter_class=_Formatter,
                          description="Redraw the figures of a reproduction from its "
                                      "results.csv; with results.json beside it, also "
                                      "rewrite report.md.")
    plot.add_argument("csv", metavar="RESULTS.csv", help="results.csv of `rssm reproduce`")
    plot.add_argument("--out", default=None, metavar="DIR",
                      help="folder for the figures (default: the CSV's folder)")
    plot.add_argument("--formats", default="png,pdf",
                      help="comma-separated figure formats (png, pdf, svg)")
    plot.add_argument("--no-report", action="store_true", help="do not rewrite report.md")

    _build_solve(sub)
    return parser


# -- commands --------------------------------------------------------------------------------
_FORMATS = ("png", "pdf", "svg")


def _formats(text: str) -> list[str]:
    fmts = [f.strip().lower() for f in text.split(",") if f.strip()]
    bad = [f for f in fmts if f not in _FORMATS]
    if not fmts or bad:
        raise UsageError(f"argument --formats: invalid format(s) {', '.join(bad) or '(none)'} "
                         f"(choose from {', '.join(_FORMATS)})")
    return fmts


def _cmd_reproduce(args, argv: Sequence[str]) -> int:
    from rssm.experiments import make_configs, render, reproduce
    from rssm.experiments.configs import QUICK_DIVISOR

    fmts = _formats(args.formats)
    if args.resume and args.overwrite:
        raise UsageError("argument --resume: not allowed with argument --overwrite")
    if args.budget is not None and args.budget > 1:
        raise UsageError(f"argument --budget: must be in (0, 1], got {args.budget:g}")
    configs = make_configs(quick=args.quick, scale=args.budget)
    try:
        Path(args.out).mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"argument --out: cannot create folder {args.out}: "
                         f"{exc.strerror or exc}") from None
    if args.experiment != "all":
        configs = {args.experiment: configs[args.experiment]}
    # Progress bar on a terminal; one line per finished run otherwise (logs, nohup).
    tty = sys.stderr.isatty()
    progress = False if args.quiet else tty
    log = None if args.quiet or tty else (lambda msg: print(f"rssm: {msg}", file=sys.stderr,
                                                           flush=True))
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
    written = render(Path(args.out) / "results.csv", args.out, fmts, report=True)
    if not args.quiet:
        print(f"rssm: {len(written)} files written to {args.out} in "
              f"{time.perf_counter() - t0:.1f} s (report: {Path(args.out) / 'report.md'})")
    return 0


def _cmd_plot(args) -> int:
    from rssm.experiments import render

    fmts = _formats(args.formats)
    path = Path(args.csv)
    if not path.is_file():
        raise UsageError(f"argument RESULTS.csv: no such file: {path}")
    report = not args.no_report and (path.parent / "results.json").exists()
    written = render(path, args.out, fmts, report=report)
    for w in written:
        print(w)
    return 0


def _make_stepsize(args, problem):
    """The step-size rule of ``--stepsize`` and its parameters; parameters not given come
    from the problem's own default rule when it is of the same kind."""
    from rssm.stepsizes import Constant, Geometric, InverseSqrt, PaperSchedule, make_auto

    classes = {"paper": PaperSchedule, "geometric": Geometric, "constant": Constant,
               "invsqrt": InverseSqrt}
    base = problem.default_stepsize()
    if base is None:
        base = problem.reference_stepsize()
    base_rule = next((k for k, c in classes.items() if type(base) is c), None)
    rule = args.stepsize
    if rule == "default":
        if problem.default_stepsize() is None:
            rule = "auto"
        elif base_rule is None:
            for name in sorted({n for ps in _STEP_PARAMS.values() for n in ps}):
                if getattr(args, name) is not None:
                    raise UsageError(f"argument --{name}: the problem's own step size "
                                     f"{base!r} takes no --{name}")
            return base
        else:
            rule = base_rule
    if rule == "auto":
        for name in sorted({n for ps in _STEP_PARAMS.values() for n in ps}):
            if getattr(args, name) is not None:
                users = [r for r, ps in _STEP_PARAMS.items() if name in ps]
                raise UsageError(f"argument --{name}: only used with --stepsize "
                                 f"{' or '.join(users)} (got --stepsize auto)")
        return make_auto()
    for name in sorted({n for ps in _STEP_PARAMS.values() for n in ps}):
        if getattr(args, name) is not None and name not in _STEP_PARAMS[rule]:
            users = [r for r, ps in _STEP_PARAMS.items() if name in ps]
            raise UsageError(f"argument --{name}: only used with --stepsize "
                             f"{' or '.join(users)} (got --stepsize {rule})")
    own = base.describe() if rule == base_rule else {}
    values = {n: getattr(args, n) if getattr(args, n) is not None else own.get(n)
              for n in _STEP_PARAMS[rule]}
    if rule == "paper":
        if values["delta"] is None:
            raise UsageError(f"argument --stepsize paper: {type(problem).__name__} has no paper "
                             "schedule of its own; give --delta (and --a, --rho)")
        if (values["a"] is None) != (values["rho"] is None):
            raise UsageError("argument --a: --a and --rho go together")
        return PaperSchedule(values["delta"], values["a"], values["rho"])
    missing = [f"--{n}" for n, v in values.items() if v is None]
    if missing:
        raise UsageError(f"argument --stepsize {rule}: needs {' and '.join(missing)}")
    if rule == "geometric":
        return Geometric(values["mu0"], values["beta"])
    return Constant(values["c"]) if rule == "constant" else InverseSqrt(values["c"])


def _summary_table(rows: list[tuple[str, str]]) -> str:
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k.ljust(width)}  {v}" for k, v in rows)


def _cmd_solve(args) -> int:
    import rssm
    from rssm.problems import REGISTRY

    out = Path(args.out) if args.out else None
    out_dir = _out_folder(out)
    if out is not None and out_dir is None and out.suffix.lower() not in (".csv", ".json"):
        raise UsageError(f"argument --out: file name must end in .csv or .json (or name a "
                         f"folder, without a suffix), got {out.name!r}")
    if out is not None:
        parent = (out_dir if out_dir is not None and out_dir.is_dir() else out.parent) \
            if str(out.parent) else Path(".")
        if not parent.is_dir():
            raise UsageError(f"argument --out: folder {parent} does not exist")
        if not os.access(parent, os.W_OK):
            raise UsageError(f"argument --out: folder {parent} is not writable")
    cls = REGISTRY[args.problem]
    if getattr(args, "data", None) is not None:
        problem, kwargs, label = _problem_from_data(args, cls)
    else:
        kwargs = {k[4:]: v for k, v in vars(args).items() if k.startswith("syn_")}
        problem = cls.synthetic(**kwargs, seed=args.seed)
        label = f"{args.problem} {', '.join(f'{k}={v}' for k, v in kwargs.items())}"
    if args.method == "rssm" and problem.shape[1] < 2:
        raise UsageError(f"argument --method: RSSM needs p >= 2 columns to form 2 blocks, got "
                         f"p={problem.shape[1]}; use --method rsm")
    x0 = problem.initial_point(np.random.default_rng([args.seed, 1]))
    rule = _make_stepsize(args, problem)
    bar = _solve_progress(args)
    try:
        res = rssm.minimize(problem, x0, method=args.method, n_blocks=args.blocks,
                            stepsize=rule, max_iter=args.max_iter, max_time=args.max_time,
                            target_error=args.target_error, seed=args.seed,
                            record_every=args.record_every, selection=args.selection,
                            threads=args.threads, callback=bar,
                            stationarity_tol=args.stationarity_tol,
                            stagnation_epochs=args.stagnation_epochs,
                            stagnation_rtol=args.stagnation_rtol)
    finally:
        bar.close()
    n, p = problem.shape
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
        ("initial cost", f"{res.trace['cost'][0]:.10g}"),
        ("final cost", f"{res.fun:.10g}"),
        ("initial error", f"{res.trace['error'][0]:.4g}" if problem.has_error else "n/a"),
        ("final error", f"{res.error:.4g}" if problem.has_error else "n/a"),
        ("stationarity", f"{res.stationarity:.4g}  (||P_T(G)||_F at the final X)"),
        ("success", f"{res.success}  (True only when a convergence test fired)"),
        ("feasibility", f"{res.feasibility:.2e}  (||X^T X - I||_max)"),
    ]
    # Problem-specific figures (e.g. sparse PCA's explained variance and sparsity).
    extra = problem.summary(res.x) if callable(getattr(problem, "summary", None)) else {}
    rows += [(k.replace("_", " "), f"{v:.6g}") for k, v in extra.items()
             if k not in ("cost", "error")]
    print(_summary_table(rows))
    if out_dir is not None:
        _write_out_folder(out_dir, res, args, kwargs, rule, problem)
        print(f"solution, trace ({len(res.trace['iteration'])} points) and settings written "
              f"to {out_dir}")
    elif out is not None:
        _write_trace(out, res, args, kwargs, rule)
        print(f"trace: {len(res.trace['iteration'])} points written to {out}")
    return 0


def _solve_progress(args):
    """A tqdm bar over the run's iterations (or solver time), fed at recording points by
    the callback; drawn only on a terminal and without --quiet."""
    from rssm.experiments.progress import SolveProgress
    from rssm.solvers.api import DEFAULT_MAX_ITER

    max_iter = args.max_iter
    if max_iter is None and args.max_time is None:
        max_iter = DEFAULT_MAX_ITER
    return SolveProgress(max_iter, args.max_time,
                         enabled=not args.quiet and sys.stderr.isatty())


def _write_trace(out: Path, res, args, kwargs: dict, rule) -> None:
    from rssm.experiments.io import atomic_write_text
    from rssm.trace import TRACE_COLUMNS

    if out.suffix.lower() == ".csv":
        lines = [",".join(TRACE_COLUMNS)]
        tr = res.trace
        for i in range(len(tr["iteration"])):
            lines.append(",".join([str(int(tr["iteration"][i]))]
                                  + [repr(float(tr[c][i])) for c in TRACE_COLUMNS[1:]]))
        atomic_write_text(out, "\n".join(lines) + "\n")
        return
    doc = {
        "problem": args.problem,
        "synthetic": kwargs,
        "seed": args.seed,
        "start": "initial_point(numpy.random.default_rng([seed, 1]))",
        "method": res.method,
        "n_blocks": res.n_blocks,
        "selection": res.selection,
        "stepsize": rule.describe(),
        "max_iter": args.max_iter,
        "max_time": args.max_time,
        "target_error": args.target_error,
        "record_every": args.record_every,
        "stationarity_tol": args.stationarity_tol,
        "stagnation_epochs": args.stagnation_epochs,
        "stagnation_rtol": args.stagnation_rtol,
        "summary": {
            "stop_reason": res.stop_reason.value, "message": res.message,
            "n_iter": res.n_iter, "time": res.time, "flops": res.flops, "cost": res.fun,
            "error": None if math.isnan(res.error) else res.error,
            "feasibility": res.feasibility,
            "stationarity": None if math.isnan(res.stationarity) else res.stationarity,
            "success": res.success,
        },
        "trace": {k: [None if isinstance(v, float) and math.isnan(v) else v
                      for v in np.asarray(a).tolist()] for k, a in res.trace.items()},
    }
    atomic_write_text(out, json.dumps(doc, indent=1) + "\n")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``rssm`` command; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args = build_parser().parse_args(argv)
        if args.command == "reproduce":
            return _cmd_reproduce(args, argv)
        if args.command == "plot":
            return _cmd_plot(args)
        return _cmd_solve(args)
    except UsageError as exc:
        print(f"rssm: error: {exc}", file=sys.stderr)
        return 2
    except (ValueError, TypeError) as exc:
        msg = " ".join(str(exc).split())
        print(f"rssm: error: {_name_option(msg)}", file=sys.stderr)
        return 2
    except MemoryError as exc:  # sizes too large: one line naming them, not a traceback
        what = " ".join(str(exc).split()) or "a NumPy allocation failed"
        print(f"rssm: error: out of memory: {what}", file=sys.stderr)
        return 2
    except OSError as exc:  # the file system failed (disk full, permissions changed mid-run)
        print(f"rssm: error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 1


#: Library argument names -> command-line options, to name the option in error messages.
_LIB_NAMES = {"n_blocks": "--blocks", "stationarity_tol": "--stationarity-tol",
              "stagnation_epochs": "--stagnation-epochs",
              "stagnation_rtol": "--stagnation-rtol", "max_iter": "--max-iter",
              "max_time": "--max-time",
              "target_error": "--target-error", "record_every": "--record-every",
              "selection": "--selection", "method": "--method", "delta": "--delta",
              "rho": "--rho", "mu0": "--mu0", "beta": "--beta", "c": "--c", "a": "--a"}


def _name_option(msg: str) -> str:
    """Prefix a library message that starts with an argument name by its option."""
    first = msg.split(" ", 1)[0]
    if first in _LIB_NAMES:
        return f"argument {_LIB_NAMES[first]}: {msg}"
    from rssm.problems import REGISTRY

    for cls in REGISTRY.values():
        for opt, param in problem_options(cls):
            if first == param.name:
                return f"argument {opt}: {msg}"
    return msg


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
