"""Threads during a run: reproducible bits, whatever the machine is doing.

A run's numbers depend on the order of its floating-point additions, and OpenBLAS splits a
product differently on 1 and on 2 threads; a rule that picked the thread count from
timings therefore gave different bits from run to run. rssm instead fixes the
arithmetic and lets only the *scheduling* vary:

* during `rssm.minimize` every BLAS/OpenMP pool is limited to one thread (threadpoolctl,
  the tool scikit-learn uses; PyTorch's intra-op pool with ``torch.set_num_threads`` where
  torch is imported), so each product is computed the same way every time;
* the data problems split their samples into a fixed partition of chunks that depends on
  the data's size alone (never on the thread count); the products of the chunks run on a
  small pool of worker threads (`parallel_for`: NumPy releases the GIL inside BLAS), each
  chunk into its own buffer, and partial sums are added in chunk order. One worker or
  eight, the result is the same to the last bit.

Worker threads that wait block on a queue; they never spin. So where another process
keeps a core busy, two workers cost about what one thread costs, instead of the
several-fold slowdown of a spinning BLAS pool (benchmarks/thread_modes.py measures both).

``threads`` of `rssm.minimize`:

* ``"auto"`` (default): BLAS at one thread, as many chunk workers as the process may use
  cores (at most `MAX_WORKERS`);
* an int N >= 1: BLAS at one thread, N chunk workers (the same bits as ``"auto"``);
* ``None``: the pools are left as they are and the chunks run one after another on the
  caller's thread (for a custom problem whose own code wants multi-threaded BLAS; the
  bits then depend on the BLAS thread count).

The BLAS limit is process-wide (it is a setting of the library). Runs in several Python
threads at once share it: the first run sets it and the last one to end restores the
previous limits, so concurrent runs neither undo each other's setting nor change each
other's bits.
"""

from __future__ import annotations

import itertools
import numbers
import os
import queue
import sys
import threading
from collections.abc import Callable
from contextlib import contextmanager
from typing import Any

from rssm._interrupt import HeldInterrupt

__all__ = ["check_threads", "RunThreads", "parallel_for", "workers", "MAX_WORKERS",
           "usable_cores", "single_blas"]

#: Upper bound on the chunk workers of ``threads="auto"``.
MAX_WORKERS = 8


