"""asyncio: awaiting records without blocking the event loop and without a busy core."""
import asyncio
import os
import pathlib
import shutil
import threading
import uuid

import psutil
import pytest

from mappedbus_py import (BusFullError, MappedBusReader, MappedBusWriter, RollingBusReader,
                          RollingBusWriter)
from mappedbus_py.formats.layout import record_offset

SIZE = 1 << 16


@pytest.fixture
def bus_dir():
    base = pathlib.Path("/dev/shm") if os.path.isdir("/dev/shm") else pathlib.Path("/tmp")
    path = base / f"mbaio-{os.getpid()}-{uuid.uuid4().hex[:12]}"
    yield str(path)
    shutil.rmtree(path, ignore_errors=True)


def _later(seconds, fn):
    t = threading.Timer(seconds, fn)
    t.start()
    return t


async def _ticks_while(awaitable):
    """Run ``awaitable`` while a task ticks every 10 ms: how often the loop got to run."""
    ticks = 0

    async def ticker():
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1
    t = asyncio.ensure_future(ticker())
    try:
        return await awaitable, ticks
    finally:
        t.cancel()


@pytest.mark.parametrize("kind", ["single", "rolling"])
def test_read_async_waits_for_a_record_without_blocking_the_loop(bus_path, bus_dir, kind):
    if kind == "single":
        w = MappedBusWriter(bus_path, SIZE, 8).open()
        r = MappedBusReader(bus_path, SIZE, 8).open()
    else:
        w = RollingBusWriter(bus_dir, SIZE, 8).open()
        r = RollingBusReader(bus_dir).open()
    timer = _later(0.5, lambda: w.write(b"late"))
    try:
        rec, ticks = asyncio.run(_ticks_while(r.read_async()))
        assert rec.data == b"late"
        assert ticks >= 10          # the loop ran while the read waited (a blocked one: 0)
        assert asyncio.run(r.read_async(timeout=0.05)) is None
        assert asyncio.run(r.read_async(timeout=0)) is None
    finally:
        timer.join()
        w.close()
        r.close()


def test_records_async_yields_records_until_the_timeout(bus_path):
    async def collect(r):
        # 1 s: ten times the timers' gaps (0.3 s would end the stream before "c" if a loaded
        # machine ran the second timer 0.2 s late)
        return [rec.data async for rec in r.records_async(timeout=1.0)]
    with MappedBusWriter(bus_path, SIZE, 8) as w, MappedBusReader(bus_path, SIZE, 8) as r:
        w.write(b"a")
        timers = [_later(0.1, lambda: w.write(b"b")), _later(0.2, lambda: w.write(b"c"))]
        try:
            assert asyncio.run(collect(r)) == [b"a", b"b", b"c"]
        finally:
            for t in timers:
                t.join()


def test_records_async_raises_bus_full_at_the_end_like_records(bus_path):
    fsize = record_offset(1, 8)
    with MappedBusWriter(bus_path, fsize, 8) as w:
        w.write(b"only")

    async def collect(r, got):
        async for rec in r.records_async():
            got.append(rec.data)
    got = []
    with MappedBusReader(bus_path, fsize, 8) as r, pytest.raises(BusFullError):
        asyncio.run(collect(r, got))
    assert got == [b"only"]


def test_a_cancelled_read_async_stops_and_leaves_the_reader_usable(bus_path):
    async def cancel_then_read(r, w):
        t = asyncio.ensure_future(r.read_async())
        await asyncio.sleep(0.05)
        t.cancel()
        with pytest.raises(asyncio.CancelledError):
            await t
        w.write(b"next")
        return await r.read_async(timeout=5)
    with MappedBusWriter(bus_path, SIZE, 8) as w, MappedBusReader(bus_path, SIZE, 8) as r:
        assert asyncio.run(cancel_then_read(r, w)).data == b"next"


def test_an_idle_async_reader_does_not_keep_a_core_busy(bus_path):
    # A reader awaiting a record for 2 s: CPU time of this process over that time. A
    # spinning wait would cost a whole core (100%); the polling backoff costs a few %.
    proc = psutil.Process()

    async def idle(r):
        t = asyncio.ensure_future(r.read_async())
        await asyncio.sleep(0.3)          # past the first fast polls
        c0, w0 = proc.cpu_times(), asyncio.get_running_loop().time()
        await asyncio.sleep(2)
        c1, w1 = proc.cpu_times(), asyncio.get_running_loop().time()
        t.cancel()
        return (c1.user + c1.system - c0.user - c0.system) / (w1 - w0)
    MappedBusWriter(bus_path, SIZE, 8).open().close()
    with MappedBusReader(bus_path, SIZE, 8) as r:
        share = asyncio.run(idle(r))
    print(f"idle async reader: {share:.1%} of a core")
    assert share < 0.25
