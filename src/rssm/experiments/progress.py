"""Progress bars (tqdm) for `rssm reproduce` (runs done / total) and `rssm solve`
(iterations or solver time of one run).

The bars are tqdm's: ``tqdm.auto`` draws a text bar on a terminal and a widget in a
Jupyter notebook. They are drawn only where someone watches (a terminal or a notebook);
elsewhere (logs, pipes, nohup) the callers print plain lines instead, or nothing.
"""

from __future__ import annotations

import math
import sys
import time
from typing import TextIO

__all__ = ["ProgressBar", "SolveProgress", "format_seconds", "interactive"]


def format_seconds(seconds: float) -> str:
    """``73.2`` -> ``"1m13s"``; ``4000`` -> ``"1h06m"``; ``9.87`` -> ``"9.9s"``.

    Parameters
    ----------
    seconds : float
        A duration in seconds; NaN or a negative value means unknown.

    Returns
    -------
    str
        The duration as text (``"?"`` when unknown).
    """
    if seconds != seconds or seconds < 0:  # NaN or negative: unknown
        return "?"
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, sec = divmod(int(round(seconds)), 60)
    if minutes < 60:
        return f"{minutes}m{sec:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def _in_notebook() -> bool:
    """True inside a Jupyter kernel (where tqdm.auto draws a widget)."""
    ipython = sys.modules.get("IPython")
    if ipython is None:
        return False
    try:
        shell = ipython.get_ipython()
    except Exception:
        return False
    return shell is not None and type(shell).__name__ == "ZMQInteractiveShell"


def interactive(stream: TextIO | None = None) -> bool:
    """True when a bar on ``stream`` (default ``sys.stderr``) has a viewer: the stream is
    a terminal, or the default stream in a Jupyter notebook.

    Parameters
    ----------
    stream : file, optional
        The stream a bar would be drawn on (default: ``sys.stderr``).

    Returns
    -------
    bool
        Whether the bar has a viewer (False for a closed stream).
    """
    s = sys.stderr if stream is None else stream
    isatty = getattr(s, "isatty", None)
    try:
        if isatty is not None and isatty():
            return True
    except ValueError:  # a closed stream
        return False
    return stream is None and _in_notebook()


def _tqdm(stream: TextIO | None, **kwargs):
    """tqdm.auto's bar on the default stream (terminal or notebook widget), the plain text
    bar on an explicit ``stream``."""
    if stream is None:
        from tqdm.auto import tqdm

        return tqdm(file=sys.stderr, **kwargs)
    from tqdm.std import tqdm

    return tqdm(file=stream, **kwargs)


class ProgressBar:
    """Progress over a known number of runs: a tqdm bar with the current run and an ETA.

    Parameters
    ----------
    total : int
        Number of runs.
    enabled : bool or None
        Draw at all; None means "when someone watches" (`interactive`).
    stream : file, optional
        Where to draw (default: ``sys.stderr``, or a notebook widget).

    Notes
    -----
    The ETA is the mean wall time of the runs finished in this session times the runs
    left; runs skipped by ``--resume`` count as done but not in the mean (tqdm's own
    rate would count them as instantaneous, so the bar shows this ETA instead).
    """

    def __init__(self, total: int, enabled: bool | None = None, stream: TextIO | None = None):
        self.total = int(total)
        self.enabled = interactive(stream) if enabled is None else bool(enabled)
        self.done = 0
        self._timed = 0
        self._elapsed = 0.0
        self._run_start = time.perf_counter()
        self._bar = None
        if self.enabled:
            self._bar = _tqdm(stream, total=self.total, unit="run", dynamic_ncols=True,
                              bar_format="{l_bar}{bar}| {n_fmt}/{total_fmt} runs "
                                         "[{elapsed}{postfix}]")

    def skip(self, count: int = 1) -> None:
        """Count ``count`` runs as done without timing them (resumed runs).

        Parameters
        ----------
        count : int, default=1
            Number of runs.
        """
        self.done += count
        if self._bar is not None:
            self._bar.update(count)

    def start(self, label: str) -> None:
        """Show that the run ``label`` begins.

        Parameters
        ----------
        label : str
            The run's name, shown after the ETA.
        """
        self._run_start = time.perf_counter()
        if self._bar is not None:
            self._bar.set_postfix_str(f"ETA {format_seconds(self.eta())} | {label}")

    def finish(self) -> None:
        """Count the current run as done."""
        self._elapsed += time.perf_counter() - self._run_start
        self._timed += 1
        self.done += 1
        if self._bar is not None:
            self._bar.update(1)

    def eta(self) -> float:
        """Seconds left, estimated; NaN before the first timed run."""
        if self._timed == 0:
            return float("nan")
        return self._elapsed / self._timed * (self.total - self.done)

    def close(self) -> None:
        """End the bar."""
        if self._bar is not None:
            self._bar.set_postfix_str("done")
            self._bar.close()
            self._bar = None


class SolveProgress:
    """A bar over one solver run, fed by `rssm.minimize`'s ``callback`` at recording points
    (which the solver clock does not count).

    The bar runs over iterations when ``max_iter`` is given, else over solver seconds
    (``max_time``); it shows the cost. It appears only after ``delay`` seconds, so a short
    run prints nothing, and it is removed when the run ends.

    Parameters
    ----------
    max_iter : int or None
        Iteration limit of the run.
    max_time : float or None
        Solver-time limit in seconds (used when ``max_iter`` is None).
    enabled : bool or None
        Draw at all; None means "when someone watches" (`interactive`).
    stream : file, optional
        Where to draw (default: ``sys.stderr``, or a notebook widget).
    delay : float
        Seconds before the bar first appears.
    """

    def __init__(self, max_iter: int | None, max_time: float | None = None,
                 enabled: bool | None = None, stream: TextIO | None = None,
                 delay: float = 0.5):
        self.enabled = interactive(stream) if enabled is None else bool(enabled)
        self.by_time = max_iter is None and max_time is not None
        self.total = float(max_time) if self.by_time else max_iter
        self._bar = None
        if self.enabled:
            fmt = ("{l_bar}{bar}| {n:.1f}/{total:.1f} s [{elapsed}<{remaining}{postfix}]"
                   if self.by_time else None)
            self._bar = _tqdm(stream, total=self.total, unit="it", leave=False, delay=delay,
                              dynamic_ncols=True, bar_format=fmt)

    def __call__(self, progress) -> bool:
        """Update the bar from a `rssm.stopping.Progress`; never asks to stop.

        Parameters
        ----------
        progress : Progress
            The run's progress at a recording point.

        Returns
        -------
        bool
            False.
        """
        bar = self._bar
        if bar is not None:
            if progress.cost is not None and math.isfinite(progress.cost):
                bar.set_postfix_str(f"cost {progress.cost:.6g}", refresh=False)
            now = float(progress.time) if self.by_time else int(progress.iteration)
            now = min(now, self.total)  # the last step may end past a time limit
            bar.update(now - bar.n)  # tqdm redraws at most every 0.1 s, after its delay
        return False

    def close(self) -> None:
        """Remove the bar."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None