def usable_cores() -> int:
    """Cores this process may run on (its CPU affinity where the OS tells it)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def check_threads(value: Any) -> str | int | None:
    """Validate ``threads``: ``"auto"``, None, or an int >= 1 (returned as int).

    Parameters
    ----------
    value : {"auto", None} or int
        The thread setting of a run: ``"auto"``, None (leave the thread pools as they
        are), or a number of threads >= 1 (an integer-valued number is accepted).

    Returns
    -------
    str, int or None
        ``"auto"`` or None as given, else the number of threads as a Python int.

    Raises
    ------
    TypeError
        When ``value`` is neither ``"auto"``, None nor an integer.
    ValueError
        When the integer is below 1.
    """
    if value is None or (isinstance(value, str) and value == "auto"):
        return value
    from rssm._validation import integer_valued

    value = integer_valued(value)
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        from rssm._validation import describe

        raise TypeError(
            f"threads must be 'auto', None or an int >= 1, got {type(value).__name__} "
            f"{describe(value)}"
        )
    if int(value) < 1:
        raise ValueError(f"threads must be 'auto', None or an int >= 1, got {int(value)}")
    return int(value)


# -- the process-wide BLAS limit ------------------------------------------------------------

_BLAS_LOCK = threading.Lock()
_blas_depth = 0
#: How often each Python thread held the pools at one thread, by thread id (a
#: ``threads=None`` run reads the others': another thread's run that did so during it
#: changed its BLAS threads part of the time).
_limits_taken: dict[int, int] = {}
_blas_limiter = None


def _take_control() -> None:
    """threadpoolctl >= 3.7 lets only one "controlling" Python thread set the limits of a
    pthreads OpenBLAS (its pool is process-wide) and silently ignores the others; the
    first thread that ever set a limit keeps that role. A run in another thread would
    then not be limited at all, and the last run to end could not restore the pools.
    rssm's limit is process-wide by design (reference-counted below), so it claims the
    role for the duration of each change."""
    import threadpoolctl

    ctl = getattr(threadpoolctl, "OpenBLASController", None)
    if ctl is not None and hasattr(ctl, "clear_controlling_thread"):
        ctl.clear_controlling_thread(force=True)


_controller = None
_controller_modules = -1


def _blas_controller():
    """threadpoolctl's view of the loaded BLAS/OpenMP libraries, built again whenever
    Python has imported modules since the last one: a native library (PyTorch's OpenMP,
    SciPy's own OpenBLAS) comes with an import, so libraries loaded since the last run
    are limited too. Building it scans every loaded shared object: 2 ms per call with
    SciPy and scikit-learn loaded (measured on the wine data of `benchmarks.real_data`,
    a tenth of that default call)."""
    global _controller, _controller_modules
    n = len(sys.modules)
    if _controller is None or n != _controller_modules:
        from threadpoolctl import ThreadpoolController

        _controller = ThreadpoolController()
        _controller_modules = len(sys.modules)
    return _controller


class _Claim:
    """A holder of a piece of process-wide state, released once (`_release`)."""

    __slots__ = ("released",)

    def __init__(self) -> None:
        self.released = False


def _release(undo: Callable[[], None], claim: _Claim) -> bool:
    """Run ``undo`` once for ``claim``, under a held Ctrl-C; return whether one came (the
    caller raises it, or notes it, once the state is whole). Python acts on a pending
    SIGINT at a function's entry, so a Ctrl-C that came while a run ended is raised at the
    start of the function that puts the state back, before anything in it runs (real
    SIGINTs left the pools at one thread about once in 30 two-iteration runs that way).
    So ``claim`` makes the undo idempotent, a KeyboardInterrupt before the hold is caught
    here and the undo tried again, and callers call this in a loop that catches one raised
    at its own entry (inline in their ``finally``: `single_blas`, `RunThreads.__exit__`,
    `rssm.minimize`)."""
    pending = False
    while not claim.released:
        try:
            with HeldInterrupt() as held:
                if not claim.released:
                    undo()
                    claim.released = True
            pending = pending or held.interrupted
        except KeyboardInterrupt:
            pending = True
    return pending


#: PyTorch's intra-op thread count before the first hold, where torch was imported (its
#: own setting: threadpoolctl's OpenMP limit did not reach it after ``MKL_NUM_THREADS=2``
#: or ``torch.set_num_threads(2)``, and `Problem.from_torch` runs gave other bits).
_torch_threads: int | None = None


def _hold_torch() -> None:
    global _torch_threads
    torch = sys.modules.get("torch")
    get = getattr(torch, "get_num_threads", None)
    if get is not None:
        _torch_threads = int(get())
        torch.set_num_threads(1)


def _restore_torch() -> None:
    global _torch_threads
    torch = sys.modules.get("torch")
    if _torch_threads is not None and torch is not None:
        if int(torch.get_num_threads()) != _torch_threads:
            torch.set_num_threads(_torch_threads)
    _torch_threads = None


def _enter_blas_locked() -> None:
    global _blas_depth, _blas_limiter
    with _BLAS_LOCK:
        if _blas_depth == 0:
            _take_control()
            _blas_limiter = _blas_controller().limit(limits=1)
            _hold_torch()
            _take_control()
        # every hold, also one that found the limit taken (a review: a run that started
        # while a threads=None run held the limit for its own start went uncounted)
        me = threading.get_ident()
        _limits_taken[me] = _limits_taken.get(me, 0) + 1
        _blas_depth += 1
        _local.blas_held = getattr(_local, "blas_held", 0) + 1


def _exit_blas_locked() -> None:
    global _blas_depth, _blas_limiter
    with _BLAS_LOCK:
        _blas_depth -= 1
        _local.blas_held = getattr(_local, "blas_held", 1) - 1
        if _blas_depth == 0 and _blas_limiter is not None:
            _take_control()
            _restore_torch()
            _blas_limiter.restore_original_limits()
            _take_control()
            _blas_limiter = None


@contextmanager
def single_blas():
    """BLAS (and the pools loaded with it) at one thread inside the block; reference-
    counted with the runs' own limit, so blocks in several Python threads neither undo each
    other's limit nor leave one behind. As a decorator (``@single_blas()``) it holds for
    each call: what a seed or the data decide outside a run (``synthetic``, ``from_data``,
    ``initial_point``, `rssm.stiefel.random_point`, the estimators' ``fit``) so does not
    depend on the machine's BLAS thread count."""
    # the try is in place before the limit is taken (in a held section), so a Ctrl-C
    # right after the hold ends cannot skip the release (it did: a real SIGINT left the
    # count at 1 and the pools at one thread)
    claim = None
    cut = False
    try:
        with HeldInterrupt() as held:
            _enter_blas_locked()
            claim = _Claim()
        if held.interrupted:
            raise KeyboardInterrupt
        yield
    finally:
        # inline, not in a function: a Ctrl-C pending at a call's entry is raised there
        while claim is not None and not claim.released:
            try:
                cut = _release(_exit_blas_locked, claim) or cut
            except KeyboardInterrupt:
                cut = True
    if cut:
        raise KeyboardInterrupt


# -- the worker pool ------------------------------------------------------------------------

_local = threading.local()


def workers() -> int:
    """Chunk workers of the run active in this Python thread (1 outside a run)."""
    return getattr(_local, "workers", 1)


class _Job:
    __slots__ = ("fn", "n", "counter", "lock", "done", "finished", "cancel", "errors",
                 "helpers_in", "idle")

    def __init__(self, fn: Callable[[int], None], n: int):
        self.fn = fn
        self.n = n
        self.counter = itertools.count()
        self.lock = threading.Lock()
        self.done = threading.Event()      # every chunk finished (or was skipped)
        self.idle = threading.Event()      # no helper thread is inside the job
        self.idle.set()
        self.finished = 0
        self.helpers_in = 0
        self.cancel = False
        self.errors: list[tuple[int, BaseException]] = []

    def work(self) -> None:
        """Claim chunk indices until none is left; run each unless the job was cancelled."""
        while True:
            i = next(self.counter)       # atomic under the GIL: each index is claimed once
            if i >= self.n:
                return
            if not self.cancel:
                try:
                    self.fn(i)
                except BaseException as exc:
                    # re-raised by the caller, whichever thread ran the chunk. (Catching
                    # `Exception` only, a SystemExit, a KeyboardInterrupt or an asyncio
                    # CancelledError raised by a user's loss on a helper thread left its
                    # chunk uncounted, and the caller waited for it for good: a user's
                    # audit.)
                    self.errors.append((i, exc))
                    self.cancel = True
            with self.lock:
                self.finished += 1
                if self.finished == self.n:
                    self.done.set()

    def help(self) -> None:
        """`work` on a helper thread, counted so that the caller can wait for it."""
        with self.lock:
            self.helpers_in += 1
            self.idle.clear()
        try:
            self.work()
        except BaseException as exc:      # a helper must never die
            self.errors.append((-1, exc))
            self.cancel = True
        finally:
            with self.lock:
                self.helpers_in -= 1
                if self.helpers_in == 0:
                    self.idle.set()


class _Pool:
    """Daemon threads that take jobs from a queue; started lazily, shared by all runs."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()

    def _ensure(self, k: int) -> None:
        with self._lock:
            while len(self._threads) < k:
                t = threading.Thread(target=self._loop, name=f"rssm-worker-{len(self._threads)}",
                                     daemon=True)
                t.start()
                self._threads.append(t)

    def _loop(self) -> None:
        while True:
            self._queue.get().help()

    def run(self, job: _Job, n_workers: int) -> None:
        helpers = min(n_workers, job.n) - 1
        try:
            # (inside the `try`: a Ctrl-C that landed after the job was queued and before
            # the `try` left helpers running it while the caller rebuilt the caches they
            # write, and `fun`, `x` and the last trace row came back wrong; a user's audit
            # put real SIGINTs there: 32 of 117 results wrong)
            if helpers > 0:
                self._ensure(helpers)
                for _ in range(helpers):
                    self._queue.put(job)
            job.work()
            job.done.wait()
        except KeyboardInterrupt:
            # Ctrl-C reaches the caller's thread only. Stop the chunks not started and let
            # those in flight on helpers finish before the caller touches their buffers (a
            # helper that takes the job later sees `cancel` and runs nothing); a second
            # Ctrl-C while it waits is held, not let out before the helpers are done.
            job.cancel = True
            with HeldInterrupt():
                while not job.idle.wait(0.05):
                    pass
            raise
        if job.errors:
            # the lowest chunk's error, a SystemExit, KeyboardInterrupt or the like first
            severe = [e for e in job.errors if not isinstance(e[1], Exception)]
            raise min(severe or job.errors, key=lambda e: e[0])[1]


_POOL = _Pool()


def _after_fork_in_child() -> None:
    """Make the process-wide state of a forked child (``os.fork``, multiprocessing's and
    joblib's "fork" start) that of a process with only the forking thread.

    A child inherits the memory of every thread but runs only the one that forked. Before
    this, a child of a parent that had run on several chunks inherited the parent's list
    of worker threads, which do not exist in it: each chunked product queued its helper
    jobs for nobody (the caller ran every chunk itself) and the queue kept them, with the
    chunk buffers they refer to (a user's audit: 7070 jobs and 416 MiB after 101 default
    calls on 9000 samples). A child forked while another thread was inside a run inherited
    that run's BLAS limit and count, which no run in the child would ever take back, so
    NumPy stayed at one thread in it for good. So the child gets a new, empty pool, new
    locks (another thread may have held one at the fork), and the count of the limits its
    own thread holds; if that is none, the pools' limits are put back as they were before
    the parent's runs took them.
    """
    global _BLAS_LOCK, _POOL, _blas_depth, _blas_limiter
    _BLAS_LOCK = threading.Lock()
    _POOL = _Pool()
    _blas_depth = getattr(_local, "blas_held", 0)
    if _blas_depth == 0 and _blas_limiter is not None:
        limiter, _blas_limiter = _blas_limiter, None
        try:
            _take_control()
            limiter.restore_original_limits()
            _take_control()
        except Exception:   # pragma: no cover - a child that cannot set them keeps them
            pass


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def parallel_for(fn: Callable[[int], None], n: int) -> None:
    """Call ``fn(i)`` for i in range(n) on the run's chunk workers; return when all are done.

    Each call must write only to memory of its own (its chunk's buffers), so the result
    cannot depend on which worker ran which chunk. With one worker (outside a run, or
    ``threads=1``/``None``) the calls run in order on the caller's thread. An exception in
    a chunk stops the chunks not yet started and is raised here once the chunks in flight
    are done (the lowest chunk's first; a `BaseException` that is no `Exception`, such as
    SystemExit or KeyboardInterrupt, before any `Exception`).

    Parameters
    ----------
    fn : callable
        ``fn(i)`` for a chunk index i; its return value is ignored.
    n : int
        The number of calls (none when n <= 0).
    """
    if n <= 0:
        return
    w = workers()
    if w <= 1 or n == 1:
        for i in range(n):
            fn(i)
        return
    _POOL.run(_Job(fn, n), w)


def _by_others() -> tuple[int, int]:
    """(the limits other Python threads took so far, the holds they have now)."""
    me = threading.get_ident()
    mine = _limits_taken.get(me, 0)
    return (sum(_limits_taken.values()) - mine,
            _blas_depth - getattr(_local, "blas_held", 0))


class RunThreads:
    """The thread setting of one run; a context manager around the solver loop.

    Parameters
    ----------
    threads : "auto", int or None
        See the module docstring.
    """

    def __init__(self, threads: str | int | None = "auto"):
        self.mode = check_threads(threads)
        if self.mode is None:
            self.workers = 1
        elif self.mode == "auto":
            self.workers = min(usable_cores(), MAX_WORKERS)
        else:
            self.workers = int(self.mode)
        self._saved: int | None = None
        self._claim: _Claim | None = None
        self._taken_at_claim: tuple[int, int] | None = None

    def claim(self) -> None:
        """Take the setting (call it in a held section: `rssm._interrupt.HeldInterrupt`,
        with the caller's ``try`` already in place, and `release` in its ``finally``, in a
        loop that catches a KeyboardInterrupt raised at the call's entry)."""
        if self.mode is not None:
            _enter_blas_locked()
        else:
            self._taken_at_claim = _by_others()
        self._saved = getattr(_local, "workers", None)
        _local.workers = self.workers
        self._claim = _Claim()

    @property
    def released(self) -> bool:
        """Whether the setting taken by `claim` is back (True before any claim)."""
        return self._claim is None or self._claim.released

    def release(self) -> bool:
        """Put the setting back, exactly once however often it is called and whatever
        Ctrl-C does; return whether a Ctrl-C came meanwhile (`_release`)."""
        return False if self._claim is None else _release(self._restore, self._claim)

    def __enter__(self) -> RunThreads:
        # Ctrl-C held until the setting is whole, then raised with it undone (a
        # KeyboardInterrupt from __enter__ skips __exit__). `rssm.minimize` does not use
        # this form: a Ctrl-C after the hold and before the with-block starts would skip
        # __exit__; it takes `claim` inside its own try instead.
        with HeldInterrupt() as held:
            self.claim()
            if held.interrupted:
                self._restore()
        if held.interrupted:
            raise KeyboardInterrupt
        return self

    def __exit__(self, *exc) -> None:
        # the setting is restored whole, and a Ctrl-C that came meanwhile raised after it
        cut = False
        while True:
            try:                      # (every call inside the try: `released` is one too)
                if self.released:
                    break
                cut = self.release() or cut
            except KeyboardInterrupt:
                cut = True
        if cut and exc[0] is None:
            raise KeyboardInterrupt

    def _restore(self) -> None:
        if self._saved is None:
            if hasattr(_local, "workers"):
                del _local.workers
        else:
            _local.workers = self._saved
        if self.mode is not None:
            _exit_blas_locked()

    def describe(self) -> str:
        """One line for `rssm.Result.threads`."""
        if self.mode is None:
            line = "unchanged pools, chunks on 1 worker (bits depend on the BLAS threads)"
            seen = self._taken_at_claim
            now = _by_others()
            if seen is not None and (seen[1] > 0 or now[1] > 0 or now[0] != seen[0]):
                # another run in this process held the pools at one thread during part
                # of this one: its BLAS threads changed under it (a user's audit: 4 tries,
                # 4 iterates, and this line said "unchanged pools" alone)
                line += ("; another rssm run in this process held them at 1 thread during "
                         "part of this run, so its bits follow that run's timing")
            return line
        how = "auto, " if self.mode == "auto" else ""
        # "up to": a run uses at most one worker per chunk of its data (a 1-chunk or
        # Dask problem uses one, or the cluster's), whatever was asked
        return (f"{how}up to {self.workers} chunk worker{'s' if self.workers > 1 else ''}, "
                "BLAS 1 thread (bits independent of the worker count)")


@contextmanager
def run_threads(threads: str | int | None = "auto"):
    """`RunThreads` as a function-style context manager; yields it.

    Parameters
    ----------
    threads : "auto", int or None
        See `RunThreads`.

    Yields
    ------
    RunThreads
        The run's thread setting, entered.
    """
    with RunThreads(threads) as rt:
        yield rt
