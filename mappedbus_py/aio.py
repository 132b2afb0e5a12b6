"""asyncio forms of the readers' waits: ``await reader.read_async()`` and
``async for rec in reader.records_async()``.

The wait registers the reader's file descriptor (``reader.fileno()``) with the event loop
(``loop.add_reader``) and ``arm()``s it: the descriptor becomes readable when a writer
wakes the bus's parked readers, or when the reader's self-look bound passes (``park``
seconds, backing off to ``park_max`` while nothing comes: records whose writer woke nobody).
Where the kernel runs FUTEX_WAIT in an io_uring (Linux 6.7+) the descriptor is that ring and
the writer's wake wakes the loop directly; elsewhere a thread of the reader's process relays
it through an eventfd (docs/waiting.md). Every ``CHECK_INTERVAL`` seconds the wait also polls
once itself (``arm(within=...)``: the descriptor fires by then, no timer of the loop's), so a
stalled writer's slot is timed out and rolled back, and a truncated or replaced file raises,
as in the blocking ``wait()``. A reader without a wake file
(``idle="busy_spin"``, or a directory it may not write) is polled with backoff from
``MIN_POLL_INTERVAL`` to ``MAX_POLL_INTERVAL``.

Any event loop can do the same with ``fileno()``, ``arm()``, ``read(0)`` and ``disarm()``:
see docs/waiting.md.
"""
import asyncio
import math
from typing import AsyncIterator, Optional, Protocol

from ._core._record import Record
from ._core._checks import check_timeout as _check_timeout


class _Reader(Protocol):
    def read(self, timeout: Optional[float] = ...) -> Optional[Record]: ...
    def fileno(self) -> int: ...
    def arm(self, within: Optional[float] = ...) -> bool: ...
    def disarm(self) -> None: ...

__all__ = ("read_async", "records_async", "CHECK_INTERVAL", "MIN_POLL_INTERVAL",
           "MAX_POLL_INTERVAL")

#: Seconds between a waiting reader's own polls (stalled slots, a truncated or replaced file).
CHECK_INTERVAL = 0.02
#: Without a wake file: seconds between polls of an idle reader, doubling to the second.
MIN_POLL_INTERVAL = 50e-6
MAX_POLL_INTERVAL = 2e-3


def _wakeup(fut: "asyncio.Future[None]") -> None:
    if not fut.done():
        fut.set_result(None)


async def read_async(reader: _Reader, timeout: Optional[float] = None) -> Optional[Record]:
    """The next record of ``reader`` (a ``MappedBusReader`` or ``RollingBusReader``), waiting
    up to ``timeout`` seconds (None or ``math.inf``: until one comes, 0: not at all); None if
    none came."""
    if timeout is not None:
        _check_timeout(timeout)
        if math.isinf(timeout):
            timeout = None
    rec = reader.read(0)
    if rec is not None or timeout == 0:
        return rec
    loop = asyncio.get_running_loop()
    deadline: Optional[float] = None if timeout is None else loop.time() + timeout
    try:
        fd = reader.fileno()
    except OSError:
        return await _poll(reader, loop, deadline)
    waiting: "list[asyncio.Future[None]]" = []

    def readable() -> None:
        # A wake, the self-look's bound or ``within``: take the readiness (the loop would
        # call us again before the task runs) and let the task look.
        reader.disarm()
        if waiting:
            _wakeup(waiting[0])

    loop.add_reader(fd, readable)
    try:
        while True:
            wait = CHECK_INTERVAL
            if deadline is not None:
                wait = min(wait, deadline - loop.time())
                if wait <= 0:
                    return None
            # The descriptor fires within ``wait`` by itself: no timer of the loop's.
            if reader.arm(wait):
                fut: "asyncio.Future[None]" = loop.create_future()
                waiting[:] = [fut]
                try:
                    await fut
                finally:
                    waiting.clear()
            rec = reader.read(0)
            if rec is not None:
                return rec
    finally:
        loop.remove_reader(fd)
        reader.disarm()


async def _poll(reader: _Reader, loop: asyncio.AbstractEventLoop,
                deadline: Optional[float]) -> Optional[Record]:
    pause = MIN_POLL_INTERVAL
    while True:
        if deadline is None:
            await asyncio.sleep(pause)
        else:
            remaining = deadline - loop.time()
            if remaining <= 0:
                return None
            await asyncio.sleep(min(pause, remaining))
        rec = reader.read(0)
        if rec is not None:
            return rec
        pause = min(pause * 2, MAX_POLL_INTERVAL)


async def records_async(reader: _Reader,
                        timeout: Optional[float] = None) -> AsyncIterator[Record]:
    """Yield records until none arrives for ``timeout`` seconds (None: never stop waiting);
    BusFullError at the end of a single-file bus, as ``records()`` raises it."""
    while True:
        rec = await read_async(reader, timeout)
        if rec is None:
            return
        yield rec
