"""Exceptions raised by mappedbus_py. Bad arguments raise plain ValueError/TypeError.

Each has a Java twin in ``io.mappedbuspy`` with the same stem (``BusGapError`` here,
``BusGapException`` there).
"""
from typing import List, Optional

__all__ = ("MappedBusError", "BusFullError", "CorruptBusError", "BusClosedError",
           "BusMismatchError", "UnsafeBusFileError", "BusLockTimeoutError",
           "BusTruncatedError", "BusReplacedError", "BusGapError", "RecordsRolledBackError",
           "ConsumerInUseError", "BusBackPressureError", "WriterStalledError",
           "TopicsFullError", "MessageTooSmallBufferError")


class MappedBusError(Exception):
    """Base class of the errors that concern a bus file."""


class BusFullError(MappedBusError, EOFError):
    """The end of the bus file was reached: a writer found no room for its record, or a
    reader has consumed every record the file can hold (Java's EOFException). Raised by
    ``write_batch``, it carries ``committed`` and ``rolled_back`` (row indices)."""

    committed: int
    rolled_back: List[int]


class CorruptBusError(MappedBusError, ValueError):
    """The file holds something no correct writer puts there: a status other than 0/1/2,
    a stored length outside 0..record_size, or a limit off the record grid (which is also
    what a wrong ``record_size`` looks like). Nothing is written in response."""


class BusClosedError(MappedBusError, ValueError):
    """An operation on a writer or reader that is closed (or was never opened)."""


class BusMismatchError(MappedBusError, ValueError):
    """The bus's metadata file records other sizes (record size, file or segment size) than
    the ones this process opened it with. Raised before anything is written."""


class UnsafeBusFileError(MappedBusError, PermissionError):
    """The path is not a file this process may trust as a bus: a symbolic link, not a
    regular file (a FIFO, a device, a directory), owned by another user, or writable by
    group or others (unless ``allow_foreign=True``)."""


class BusLockTimeoutError(MappedBusError, TimeoutError):
    """The lock that serialises opening (creating, growing) a bus file was held by another
    process for longer than the lock timeout. ``holder_pid`` names it when it can be known."""

    def __init__(self, message: str, holder_pid: Optional[int] = None) -> None:
        super().__init__(message)
        self.holder_pid = holder_pid


class BusTruncatedError(MappedBusError, OSError):
    """The bus file shrank under this process's mapping (``truncate``, ``: >``, ``cp`` over
    it): a page past its new end was touched. The mapping is dead; nothing read from it
    after the truncation is delivered."""


class BusReplacedError(MappedBusError, OSError):
    """The bus path no longer names the file this process mapped: it was removed, or
    another file was put in its place (``os.replace``, ``mv``, deleted and recreated)."""


class BusGapError(MappedBusError):
    """A rolling-bus reader needs records that no longer exist: retention removed their
    segments before it read them, or it was asked to start before the oldest retained
    record. ``lost_from``/``lost_to`` is the half-open range of positions lost, ``lost``
    the number of record slots in it."""

    def __init__(self, message: str, lost_from: int, lost_to: int, lost: int) -> None:
        super().__init__(message)
        self.lost_from = lost_from
        self.lost_to = lost_to
        self.lost = lost


class RecordsRolledBackError(MappedBusError):
    """Some rows of a ``write_batch`` were rolled back by a reader before this writer
    committed them (it took longer than the readers' timeout). ``committed`` counts the
    rows that were committed; ``rolled_back`` lists the indices of the rows that were not."""

    def __init__(self, message: str, committed: int, rolled_back: List[int]) -> None:
        super().__init__(message)
        self.committed = committed
        self.rolled_back = rolled_back


class ConsumerInUseError(MappedBusError):
    """A named consumer is held by another live reader (another process, or another reader
    of this one): one reader at a time may hold a name. ``holder_pid`` is its process."""

    def __init__(self, message: str, holder_pid: Optional[int] = None) -> None:
        super().__init__(message)
        self.holder_pid = holder_pid


class BusBackPressureError(MappedBusError, TimeoutError):
    """A rolling-bus writer waited ``consumer_block_ms`` for a consumer that lags more than
    the bus's ``max_consumer_lag`` segments (policy ``on_consumer_lag="block"``) and gave
    up; nothing was written. ``consumer`` names it, ``position`` is its committed position,
    ``lag`` its lag in segments."""

    def __init__(self, message: str, consumer: str, position: int, lag: int) -> None:
        super().__init__(message)
        self.consumer = consumer
        self.position = position
        self.lag = lag


class WriterStalledError(MappedBusError, TimeoutError):
    """A reader waited its ``stall_limit`` for a record whose writer is alive (it holds its
    slot in the bus's writers file) but has not committed it: a stopped or overloaded
    process. Nothing is rolled back: reading again waits on. ``pid`` is the writer's pid as
    it recorded it (for people: in another pid namespace it names another process there),
    ``position`` the record's position."""

    def __init__(self, message: str, pid: int, position: int) -> None:
        super().__init__(message)
        self.pid = pid
        self.position = position


class TopicsFullError(MappedBusError):
    """A framed bus's topics file holds TOPICS_MAX (255) topic names and a writer asked for a
    new one: topics name kinds of messages, not keys (docs/messages.md)."""


class MessageTooSmallBufferError(MappedBusError, ValueError):
    """``read_into(buffer)`` on a framed bus: the next message is longer than the buffer.
    Nothing was consumed: the same message is read again by the next read. ``length`` is
    the message's length in bytes."""

    def __init__(self, message: str, length: int) -> None:
        super().__init__(message)
        self.length = length
