"""Thread pools of BLAS and OpenMP during a solver run.

NumPy's OpenBLAS (and, when PyTorch or another OpenMP library is loaded, its OpenMP pool)
start with one thread per core. On an idle machine the second core speeds up the
products of an iteration (about 1.5-1.8x on 2 cores at the paper's sizes); with one other
busy process on the machine, the same pool spin-waits for a core it does not get and an
iteration of a few milliseconds becomes 5-10x slower than on one thread
(docs/performance.md). Neither choice is right everywhere, so `minimize` takes
``threads``:

* ``"auto"`` (default): run with the pools as they are, and time short probes of the
  iterations on one thread at a growing interval; keep one thread while it is clearly
  faster (by more than `SWITCH_MARGIN`) and go back when the full pool is clearly faster
  again. On an idle machine it stays on the full pool except during the probes.
* an int N: every pool limited to N threads for the run (restored afterwards);
* ``None``: leave the pools alone.

The thread count changes the rounding of OpenBLAS products, so runs are bit-identical for
the same seed when they ran on the same thread counts: always with an int, and with
``"auto"`` whenever its decisions were the same (``Result.threads`` records them). Pools
are controlled with threadpoolctl, the tool scikit-learn uses for the same purpose.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

from threadpoolctl import ThreadpoolController

__all__ = ["ThreadGovernor", "check_threads", "SWITCH_MARGIN"]

#: A probe's thread count is adopted only when its median step time beats the current
#: one's by this factor; the hysteresis keeps an idle machine on its default pool.
SWITCH_MARGIN = 1.25
#: Steps timed per side of a comparison (the median is compared); a probe also runs one
#: warm-up step first, which is not timed against the reference (a pool that has just
#: been resized can be slow on its first call).
_WINDOW = 3
#: Iterations between probes: starts here, grows 4x after each probe that confirms the
#: current choice, up to `_MAX_INTERVAL`, and returns here after a switch.
_FIRST_INTERVAL = 4
_MAX_INTERVAL = 4096
#: A probe step slower than this many times the current median ends the probe at once, so
#: a probe on a loaded machine costs one slow step, not a window of them.
_ABORT_FACTOR = 3.0
#: A probe is also due after this many solver seconds (or `_MAX_PROBE_GAP_STEPS` step
#: times, if longer) whatever the iteration count, so a load that starts late in a long run
#: is noticed; probes then cost at most ~1% of the run.
_MAX_PROBE_GAP_S = 10.0
_MAX_PROBE_GAP_STEPS = 200

_CONTROLLER: ThreadpoolController | None = None


def _controller() -> ThreadpoolController:
    # Built lazily and refreshed per run: libraries loaded after the first run (PyTorch's
    # OpenMP, say) are seen too.
    global _CONTROLLER
    _CONTROLLER = ThreadpoolController()
    return _CONTROLLER


def check_threads(value: Any) -> str | int | None:
    """Validate ``threads``: ``"auto"``, None, or an int >= 1 (returned as int)."""
    if value is None or (isinstance(value, str) and value == "auto"):
        return value
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(
            f"threads must be 'auto', None or an int >= 1, got {type(value).__name__} "
            f"{value!r}"
        )
    if int(value) < 1:
        raise ValueError(f"threads must be 'auto', None or an int >= 1, got {int(value)}")
    return int(value)


class ThreadGovernor:
    """Sets the pools for a run and, with ``"auto"``, chooses between the full pool and
    one thread from the measured step times.

    Use as a context manager around the loop; call `before_step` and `after_step` around
    each timed step. Both are a few attribute reads when nothing is due.
    """

    def __init__(self, threads: str | int | None):
        self.mode = check_threads(threads)
        self._limit = None
        self.hi = 1
        self.current = 1
        self.active = False
        self.switches: list[tuple[int, int]] = []   # (iteration, threads from then on)
        self.probes = 0

    # -- context --------------------------------------------------------------------------
    def __enter__(self) -> ThreadGovernor:
        if self.mode is None:
            return self
        ctl = _controller()
        pools = [info["num_threads"] for info in ctl.info()]
        self.hi = max(pools) if pools else 1
        if isinstance(self.mode, int):
            self._limit = ctl.limit(limits=self.mode)
            self.current = min(self.mode, self.hi)
            return self
        self.current = self.hi
        self.active = self.hi > 1
        self._ref: list[float] = []
        self._probe: list[float] | None = None
        self._interval = _FIRST_INTERVAL
        self._next = 1 + _WINDOW            # first probe right after the reference window
        self._t_since = 0.0
        return self

    def __exit__(self, *exc) -> None:
        if self._limit is not None:
            self._limit.restore_original_limits()
            self._limit = None

    # -- the loop's hooks ---------------------------------------------------------------
    def before_step(self, k: int) -> None:
        """Start a probe when one is due (switches the pools before step k)."""
        if not self.active or self._probe is not None:
            return
        gap = max(_MAX_PROBE_GAP_S, _MAX_PROBE_GAP_STEPS * _median(self._ref))
        if k >= self._next or self._t_since > gap:
            if len(self._ref) < _WINDOW:
                self._next = k + _WINDOW
                return
            self._probe = []
            self._set(1 if self.current > 1 else self.hi)

    def after_step(self, k: int, dt: float) -> None:
        """Record the time of step k (seconds) and decide when a probe is complete."""
        if not self.active:
            return
        if self._probe is None:
            if k == 0:
                return                       # first step: page faults, warm-up
            self._ref.append(dt)
            if len(self._ref) > _WINDOW:
                del self._ref[0]
            self._t_since += dt
            return
        self._probe.append(dt)
        if len(self._probe) == 1:
            return                           # the first step after a switch: warm-up
        ref = _median(self._ref)
        if dt > _ABORT_FACTOR * ref or len(self._probe) > _WINDOW:
            self._decide(k, ref)

    def _decide(self, k: int, ref: float) -> None:
        probe = _median(self._probe[1:])
        self.probes += 1
        self._probe = None
        self._t_since = 0.0
        if probe * SWITCH_MARGIN < ref:       # the probed setting is clearly faster: keep it
            self.switches.append((k + 1, self._probing))
            self._ref = []
            self._interval = _FIRST_INTERVAL
        else:                                 # go back to what we had
            self._set(self._previous)
            self._interval = min(4 * self._interval, _MAX_INTERVAL)
        self._next = k + 1 + self._interval

    def _set(self, n: int) -> None:
        self._previous, self._probing = self.current, n
        if self._limit is not None:
            self._limit.restore_original_limits()
            self._limit = None
        if n != self.hi:
            self._limit = _CONTROLLER.limit(limits=n)
        self.current = n

    def describe(self) -> str:
        """One line for `Result.threads`: the setting and, for "auto", its decisions."""
        if self.mode is None:
            return "unchanged"
        if isinstance(self.mode, int):
            return f"{self.current}"
        if not self.active:
            return f"auto ({self.hi} available: nothing to choose)"
        moves = ", ".join(f"{t} from iteration {k}" for k, t in self.switches)
        return (f"auto ({self.hi} available; {self.probes} probes; "
                + (f"switched to {moves}" if moves else f"stayed on {self.hi}") + ")")


def _median(xs: list[float]) -> float:
    s = sorted(xs)
    return s[len(s) // 2] if s else math.inf
