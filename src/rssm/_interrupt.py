"""Ctrl-C held over short critical sections.

Python raises `KeyboardInterrupt` wherever the main thread happens to be when SIGINT
arrives, also half-way through a change of process-wide state. Measured (real SIGINTs at
random times over 2-iteration runs, 3000 trials): 10 landed inside threadpoolctl's change
of the BLAS pools, after OpenBLAS was at one thread and before rssm had recorded the
limit, which left the process at one BLAS thread for good; 68 landed after the last
iteration, before the `rssm.Result` was built, and lost the finished run.
`HeldInterrupt` holds SIGINT over such a section: a Ctrl-C that comes inside it is
recorded (``interrupted``) and the section completes; the caller then raises it, or marks
its result as interrupted. It acts only on the main thread (the only one SIGINT reaches)
and only while Python's own handler is installed, so a handler the user set is left
alone; nested sections leave the interrupt to the outermost one.
"""

from __future__ import annotations

import signal
import threading

# The C module under `signal`: its calls skip the enum conversions (10 us a section
# through `signal`, about 1 us through `_signal`; a torch optimizer's step holds one).
try:
    import _signal as _sig
except ImportError:
    _sig = signal

__all__ = ["HeldInterrupt", "term_interrupt", "term_as_interrupt"]

_SIGINT = int(signal.SIGINT)
_DEFAULT = signal.default_int_handler

#: Per thread: ``depth``, how many `rssm.minimize` calls are running in this thread (a
#: callback or a cost that calls it nests one run in another), and ``pending``, set when a
#: nested run ended on a Ctrl-C: the run around it stops at the start of its next
#: iteration (`rssm.solvers.loop`), as interrupted, so that one Ctrl-C stops them all.
NESTING = threading.local()


def act_on_nested_interrupt() -> None:
    """Raise KeyboardInterrupt (and clear the flag) if a run nested in this thread's
    running one ended on a Ctrl-C (`NESTING`); the solver loop calls it between
    iterations and after its last."""
    if getattr(NESTING, "pending", False):
        NESTING.pending = False
        raise KeyboardInterrupt


class HeldInterrupt:
    """Context manager: SIGINT inside the block is recorded, not raised.

    Attributes
    ----------
    interrupted : bool
        Whether a SIGINT arrived inside the block (only where this block held it).
    """

    __slots__ = ("interrupted", "_held")

    def __init__(self) -> None:
        self.interrupted = False
        self._held = False

    def _note(self, signum, frame) -> None:
        self.interrupted = True

    def __enter__(self) -> HeldInterrupt:
        # (asked each time: a process forked from another thread has that one as main)
        if threading.current_thread() is threading.main_thread():
            try:
                if _sig.getsignal(_SIGINT) is _DEFAULT:
                    _sig.signal(_SIGINT, self._note)
                    self._held = True
                elif _TERM[0] and _TERM[1] is None:
                    _TERM[1] = self             # `term_interrupt` records it here
                    self._held = None
            except (ValueError, OSError):       # no signals here (an embedded interpreter)
                pass
        return self

    def __exit__(self, *exc) -> None:
        if self._held:
            _sig.signal(_SIGINT, _DEFAULT)
            self._held = False
        elif self._held is None:
            _TERM[1] = None
            self._held = False


#: Where SIGINT is ignored (a job started with ``&`` by a script) and SIGTERM is handled
#: as an interrupt (`rssm.cli`): whether that is so, and the outermost section holding
#: it now (None outside sections).
_TERM: list = [False, None]


def term_interrupt(signum, frame) -> None:
    """The interrupt SIGTERM stands for where SIGINT is ignored: recorded by the section
    that holds it, else raised as `KeyboardInterrupt` (SIGINT stays ignored: a Ctrl-C at
    the terminal leaves such a job alone, as the shell meant)."""
    section = _TERM[1]
    if section is not None:
        section.interrupted = True
        return
    raise KeyboardInterrupt


def term_as_interrupt(on: bool) -> None:
    """Turn `term_interrupt`'s sections on or off (the CLI, around a run)."""
    _TERM[0] = bool(on)
    if not on:
        _TERM[1] = None


#: Whether the interrupt that a run now sees came from SIGTERM (set by the CLI's handler,
#: `rssm.cli`, cleared when its run ends): the run's message then names SIGTERM, not the
#: user (a job scheduler's ``kill`` read "interrupted by the user"; a user's audit).
_BY_TERM: list = [False]


def term_received(on: bool) -> None:
    """Record (or clear) that SIGTERM stands for the interrupt (the CLI's handler)."""
    _BY_TERM[0] = bool(on)


def interrupted_by() -> str:
    """``"interrupted by the user"``, or ``"interrupted by SIGTERM"`` where the CLI turned
    that signal into the interrupt."""
    return "interrupted by SIGTERM" if _BY_TERM[0] else "interrupted by the user"
