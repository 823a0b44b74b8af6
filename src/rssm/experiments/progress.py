"""A one-line progress bar on stderr: runs done / total, the current run, elapsed time, ETA.

A small own bar rather than a dependency (tqdm): the reproduction needs one line that is
redrawn between runs, not per iteration, and the project keeps its run-time dependencies
to numpy, scipy and matplotlib.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

__all__ = ["ProgressBar", "format_seconds"]


def format_seconds(seconds: float) -> str:
    """``73.2`` -> ``"1m13s"``; ``4000`` -> ``"1h06m"``; ``9.87`` -> ``"9.9s"``."""
    if seconds != seconds or seconds < 0:  # NaN or negative: unknown
        return "?"
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, sec = divmod(int(round(seconds)), 60)
    if minutes < 60:
        return f"{minutes}m{sec:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


class ProgressBar:
    """Progress over a known number of runs, drawn on one terminal line.

    Parameters
    ----------
    total : int
        Number of runs.
    enabled : bool or None
        Draw at all; None means "when ``stream`` is a terminal".
    stream : file, optional
        Where to draw (default ``sys.stderr``).
    width : int
        Width of the bar in characters.

    Notes
    -----
    The ETA is the mean wall time of the runs finished in this session times the runs
    left; runs skipped by ``--resume`` count as done but not in the mean.
    """

    def __init__(self, total: int, enabled: bool | None = None, stream: TextIO | None = None,
                 width: int = 24):
        self.total = int(total)
        self.stream = sys.stderr if stream is None else stream
        if enabled is None:
            isatty = getattr(self.stream, "isatty", None)
            enabled = bool(isatty and isatty())
        self.enabled = enabled
        self.width = width
        self.done = 0
        self._timed = 0
        self._elapsed = 0.0
        self._start = time.perf_counter()
        self._last_len = 0

    def skip(self, count: int = 1) -> None:
        """Count ``count`` runs as done without timing them (resumed runs)."""
        self.done += count

    def start(self, label: str) -> None:
        """Show that the run ``label`` begins."""
        self._run_start = time.perf_counter()
        self._draw(label)

    def finish(self) -> None:
        """Count the current run as done."""
        self._elapsed += time.perf_counter() - self._run_start
        self._timed += 1
        self.done += 1

    def eta(self) -> float:
        """Seconds left, estimated; NaN before the first timed run."""
        if self._timed == 0:
            return float("nan")
        return self._elapsed / self._timed * (self.total - self.done)

    def line(self, label: str) -> str:
        """The text of the bar for the current state."""
        frac = self.done / self.total if self.total else 1.0
        filled = int(round(frac * self.width))
        bar = "#" * filled + "-" * (self.width - filled)
        elapsed = time.perf_counter() - self._start
        return (f"[{bar}] {self.done}/{self.total} runs | {label} | "
                f"elapsed {format_seconds(elapsed)} | ETA {format_seconds(self.eta())}")

    def _draw(self, label: str) -> None:
        if not self.enabled:
            return
        text = self.line(label)
        pad = max(0, self._last_len - len(text))
        self.stream.write("\r" + text + " " * pad)
        self.stream.flush()
        self._last_len = len(text)

    def close(self) -> None:
        """End the bar's line."""
        if self.enabled:
            self._draw("done")
            self.stream.write("\n")
            self.stream.flush()
