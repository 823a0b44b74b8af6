"""The ``rssm`` command: ``reproduce`` the paper's experiments, ``plot`` saved results,
``solve`` one built-in problem. One module per command (`rssm.cli.reproduce`,
`rssm.cli.plot`, `rssm.cli.solve`); `main` dispatches.

Bad options print one line ``rssm: error: ...`` naming the option and what is allowed and
exit with status 2; so do ValueError/TypeError raised by the library on bad values (the
option is named from the error's ``argument`` attribute, see `rssm._validation`, never by
reading the message). A result file that cannot be written is one line and status 1;
Ctrl-C during a run is status 130, after saving what the run had. Measured durations of
the commands are in docs/cli.md.
"""

from __future__ import annotations

import signal
import sys
import warnings
from collections.abc import Sequence

from rssm._interrupt import term_as_interrupt, term_interrupt, term_received
from rssm.cli import plot, reproduce, solve
from rssm.cli._common import Formatter, Parser, StdoutClosed, UsageError
from rssm.cli.output import WriteError
from rssm.cli.solve import problem_options
from rssm.cli.solve import progress as _solve_progress  # noqa: F401 (tests reach it here)

__all__ = ["main", "console", "build_parser", "UsageError", "problem_options"]

_EXAMPLES = """\
examples:
  rssm reproduce all --quick --out rssm-results     # the whole pipeline (durations: docs/cli.md)
  rssm reproduce dpcp --seeds 5 --tuned --out runs  # full DPCP figure and tuned part
  rssm plot runs/results.csv                        # redraw figures from saved data
  rssm solve dpcp --method rssm --blocks 5 --max-iter 2000 --out trace.csv
"""


def build_parser() -> Parser:
    """The ``rssm`` argument parser.

    Returns
    -------
    Parser
        An `argparse.ArgumentParser` whose errors raise `UsageError` (one line, exit
        status 2) instead of printing a usage block.
    """
    from rssm import __version__

    parser = Parser(
        prog="rssm", formatter_class=Formatter, epilog=_EXAMPLES,
        description="Randomized Submanifold Subgradient Method (RSSM) on the Stiefel manifold: "
                    "reproduce the paper's experiments, redraw their figures, or solve one "
                    "built-in problem. Paper: A. Y.-M. Cheung, J. Wang, M.-C. Yue, "
                    "A. M.-C. So, \"Randomized Submanifold Subgradient Method for "
                    "Optimization over Stiefel Manifolds\", arXiv:2409.01770 (labels such as "
                    "alg-RSSM = Algorithm 1: docs/paper-map.md).")
    parser.add_argument("--version", action="version", version=f"rssm {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    sub.required = True
    reproduce.add_parser(sub)
    plot.add_parser(sub)
    solve.add_parser(sub)
    return parser


def _error(message: str) -> None:
    print(f"rssm: error: {' '.join(message.split())}", file=sys.stderr)


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so that Python's flush at exit does not raise again."""
    import os

    try:
        fd = sys.stdout.fileno()
    except (OSError, ValueError, AttributeError):  # no descriptor (a captured stream)
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, fd)
    except OSError:
        pass
    finally:
        # (the copy is all stdout needs: left open, each call that met a closed pipe in a
        # process that goes on, `main` called in-process, kept one more descriptor; an audit)
        os.close(devnull)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``rssm`` command.

    Parameters
    ----------
    argv : sequence of str, optional
        The arguments after ``rssm`` (default: ``sys.argv[1:]``).

    Returns
    -------
    int
        The exit status: 0 after a run, 1 when a result file could not be written, 2 for
        bad usage, 130 after Ctrl-C, 143 after SIGTERM (handled as Ctrl-C: the run so far
        is printed and saved), 141 when the reader of stdout left before the summary was
        printed (the run and its ``--out`` files are complete).
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    term = _TermAsInterrupt()
    try:
        with term:
            status = _main(argv)
    except KeyboardInterrupt:  # outside a run (a run returns what it had: see solve.run)
        print("rssm: interrupted" + (" (SIGTERM)" if term.received else ""), file=sys.stderr)
        status = 130
    return 143 if (term.received and status == 130) else status


def _command_warning(message, category, filename, lineno, line=None) -> str:
    """A warning as the ``rssm`` command prints it (`warnings.formatwarning`'s signature)."""
    return f"rssm: warning: {message} ({category.__name__})\n"


