"""asyncio forms of the readers' waits: ``await reader.read_async()`` and
``async for rec in reader.records_async()``.

The wait is a task on the event loop that polls the reader without blocking (``read(0)``)
and sleeps between polls with backoff, from ``MIN_POLL_INTERVAL`` to ``MAX_POLL_INTERVAL``
seconds: a record that arrives while a reader is idle is seen within about 2 ms, and an idle
reader costs a few hundred wake-ups a second (measured: well under 1% of a core, see the
README). No thread is involved, so a cancelled wait stops at once and the reader is never
used by two threads. A blocking ``wait()`` in a worker thread was not chosen: its first
phase spins holding the GIL (the sub-microsecond wake-up the synchronous API is for), which
would stall the loop, and a thread cannot be cancelled.

No file descriptor: a bus has no kernel-visible event (a writer's commit is a plain store
into shared memory, the format Java shares has no futex or eventfd), so an fd that becomes
readable would need a thread polling the bus for it; ``read_async`` does that polling on the
loop itself. With a selector-based loop of your own, poll ``reader.next()`` from its timer.
"""
import asyncio
from typing import AsyncIterator, Optional, Protocol

from ._reader import _check_timeout
from ._record import Record


class _Reader(Protocol):
    def read(self, timeout: Optional[float] = ...) -> Optional[Record]: ...

__all__ = ("read_async", "records_async", "MIN_POLL_INTERVAL", "MAX_POLL_INTERVAL")

#: Seconds between polls of an idle reader: doubling from the first to the second.
MIN_POLL_INTERVAL = 50e-6
MAX_POLL_INTERVAL = 2e-3


async def read_async(reader: _Reader, timeout: Optional[float] = None) -> Optional[Record]:
    """The next record of ``reader`` (a ``MappedBusReader`` or ``RollingBusReader``), waiting
    up to ``timeout`` seconds (None: until one comes, 0: not at all); None if none came."""
    if timeout is not None:
        _check_timeout(timeout)
    rec = reader.read(0)
    if rec is not None or timeout == 0:
        return rec
    loop = asyncio.get_running_loop()
    deadline: Optional[float] = None if timeout is None else loop.time() + timeout
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
