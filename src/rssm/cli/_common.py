"""Pieces shared by the commands: the one-line-error parser, the help formatter, option
types, and the record of which options the user gave."""

from __future__ import annotations

import argparse
import inspect
import math
import types
import typing
from pathlib import Path

__all__ = ["UsageError", "StdoutClosed", "out", "Parser", "Formatter", "Given", "given",
           "int_at_least", "positive_int", "nonneg_int", "positive_float", "threads", "formats",
           "out_folder", "param_type", "first_line"]


class UsageError(Exception):
    """Bad command-line usage; becomes ``rssm: error: ...`` and exit status 2."""


class StdoutClosed(Exception):
    """The reader of stdout left (``rssm ... | head -1``); exit status 141, no message."""


def out(text: str) -> None:
    """Print ``text`` on stdout; a closed stdout raises `StdoutClosed` (and only a closed
    stdout: a broken pipe elsewhere stays an error)."""
    try:
        print(text, flush=True)
    except BrokenPipeError:
        raise StdoutClosed from None


class Parser(argparse.ArgumentParser):
    """ArgumentParser whose errors are one line and carry no usage block."""

    def error(self, message: str) -> typing.NoReturn:
        if message.startswith("the following arguments are required:"):
            # a missing command or problem name: say which ones there are
            for action in self._actions:
                if isinstance(action, argparse._SubParsersAction) and action.metavar \
                        and action.metavar in message and action.choices:
                    message += (" (choose from "
                                + ", ".join(repr(c) for c in action.choices) + ")")
        raise UsageError(message)


class Formatter(argparse.RawDescriptionHelpFormatter):
    """Appends ``(default: X)`` to each option's help unless the help already names its
    default or X is None."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if ("default" in text or action.default is None or action.default is argparse.SUPPRESS
                or action.option_strings == [] or isinstance(action.default, bool)):
            return text
        return text + " (default: %(default)s)"


class Given(argparse.Action):
    """A store action that also records its destination in ``namespace.given``, so a
    command can tell an option the user gave from one left at its default."""

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, values)
        namespace.given = frozenset(getattr(namespace, "given", frozenset())) | {self.dest}


def given(args: argparse.Namespace, dest: str) -> bool:
    """True when the option stored in ``dest`` was on the command line."""
    return dest in getattr(args, "given", frozenset())


def int_at_least(minimum: int):
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


positive_int = int_at_least(1)
nonneg_int = int_at_least(0)


def threads(text: str) -> str | int:
    """argparse type of ``--threads``: ``auto`` or an integer >= 1."""
    if text == "auto":
        return text
    try:
        return positive_int(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(
            f"expected 'auto' or an integer >= 1, got {text!r}") from None


def positive_float(text: str) -> float:
    """argparse type: a finite number > 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"expected a finite number > 0, got {text}")
    return value


def nonneg_float(text: str) -> float:
    """argparse type: a finite number >= 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"expected a finite number >= 0, got {text}")
    return value


from rssm.experiments.configs import FIGURE_FORMATS as FORMATS  # noqa: E402


def formats(text: str) -> list[str]:
    """The figure formats of ``--formats`` (comma-separated), checked; each once."""
    fmts = list(dict.fromkeys(f.strip().lower() for f in text.split(",") if f.strip()))
    bad = [f for f in fmts if f not in FORMATS]
    if not fmts or bad:
        raise UsageError(f"argument --formats: invalid format(s) {', '.join(bad) or '(none)'} "
                         f"(choose from {', '.join(FORMATS)})")
    return fmts


def out_folder(value: str, option: str = "--out") -> Path:
    """The folder of a ``--out DIR`` (``rssm reproduce``, ``rssm plot``), created if
    needed; `UsageError` (exit 2) naming the option where it is empty, a file, or cannot
    be created (``rssm plot --out`` gave a bare OSError and exit 1 for these, and took
    ``--out ""`` as the current folder)."""
    if not str(value).strip():
        raise UsageError(f"argument {option}: empty; name a folder")
    path = Path(value)
    if path.exists() and not path.is_dir():
        raise UsageError(f"argument {option}: {value} is a file; name a folder")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"argument {option}: cannot create folder {value}: "
                         f"{exc.strerror or exc}") from None
    return path


def _number(text: str) -> int | float:
    try:
        return int(text)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None


def _float(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None


def _bool(text: str) -> bool:
    low = text.lower()
    if low in ("1", "true", "yes", "on"):
        return True
    if low in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def param_type(param: inspect.Parameter):
    """(parser, kind) for a keyword of a problem's ``synthetic``, from its annotation or
    default."""
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
        return _bool, "bool"
    if "int" in names and "float" not in names or (
            not names and isinstance(default, int)):
        return _int, "int"
    if "float" in names or isinstance(default, float):
        return _float, "float"
    if "str" in names or isinstance(default, str):
        return str, "str"
    return _number, "number"


def kind_parser(kind: type):
    """The parser of a `rssm.problems.registry.DataOption` kind (int or float)."""
    return _int if kind is int else _float


def first_line(doc: str | None) -> str:
    """The first paragraph of a docstring, on one line."""
    if not doc:
        return ""
    return inspect.cleandoc(doc).split("\n\n")[0].replace("\n", " ")


def note_not_redrawn(written, fmts) -> None:
    """One line on stderr naming earlier figures in other formats that this draw left as
    they were (an audit: `--resume --formats png` after a png,pdf run left the PDFs,
    drawn from fewer seeds, without a word)."""
    import sys

    from rssm.experiments import not_redrawn

    left = not_redrawn(written)
    if left:
        try:
            print(f"rssm: note: {', '.join(p.name for p in left)} drawn earlier, not "
                  f"redrawn (--formats {','.join(fmts)}): they may show fewer runs; delete "
                  "them or add their format", file=sys.stderr, flush=True)
        except (BrokenPipeError, OSError, ValueError, AttributeError):
            pass        # advisory: a closed or missing stderr does not fail the command