def console() -> int:
    """The ``rssm`` command itself (``python -m rssm`` too): `main`, and after an
    interrupted run (status 130 or 143) further Ctrl-Cs are ignored while the process
    exits. A second Ctrl-C that came after the run had been saved and its summary
    printed ended the process by the signal (status -2 to a caller reading the raw
    status, where the docs promise 130; an audit, 6 of 12 double Ctrl-Cs 50-100 ms
    apart). Not in `main`, which a Python caller may run in its own process."""
    # warnings as the command's own lines, "rssm: warning: ... (UserWarning)": Python's
    # format named a line of runpy or of rssm's code, and printed that source line, to a
    # user of the command (a review: "<frozen runpy>:88: UserWarning: ...")
    warnings.formatwarning = _command_warning
    status = main()
    if status in (130, 143):
        try:
            signal.signal(signal.SIGINT, signal.SIG_IGN)
        except (ValueError, OSError):      # not the main thread: nothing to ignore
            pass
    return status


class _TermAsInterrupt:
    """SIGTERM (a job scheduler stopping the job, ``kill``, ``timeout``) handled as Ctrl-C:
    the handler sends SIGINT, so the run returns what it had, the summary is printed and
    ``--out`` written, through the same path (and the same held sections,
    `rssm._interrupt.HeldInterrupt`) as Ctrl-C; the exit status is then 143 (128 + 15)
    instead of 130. Before, SIGTERM ended the process at once: nothing printed, no files.
    Only on the main thread, where SIGTERM has its default handler. Where SIGINT is
    ignored (a job started with ``&`` by a script, which the shell shields from Ctrl-C)
    the SIGINT would be dropped: there SIGTERM raises the interrupt itself
    (`rssm._interrupt.term_interrupt`, held by the same sections) and SIGINT stays
    ignored (before, SIGTERM ended such a job at once, nothing saved; a user's audit).
    Where SIGINT has a handler of someone else's, SIGTERM keeps ending the process."""

    def __init__(self) -> None:
        self.received = False
        self._old = None
        self._direct = False

    def _handle(self, signum, frame) -> None:
        self.received = True
        term_received(True)         # the run's message names SIGTERM, not the user
        if self._direct:
            term_interrupt(signum, frame)
        else:
            signal.raise_signal(signal.SIGINT)

    def __enter__(self) -> _TermAsInterrupt:
        import threading

        if threading.current_thread() is threading.main_thread():
            try:
                if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
                    sigint = signal.getsignal(signal.SIGINT)
                    if sigint is signal.default_int_handler:
                        self._old = signal.signal(signal.SIGTERM, self._handle)
                    elif sigint == signal.SIG_IGN:
                        self._direct = True
                        term_as_interrupt(True)
                        self._old = signal.signal(signal.SIGTERM, self._handle)
            except (ValueError, OSError, AttributeError):
                self._old = None
        return self

    def __exit__(self, *exc) -> None:
        term_received(False)
        if self._old is not None:
            signal.signal(signal.SIGTERM, self._old)
        if self._direct:
            term_as_interrupt(False)
            self._direct = False


def _main(argv: list[str]) -> int:
    args = None
    try:
        args = build_parser().parse_args(argv)
        if args.command == "reproduce":
            return reproduce.run(args, argv)
        if args.command == "plot":
            return plot.run(args)
        return solve.run(args, argv)
    except UsageError as exc:
        _error(str(exc))
        return 2
    except WriteError as exc:
        _error(str(exc))
        return 1
    except StdoutClosed:
        # the reader of stdout left (``rssm solve ... | head -1``): the run and its --out
        # files are done; end quietly, as a command killed by SIGPIPE does
        _silence_stdout()
        return 141
    except (ValueError, TypeError) as exc:
        option = solve.option_for(args, getattr(exc, "argument", None)) if args else None
        _error(f"argument {option}: {exc}" if option else str(exc))
        return 2
    except MemoryError as exc:  # sizes too large: one line naming them, not a traceback
        _error(f"out of memory: {str(exc) or 'a NumPy allocation failed'}")
        return 2
    except OSError as exc:  # the file system failed (disk full, permissions changed mid-run)
        _error(str(exc))
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
