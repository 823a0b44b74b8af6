"""A temporary file for per-sample state (``cache="disk"``), removed from the folder at once.

The file is unlinked as soon as it is open (POSIX): its blocks belong to the open
descriptor alone, so the kernel frees them when the process ends for any reason (normal
exit, an exception, SIGTERM, SIGHUP, ``kill -9``, a crash) and nothing is left behind in
the cache folder. Windows cannot unlink an open file; there it is deleted when the oracle
is closed or garbage-collected, or at interpreter exit.
"""

from __future__ import annotations

import errno
import os
import tempfile
import weakref

import numpy as np

from rssm._interrupt import HeldInterrupt

__all__ = ["StateFile"]


class StateFile:
    """Positional reads and writes of float64/bool arrays in an anonymous temporary file.

    ``read`` and ``write`` use ``pread``/``pwrite`` at absolute offsets, so chunks held by
    different threads never disturb each other.

    Parameters
    ----------
    directory : str, optional
        Folder of the file (default: the system's temporary folder).
    """

    def __init__(self, directory: str | None = None):
        self.size = 0
        self.unlinked = False
        # Ctrl-C is held from the file's creation until its finalizer owns it (one between
        # mkstemp and the unlink left a named file in the folder and its descriptor open:
        # 16 of 400 interrupted runs), then raised
        with HeldInterrupt() as held:
            fd, path = tempfile.mkstemp(prefix="rssm-cache-", suffix=".bin", dir=directory)
            self.fd = fd
            self.path = path   # the name it had, for messages
            if os.name != "nt":
                os.unlink(path)
                self.unlinked = True
            self._fin = weakref.finalize(self, StateFile._remove, fd,
                                         None if self.unlinked else path)
        if held.interrupted:
            self.close()
            raise KeyboardInterrupt

    @staticmethod
    def _remove(fd: int, path: str | None) -> bool:
        # held: a Ctrl-C here skipped the close; it is returned, and `close` raises it
        # (from the garbage collector a finalizer's exception is only printed, so there
        # the interrupt is lost either way; the descriptor is not)
        with HeldInterrupt() as held:
            try:
                os.close(fd)
            finally:
                if path is not None and os.path.exists(path):
                    os.unlink(path)
        return held.interrupted

    def close(self) -> None:
        """Close (and, where it still has a name, delete) the file; a Ctrl-C that came
        while it closed is raised once it is closed."""
        if self._fin():
            raise KeyboardInterrupt

    def reserve(self, nbytes: int) -> int:
        """Reserve ``nbytes`` at the end of the file (see `allocate`); return their offset.

        Parameters
        ----------
        nbytes : int
            The number of bytes to reserve.

        Returns
        -------
        int
            The byte offset of the reserved range.
        """
        off = self.size
        self.size += int(nbytes)
        return off

    def allocate(self) -> None:
        """Give the file its reserved size, with its disk blocks where the system can
        (``posix_fallocate``): a disk too small fails here, before a run, not in the
        middle of one. Raises OSError."""
        if hasattr(os, "posix_fallocate"):
            try:
                os.posix_fallocate(self.fd, 0, max(1, self.size))
                return
            except OSError as exc:
                # file systems without fallocate: a sparse file instead
                if exc.errno not in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):
                    raise
        os.ftruncate(self.fd, self.size)

    def write(self, arr: np.ndarray, off: int) -> None:
        """Write the C-contiguous array ``arr`` at ``off``.

        Parameters
        ----------
        arr : numpy.ndarray
            The array, C-contiguous (its bytes are written as they are).
        off : int
            The byte offset in the file (from `reserve`).
        """
        mv = memoryview(arr).cast("B")
        done = 0
        while done < len(mv):
            done += os.pwrite(self.fd, mv[done:], off + done)

    def read(self, out: np.ndarray, off: int) -> None:
        """Fill the C-contiguous array ``out`` from ``off``.

        Parameters
        ----------
        out : numpy.ndarray
            The array to fill, C-contiguous; as many bytes as it holds are read.
        off : int
            The byte offset in the file (from `reserve`).

        Raises
        ------
        OSError
            When the file ends before ``out`` is full.
        """
        mv = memoryview(out).cast("B")
        done = 0
        while done < len(mv):
            got = os.preadv(self.fd, [mv[done:]], off + done)
            if got <= 0:
                raise OSError(f"short read from the cache file {self.path}")
            done += got
