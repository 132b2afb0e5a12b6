# cython: language_level=3, embedsignature=True
"""Liveness kept by the kernel, for every holder of a side file's slot (docs/design/side-files.md).

A holder takes an OFD write lock on its slot's first byte through a descriptor it opened itself;
the kernel drops it when the holder dies (before it is a zombie), and any process sharing the file
sees it, in any pid namespace. ``LiveFile`` is one such descriptor: hold, release and probe bytes of
one side file. Descriptors are closed in a child after ``fork()`` (a child keeping the inherited
description would keep a dead parent's locks alive).
"""
import enum
import os
import weakref

from ._liveness cimport live_hold, live_release, live_probe, LIVE_TAKEN, LIVE_BUSY, LIVE_DEAD, LIVE_ALIVE

__all__ = ("Liveness", "Hold", "LiveFile")


class Liveness(enum.Enum):
    """Whether a slot's holder is alive."""
    ALIVE = "alive"      #: some other open file description holds the slot's byte
    DEAD = "dead"        #: nobody does: its last holder is gone
    UNKNOWN = "unknown"  #: no answer (a file system without OFD locks, a closed descriptor)


class Hold(enum.Enum):
    """The outcome of :meth:`LiveFile.hold`."""
    TAKEN = "taken"      #: the byte is this descriptor's now (or already was)
    BUSY = "busy"        #: a live holder has it
    UNKNOWN = "unknown"  #: no answer


_open_files = weakref.WeakSet()


def _close_in_child():
    for f in list(_open_files):
        f._forget()


os.register_at_fork(after_in_child=_close_in_child)


cdef class LiveFile:
    """One open file description of a side file, for taking and probing liveness bytes.

    ``fd`` is a descriptor this object owns (opened by the caller with ``O_CLOEXEC``, for
    example through the project's safe-open rules); ``close()`` closes it, which releases every
    byte held through it.
    """
    cdef int _fd
    cdef object __weakref__

    def __cinit__(self, int fd):
        if fd < 0:
            raise ValueError(f"LiveFile needs an open descriptor, not {fd}")
        self._fd = fd
        _open_files.add(self)

    def fileno(self):
        """The descriptor, or -1 once closed."""
        return self._fd

    def hold(self, long long byte):
        """Take the liveness byte at ``byte``: Hold.TAKEN, Hold.BUSY or Hold.UNKNOWN."""
        if self._fd < 0:
            return Hold.UNKNOWN
        cdef int r = live_hold(self._fd, byte)
        return Hold.TAKEN if r == LIVE_TAKEN else Hold.BUSY if r == LIVE_BUSY else Hold.UNKNOWN

    def release(self, long long byte):
        """Give the byte back; False without an answer (closing does it too)."""
        return self._fd >= 0 and live_release(self._fd, byte) == 0

    def probe(self, long long byte):
        """Whether some other description holds the byte (through this one's own lock: DEAD)."""
        if self._fd < 0:
            return Liveness.UNKNOWN
        cdef int r = live_probe(self._fd, byte)
        return Liveness.ALIVE if r == LIVE_ALIVE else Liveness.DEAD if r == LIVE_DEAD else Liveness.UNKNOWN

    def close(self):
        """Close the descriptor: every byte held through it is released."""
        if self._fd >= 0:
            fd, self._fd = self._fd, -1
            os.close(fd)

    def _forget(self):
        # after fork(), in the child: close the inherited copy so that only the parent's
        # death decides (the parent's own descriptor keeps its locks)
        self.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __dealloc__(self):
        if self._fd >= 0:
            os.close(self._fd)
