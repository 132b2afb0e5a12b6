"""A reader's fileno() in event loops (issue 33): readable only when a record may be there or
the self-look's bound passed, that bound honoured for writers that wake nobody, and selector
readers that do not starve asyncio readers. Each test runs with both kinds of descriptor: the
io_uring (where the kernel has FUTEX_WAIT in one) and the relay thread's eventfd (the fallback).

Timing bounds are loose (a shared 2-core machine); latency figures are perf/'s job
(perf/bench_asyncio.py, perf/bench_wake.py).
"""
import asyncio
import os
import selectors
import statistics
import struct
import threading
import time

import pytest

from mappedbus_py import MappedBusReader, MappedBusWriter
from mappedbus_py._core._wake import WakeFile
from mappedbus_py._core._wakefd import KIND_ENV, WakeFd, WakeFdKind

SIZE = 1 << 20


def _ring_available(tmp_path):
    w = WakeFile(str(tmp_path / "probe.wake"))
    try:
        fd = WakeFd(w, 1_000_000, 1_000_000, WakeFdKind.RING)
        try:
            return fd.kind is WakeFdKind.RING
        finally:
            fd.close()
    finally:
        w.close()


@pytest.fixture(params=["ring", "thread"])
def kind(request, monkeypatch, tmp_path):
    """The descriptor's kind, chosen through MAPPEDBUS_PY_WAKEFD (read when one is made)."""
    if request.param == "ring" and not _ring_available(tmp_path):
        pytest.skip("no io_uring FUTEX_WAIT here (Linux < 6.7, or io_uring disabled)")
    monkeypatch.setenv(KIND_ENV, request.param)
    return request.param


def _fd_is(fd, kind):
    target = os.readlink(f"/proc/self/fd/{fd}")
    return ("io_uring" in target) if kind == "ring" else ("eventfd" in target)


def stamp():
    return struct.pack("<q", time.monotonic_ns())


def _select_loop(r, seconds, records):
    """The README's loop for ``seconds``: read, else arm and select. How often select()
    returned, and the records read go to ``records``."""
    sel = selectors.DefaultSelector()
    sel.register(r.fileno(), selectors.EVENT_READ)
    returns = 0
    end = time.monotonic() + seconds
    try:
        while time.monotonic() < end:
            rec = r.read(0)
            if rec is not None:
                records.append(rec.data)
                continue
            if r.arm():
                sel.select(timeout=max(0.0, end - time.monotonic()))
                returns += 1
    finally:
        r.disarm()
        sel.close()
    return returns


def test_the_descriptor_is_the_kind_asked_for(bus_path, kind):
    with MappedBusWriter(bus_path, SIZE, 8), MappedBusReader(bus_path, SIZE, 8) as r:
        assert _fd_is(r.fileno(), kind)


def test_a_bad_kind_in_the_environment_is_a_clear_error(bus_path, monkeypatch):
    monkeypatch.setenv(KIND_ENV, "spin")
    with MappedBusWriter(bus_path, SIZE, 8), MappedBusReader(bus_path, SIZE, 8) as r:
        with pytest.raises(ValueError, match=KIND_ENV):
            r.fileno()


def test_after_arm_a_quiet_bus_does_not_keep_the_descriptor_readable(bus_path, kind):
    # Before the fix the first wake left the descriptor readable for good: select() returned
    # at once forever (hundreds of thousands of times in these 300 ms). Now it returns for a
    # record or once a self-look bound (50 ms here): about 6 times.
    with MappedBusWriter(bus_path, SIZE, 8) as w, \
            MappedBusReader(bus_path, SIZE, 8, park=0.05, park_max=0.05) as r:
        got = []
        threading.Timer(0.05, lambda: w.write(b"first")).start()
        _select_loop(r, 0.2, got)                     # the first wake, then quiet
        assert got == [b"first"]
        returns = _select_loop(r, 0.3, got)
        assert got == [b"first"]
        print(f"select() returned {returns} times in 300 ms of a quiet bus")
        assert returns <= 20


def test_arm_clears_a_readiness_the_caller_never_consumed(bus_path, kind):
    with MappedBusWriter(bus_path, SIZE, 8) as w, \
            MappedBusReader(bus_path, SIZE, 8, park=2.0, park_max=2.0) as r:
        sel = selectors.DefaultSelector()
        sel.register(r.fileno(), selectors.EVENT_READ)
        assert r.arm()
        w.write(b"one")
        assert sel.select(5) != []                    # readable, never drained by us
        assert r.read(0).data == b"one"
        assert r.arm()                                # nothing there: armed again
        assert sel.select(0.2) == []                  # and not readable until a record
        w.write(b"two")
        assert sel.select(5) != []
        assert r.read(0).data == b"two"
        r.disarm()
        assert sel.select(0) == []                    # disarm clears it too
        sel.close()


