"""``rssm solve PROBLEM --data FILE``: a user's data file instead of a synthetic instance.

What each problem needs from the file comes from `rssm.problems.registry.DATA`; this
module adds the options, loads the file (`rssm.data.io.load`), checks its layout, decides
whether to stream it, and builds the problem.

Layout rule: files hold one sample per row. For a problem that needs more samples than
features (``DataEntry.many_samples``), a file with fewer rows than columns is refused
unless ``--samples-as-columns`` (transpose it) or ``--samples-as-rows`` (it is right as it
is) says which it is: run as it is, such a file makes St(n, p) with n the number of
samples, a problem that is both slow and not the one meant.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path
from typing import Any

import numpy as np

from rssm._validation import quieted
from rssm.cli._common import Given, UsageError, given, kind_parser, positive_int

__all__ = ["add_options", "problem_from_data", "refuse_without_data"]


def add_options(pp: argparse.ArgumentParser, name: str, synthetic: set[str]) -> None:
    """``--data FILE`` and its companions, for a problem with a registry entry. Options
    that the synthetic instance already has (``synthetic``) are shared, not repeated.

    Parameters
    ----------
    pp : argparse.ArgumentParser
        The parser of ``rssm solve PROBLEM``; the options go into a group of their own.
        Nothing is added for a problem without a data entry
        (`rssm.problems.registry.data_entry`).
    name : str
        The problem's name in `rssm.problems.REGISTRY` (``"dpcp"``).
    synthetic : set of str
        The parameter names of the synthetic instance's options: a data option of the
        same name is not added again.
    """
    from rssm.problems.registry import data_entry

    entry = data_entry(name)
    if entry is None:
        return
    g = pp.add_argument_group(
        "data file (instead of a synthetic instance)",
        f"The file holds ONE SAMPLE PER ROW: m rows of n numbers (scikit-learn's layout); "
        f"rssm transposes it to the API's samples-as-columns internally. Built as "
        f"{entry.summary}.")
    g.add_argument("--data", default=None, metavar="FILE",
                   help="data file, one sample per row: .npy, .npz (--key), .csv/.txt "
                        "(--header), HDF5 .h5/.hdf5 (--dataset) or Zarr (.zarr folder or "
                        ".zip; --dataset for a group)")
    g.add_argument("--key", default=None, help="array of an .npz file (when it holds several)")
    g.add_argument("--dataset", default=None,
                   help="dataset of an HDF5 file or array of a Zarr group (when there are "
                        "several), e.g. points or group/points")
    g.add_argument("--header", choices=["auto", "yes", "no"], default="auto",
                   help="CSV/text files: is the first row a header? auto: yes when none of "
                        "its cells is a number (a row of the integers 0..n-1 or 1..n is "
                        "refused as ambiguous: say yes or no)")
    lay = g.add_mutually_exclusive_group()
    lay.add_argument("--samples-as-columns", action="store_true",
                     help="the file holds one sample per COLUMN: transpose it")
    lay.add_argument("--samples-as-rows", action="store_true",
                     help="the file holds one sample per row even though it has fewer rows "
                          "than columns (otherwise refused for this problem)")
    for opt in entry.options:
        if opt.name in synthetic:
            continue  # the synthetic option serves both; its help names both uses
        g.add_argument("--" + opt.name.replace("_", "-"), type=kind_parser(opt.kind),
                       default=opt.default, dest=f"data_{opt.name}", action=Given,
                       metavar=opt.kind.__name__.upper(),
                       help=f"with --data: {opt.help}" + (" (required)" if opt.required
                                                          else ""))
    if entry.streams:
        g.add_argument("--out-of-core", choices=["auto", "always", "never"], default="auto",
                       help="stream the file a chunk of samples at a time instead of reading "
                            "it into memory (.npy, HDF5, Zarr); auto: when it exceeds a "
                            "quarter of the machine's memory")
        g.add_argument("--chunk-size", type=positive_int, default=None, metavar="SAMPLES",
                       help="samples per chunk when streaming (default, as "
                            "rssm.data.samples: the samples split evenly into chunks of at "
                            "least 2048 samples, at most 16 of them unless a chunk would then "
                            "exceed 64 MiB; refused when the data is not streamed)")


#: Companions of --data and their values when not given.
_COMPANIONS = {"key": None, "dataset": None, "header": "auto", "samples_as_columns": False,
               "samples_as_rows": False, "out_of_core": "auto", "chunk_size": None}


def refuse_without_data(args) -> None:
    """A companion of ``--data`` given without it is an error, not silently ignored.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed command line of ``rssm solve PROBLEM`` (without ``--data``).

    Raises
    ------
    UsageError
        Naming the first companion option that was given.
    """
    for dest, unset in _COMPANIONS.items():
        if getattr(args, dest, unset) != unset:
            raise UsageError(f"argument --{dest.replace('_', '-')}: only used with --data")
    for dest in sorted(getattr(args, "given", ())):
        if dest.startswith("data_"):
            raise UsageError(f"argument --{dest[5:].replace('_', '-')}: only used with --data")


def data_help(name: str, param: str) -> str:
    """The extra help of a synthetic option that is also a data option, or ''.

    Parameters
    ----------
    name : str
        The problem's name in `rssm.problems.REGISTRY`.
    param : str
        The parameter name of the synthetic option.

    Returns
    -------
    str
        ``"; with --data: "`` and the data option's help (and its default, or that it is
        required), or ``""`` when ``param`` is no data option of ``name``.
    """
    from rssm.problems.registry import data_entry

    entry = data_entry(name)
    for opt in entry.options if entry is not None else ():
        if opt.name == param:
            return "; with --data: " + opt.help + (
                ", required" if opt.required else
                f", {opt.default} if not given" if opt.default is not None else "")
    return ""


def _option_value(args, opt) -> tuple[Any, bool]:
    """(value, given) of a data option, stored as a synthetic option or on its own."""
    for dest in (f"syn_{opt.name}", f"data_{opt.name}"):
        if hasattr(args, dest):
            return getattr(args, dest), given(args, dest)
    return opt.default, False


def problem_from_data(args, cls, name: str, synthetic) -> tuple[Any, dict, str]:
    """The problem of ``--data``: (problem, settings dict, label for the summary).

    Parameters
    ----------
    args : argparse.Namespace
        The parsed command line of ``rssm solve PROBLEM --data FILE``.
    cls : type
        The problem's class in `rssm.problems.REGISTRY`; not read here (the data entry
        of ``name`` builds the problem).
    name : str
        The problem's name in `rssm.problems.REGISTRY`.
    synthetic : list of (str, inspect.Parameter)
        The options of the synthetic instance, as `rssm.cli.solve.problem_options`
        gives them: one given that is not also a data option is refused.

    Returns
    -------
    problem : Problem
        The problem built on the file's data (streamed in chunks, `ChunkedData`, when
        the file is streamed).
    settings : dict
        The data settings of the run (file, key, dataset, header, layout, samples,
        features, out-of-core, the data options), for the run's record.
    label : str
        One line naming the problem and its data, for the summary table.

    Raises
    ------
    UsageError
        When the file cannot be read, its layout is in doubt, or an option does not
        apply or is missing.
    """
    from rssm._validation import physical_memory
    from rssm.data import LayoutWarning
    from rssm.data import io as dio
    from rssm.data.chunked import ChunkedData
    from rssm.problems.registry import data_entry

    entry = data_entry(name)
    names = {o.name for o in entry.options}
    for opt, param in synthetic:
        if param.name not in names and given(args, f"syn_{param.name}"):
            raise UsageError(f"argument {opt}: sets the synthetic instance; not used with "
                             f"--data (options that apply: "
                             f"{', '.join('--' + o for o in sorted(names)) or 'none'})")
    option = {"path": "--data", "key": "--key", "dataset": "--dataset", "header": "--header"}
    try:
        arr = dio.load(args.data, key=args.key, dataset=args.dataset, header=args.header)
    except dio.DataFileError as exc:
        raise UsageError(f"argument {option.get(exc.argument, '--data')}: "
                         f"{exc.cli_message}") from None
    cols = args.samples_as_columns
    rows_, cols_ = (int(s) for s in arr.shape)
    m, n = (cols_, rows_) if cols else (rows_, cols_)
    if entry.many_samples and m < n and not (cols or args.samples_as_rows):
        raise UsageError(
            f"argument --data: {args.data} has {rows_} rows and {cols_} columns, read as "
            f"m = {m} samples of n = {n} features; {name} needs more samples than features, "
            "so the file most likely holds one sample per column: add --samples-as-columns "
            "to transpose it (or --samples-as-rows if its rows are samples)")
    layout_said = entry.many_samples and m < n
    if layout_said:
        # the reading was asked for by a flag: say it in the command line's words (the
        # problem's own LayoutWarning speaks of API arguments and is silenced below)
        flag = "--samples-as-columns" if cols else "--samples-as-rows"
        other = ("without --samples-as-columns, its rows are samples" if cols
                 else "with --samples-as-columns, its columns are samples")
        print(f"rssm: warning: {flag} reads {args.data} ({rows_} rows, {cols_} columns) as "
              f"m = {m} samples of n = {n} features, fewer samples than features, which "
              f"{name} rarely has; if that is not what the file holds, run it {other}",
              file=sys.stderr)
    mode = getattr(args, "out_of_core", "never")
    in_ram = isinstance(arr, np.ndarray) and not isinstance(arr, np.memmap)
    mem = physical_memory()
    stream = entry.streams and not in_ram and (mode == "always" or (
        mode == "auto" and mem is not None and 8.0 * m * n > mem / 4))
    if mode == "always" and in_ram:
        raise UsageError(f"argument --out-of-core: {Path(args.data).suffix} files are read "
                         "into memory; use .npy, HDF5 or Zarr to stream")
    if not stream and getattr(args, "chunk_size", None) is not None:
        raise UsageError("argument --chunk-size: only used when the data is streamed "
                         "(--out-of-core always, or auto for a file larger than a quarter of "
                         "the memory); this run reads the data into memory")
    values = {}
    for opt in entry.options:
        value, was_given = _option_value(args, opt)
        if opt.required and not was_given:
            raise UsageError(f"argument --{opt.name}: required with --data ({opt.help})")
        values[opt.name] = value if was_given else opt.default
    settings = {"data": str(args.data), "key": args.key, "dataset": args.dataset,
                "header": args.header, "samples_as_columns": cols, "samples": m,
                "features": n, "out_of_core": stream}
    if stream:
        data = ChunkedData(arr, rows_are_samples=not cols, chunk_size=args.chunk_size,
                           check_finite=False, name="data")
        settings["chunk_size"] = data.chunk_size
    elif cols:
        data = arr.T if isinstance(arr, np.ndarray) else np.asarray(arr).T  # a view for .npy
    else:
        data = arr  # left unloaded: the problem reads (or streams) it
    try:
        with quieted(LayoutWarning) if layout_said else contextlib.nullcontext():
            problem = entry.build(data, **values)
    except (ValueError, TypeError) as exc:
        arg = getattr(exc, "argument", None)
        arg = entry.arguments.get(arg, arg)
        if arg not in values:
            # what the problem refused is the file's data (named by the library's own
            # argument, "a", "yt": never an option of the command line; "a" was taken
            # for --a, the step's exponent: a user's audit)
            raise UsageError(f"argument --data: {' '.join(str(exc).split())}") from None
        # (numbers per sample, not "n": for l1_procrustes a row holds a_j and b_j, n + p)
        raise UsageError(f"argument --{arg}: {' '.join(str(exc).split())} (the data has "
                         f"{n} numbers per sample, m = {m} samples)") from None
    settings.update({k: v for k, v in values.items()})
    if "p" in values and values["p"] is None:
        settings["p"] = problem.shape[1]
    extra = ", ".join(f"{k}={v}" for k, v in values.items() if v is not None)
    label = (f"{name} data={args.data} (m={m} samples of {n} numbers"
             f"{', streamed' if stream else ''})"
             + (f" {extra}" if extra else ""))
    return problem, settings, label