def test_a_writer_that_wakes_nobody_reaches_a_selector_reader_within_the_self_look_bound(
        bus_path, kind):
    # wake=False stands for the Java original and a writer whose wake file is unusable. The
    # documented bound is park_max (16 ms by default, 1 ms once such records keep coming).
    # Before the fix the relay thread slept 100 ms before it saw an arm: p50 43 ms.
    with MappedBusWriter(bus_path, SIZE, 8, wake=False) as w, \
            MappedBusReader(bus_path, SIZE, 8) as r:
        sel = selectors.DefaultSelector()
        sel.register(r.fileno(), selectors.EVENT_READ)
        late, returns = [], 0
        try:
            for i in range(12):
                gap = 0.03 + 0.011 * i                 # not in step with any bound
                t = threading.Timer(gap, lambda: w.write(stamp()))
                t.start()
                while (rec := r.read(0)) is None:
                    if r.arm():
                        sel.select(timeout=5)
                        returns += 1
                late.append((time.monotonic_ns() - struct.unpack("<q", rec.data)[0]) / 1e9)
                t.join()
        finally:
            r.disarm()
            sel.close()
        print("arrivals (ms):", [round(x * 1e3, 1) for x in late], "select returns:", returns)
        assert statistics.median(late) < 0.016 + 0.014
        assert max(late) < 0.016 + 0.2              # generous: a loaded machine
        # ~1.1 s of waiting, looked at every 1 ms at most (a spinning loop: ~100,000 times)
        assert returns < 4000


def test_the_bound_holds_after_the_descriptor_sat_unarmed_for_long(bus_path, kind):
    # The relay thread sleeps until arm() once nobody armed it for a second: arm() must wake it.
    with MappedBusWriter(bus_path, SIZE, 8, wake=False) as w, \
            MappedBusReader(bus_path, SIZE, 8) as r:
        sel = selectors.DefaultSelector()
        sel.register(r.fileno(), selectors.EVENT_READ)
        time.sleep(1.3)
        t = threading.Timer(0.05, lambda: w.write(stamp()))
        t.start()
        try:
            while (rec := r.read(0)) is None:
                if r.arm():
                    sel.select(timeout=5)
        finally:
            t.join()
            r.disarm()
            sel.close()
        late = (time.monotonic_ns() - struct.unpack("<q", rec.data)[0]) / 1e9
        assert late < 0.016 + 0.2


def test_a_writer_that_wakes_nobody_reaches_an_asyncio_reader_within_the_self_look_bound(
        bus_path, kind):
    async def await_records(r, w):
        late = []
        for i in range(12):
            t = threading.Timer(0.03 + 0.011 * i, lambda: w.write(stamp()))
            t.start()
            rec = await r.read_async(5)
            late.append((time.monotonic_ns() - struct.unpack("<q", rec.data)[0]) / 1e9)
            t.join()
        return late
    with MappedBusWriter(bus_path, SIZE, 8, wake=False) as w, \
            MappedBusReader(bus_path, SIZE, 8) as r:
        late = asyncio.run(await_records(r, w))
    print("arrivals (ms):", [round(x * 1e3, 1) for x in late])
    assert statistics.median(late) < 0.016 + 0.014
    assert max(late) < 0.016 + 0.2


def test_asyncio_readers_are_not_delayed_by_selector_readers_in_the_same_process(bus_path,
                                                                                  kind):
    # Two threads run the README's selectors loop on a quiet bus while an asyncio reader in
    # the main thread awaits records of a busy one. Before the fix the selector loops spun
    # (select() at once, forever) and delayed the asyncio reader by up to 915 ms.
    quiet = bus_path + "-quiet"
    returns = []
    stop_at = time.monotonic() + 1.5
    with MappedBusWriter(quiet, SIZE, 8) as qw, MappedBusWriter(bus_path, SIZE, 8) as w:
        qw.write(b"wake")                            # the first wake, then quiet

        def selector_reader():
            with MappedBusReader(quiet, SIZE, 8, park=0.05, park_max=0.05) as qr:
                returns.append(_select_loop(qr, stop_at - time.monotonic(), []))
        threads = [threading.Thread(target=selector_reader) for _ in range(2)]
        for t in threads:
            t.start()

        async def await_records(r):
            late = []
            for _ in range(10):
                await asyncio.sleep(0.05)
                t = threading.Timer(0.03, lambda: w.write(stamp()))
                t.start()
                rec = await r.read_async(5)
                t.join()
                late.append((time.monotonic_ns() - struct.unpack("<q", rec.data)[0]) / 1e9)
            return late
        try:
            with MappedBusReader(bus_path, SIZE, 8, start="end") as r:
                late = asyncio.run(await_records(r))
        finally:
            for t in threads:
                t.join()
    print("asyncio arrivals (ms):", [round(x * 1e3, 1) for x in late], "select returns:",
          returns)
    assert max(late) < 0.25
    assert all(n <= 60 for n in returns)             # spinning: hundreds of thousands


def test_a_forced_thread_descriptor_and_a_ring_one_deliver_the_same_records(bus_path, kind):
    async def collect(r):
        # The ten records, however late a loaded machine runs the writer (an idle timeout of
        # 0.3 s would end the stream early if the writer's thread were held up that long).
        got = []
        async for rec in r.records_async(timeout=30):
            got.append(rec.data)
            if len(got) == 10:
                break
        return got
    with MappedBusWriter(bus_path, SIZE, 8) as w, MappedBusReader(bus_path, SIZE, 8) as r:
        def write_spaced():       # one thread: ten timers could fire out of order under load
            for i in range(10):
                time.sleep(0.02)
                w.write(b"%d" % i)
        writer = threading.Thread(target=write_spaced)
        writer.start()
        try:
            assert asyncio.run(collect(r)) == [b"%d" % i for i in range(10)]
        finally:
            writer.join()
        assert r.read(0) is None                          # nothing more, nothing twice
        assert _fd_is(r.fileno(), kind)
