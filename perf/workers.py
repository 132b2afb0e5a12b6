"""The Python benchmark processes; the drivers (bench_*.py) start them, one role per process.

    workers.py bus-writer  PATH FILE_SIZE RECORD_SIZE API N [SOURCE] [mem] [noprefault]
                           [rolling=SEGMENT_SIZE]
    workers.py bus-reader  PATH FILE_SIZE RECORD_SIZE API N WARMUP [mem] [noprefault] [idle=IDLE]
                           [spin=S] [rolling=SEGMENT_SIZE]
    workers.py floor       API N [PATH FILE_SIZE]
    workers.py ping-echo   PING PONG FILE_SIZE TOTAL [idle=IDLE] [spin=S]
    workers.py ping-init   PING PONG FILE_SIZE N WARMUP RTT_FILE [idle=IDLE] [spin=S]
    workers.py probe-writer KIND CHANNEL N INTERVAL_NS
    workers.py probe-reader KIND CHANNEL N WARMUP LAT_FILE [spin=S]

API is message (PriceUpdate objects, read_into), fields (write_fields / read_into), bytes
(write(bytes), next()+read_buffer) or batch (numpy rows, write_batch/read_batch). noprefault
maps the bus as a user gets it by default (page faults inside the timing); otherwise every page
is mapped at open (prefault=True). idle=IDLE (busy_spin, spin_park or park; bus-reader with the
message API, ping-echo, ping-init) opens the reader with that idle strategy and waits for each
record with the library's blocking ``wait()`` and ``read_message`` instead of polling
``read_into``: the busy path of perf/bench_wake.py, where the strategies should cost the same.
spin=S (seconds, a float) opens the bus readers with that ``spin`` (the spin_park strategy's
spin before it parks; the library's default otherwise): with idle= on the busy path, and on
probe-reader's bus readers, for perf/bench_wake.py --spin-sweep.

rolling=SEGMENT_SIZE opens a rolling bus (PATH a directory; it exists already) with the same
API instead of a single file (perf/bench_rolling.py).

floor runs the message loops of both roles in one process with each bus call replaced by a
no-op call into a C extension taking the same arguments (operator.truth for one,
perf/noop.pyx's noop3 for write_fields' three) and prints their ns per message: what the Python
loop itself costs; given a bus, also the bus writer's loop with no reader (the bus's own cost,
no cache line shared). Readers print 'ready' on stderr once open, then one JSON line on stdout
timed from message WARMUP to the last.

probe-writer and probe-reader are perf/bench_wake.py's sporadic probe: N 16-byte messages
(int64 sequence number, int64 time.monotonic_ns() read just before the send), the writer
sleeping INTERVAL_NS between them (time.sleep), over KIND: bus (CHANNEL is a bus path; the reader
waits with ``read(timeout)``), bus_async (the same, ``await read_async(timeout)``), zmq (pyzmq
PUSH -> PULL, CHANNEL an ipc:// address, blocking recv), pipe (CHANNEL a FIFO, blocking
os.read) or pipe_async (the same FIFO read by an asyncio loop: each read tries a non-blocking
os.read, else registers the read end with ``loop.add_reader``, awaits a future the callback
completes, removes the reader and reads: read_async's own shape, without the bus; asyncio's
floor for one kernel wake-up). The reader stores receive time - send time of each message
(int64 ns) in LAT_FILE and prints its process's CPU time (time.process_time_ns: every thread's
utime + stime) and the wall time from the receipt of message WARMUP to the last.
"""
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import numpy as np  # noqa: E402

from mappedbus_py import (MappedBusReader, MappedBusWriter, PriceUpdate,  # noqa: E402
                          RollingBusReader, RollingBusWriter)

BATCH = 4096


def ready():
    print("ready", file=sys.stderr, flush=True)


def proc_status():
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmHWM", "VmRSS", "RssAnon", "RssFile", "RssShmem"):
                out[k] = int(v.split()[0])
    return out


def _writer(path, file_size, record_size, prefault, rolling):
    if rolling:
        return RollingBusWriter(path, rolling, record_size, prefault=prefault)
    return MappedBusWriter(path, file_size, record_size, prefault=prefault)


def _reader(path, file_size, record_size, prefault, rolling, **idle):
    if rolling:
        return RollingBusReader(path, rolling, record_size, **idle)
    return MappedBusReader(path, file_size, record_size, prefault=prefault, **idle)


def bus_writer(path, file_size, record_size, api, n, source=1, mem=False, prefault=True,
               rolling=0):
    with _writer(path, file_size, record_size, prefault, rolling) as w:
        write = w.write
        if api == "message":
            # The message changes every time (its price), as a real feed's would.
            msg = PriceUpdate(source, 0, 7)
            for i in range(n):
                msg.price = i
                write(msg)
        elif api == "fields":
            write_fields = w.fields_writer(PriceUpdate)
            for i in range(n):
                write_fields(source, i, 7)
        elif api == "bytes":
            data = bytes(bytearray(i & 0xFF for i in range(record_size)))
            for _ in range(n):
                write(data)
        elif api == "batch":
            rows = np.zeros(BATCH, PriceUpdate.numpy_dtype())
            rows["source"] = source
            rows["quantity"] = 7
            done = 0
            while done < n:
                k = min(BATCH, n - done)
                rows["price"][:k] = np.arange(done, done + k)
                done += w.write_batch(rows[:k])
        else:
            raise SystemExit(f"unknown api {api}")
        status = proc_status() if mem else None   # while the bus is still mapped
    if mem:
        print(json.dumps(status), flush=True)


def bus_reader(path, file_size, record_size, api, n, warmup, mem=False, prefault=True, idle=None,
               spin=None, rolling=0):
    warmup = min(warmup, n - 1)
    with _reader(path, file_size, record_size, prefault, rolling,
                 **_idle_kwargs(idle, spin)) as r:
        ready()
        if idle is not None:
            if api != "message":
                raise SystemExit("idle= goes with the message API")
            # The library's blocking wait for every record (it returns at once when one is there).
            msg = PriceUpdate()
            wait, read_message = r.wait, r.read_message
            got = 0
            while got <= warmup:
                wait()
                read_message(msg)
                got += 1
            t0 = time.perf_counter()
            while got < n:
                wait()
                read_message(msg)
                got += 1
        elif api in ("message", "fields"):
            msg = PriceUpdate()
            read_into = r.read_into
            got = 0
            while got <= warmup:
                if read_into(msg):
                    got += 1
            t0 = time.perf_counter()
            while got < n:
                if read_into(msg):
                    got += 1
        elif api == "bytes":
            buf = bytearray(record_size)
            nxt, read_buffer = r.next, r.read_buffer
            got = 0
            while got <= warmup:
                if nxt():
                    read_buffer(buf)
                    got += 1
            t0 = time.perf_counter()
            while got < n:
                if nxt():
                    read_buffer(buf)
                    got += 1
        elif api == "batch":
            out = np.zeros(BATCH, PriceUpdate.numpy_dtype())
            got = 0
            while got <= warmup:
                got += r.read_batch(out[:min(BATCH, warmup + 1 - got)])
            t0 = time.perf_counter()
            while got < n:
                got += r.read_batch(out)
        else:
            raise SystemExit(f"unknown api {api}")
        dt = time.perf_counter() - t0
        timed = n - warmup - 1
        res = {"messages": n, "timed": timed, "seconds": dt, "msgs_per_s": timed / dt,
               "ns_per_msg": dt / timed * 1e9, "skipped": r.skipped}
        if api in ("message", "fields") and record_size == 12:
            res["last_price"] = msg.price
        if mem:
            res.update(proc_status())   # while the bus is still mapped
    print(json.dumps(res), flush=True)


def ping_echo(ping, pong, file_size, total, idle=None, spin=None):
    with MappedBusReader(ping, file_size, 12, prefault=True, **_idle_kwargs(idle, spin)) as r, \
            MappedBusWriter(pong, file_size, 12, prefault=True) as w:
        ready()
        msg = PriceUpdate()
        read_into, write = r.read_into, w.write
        if idle is not None:
            wait, read_message = r.wait, r.read_message
            for _ in range(total):
                wait()
                write(read_message(msg))
            return
        for _ in range(total):
            while not read_into(msg):
                pass
            write(msg)


def _idle_kwargs(idle, spin=None):
    # No idle=: the reader as the other benchmarks open it (its default strategy, never waiting).
    # No spin=: the library's default spin.
    kw = {} if idle is None else {"idle": idle}
    if spin is not None:
        kw["spin"] = spin
    return kw


def ping_init(ping, pong, file_size, n, warmup, rtt_file, idle=None, spin=None):
    rtt = np.zeros(n, np.int64)
    with MappedBusWriter(ping, file_size, 12, prefault=True) as w, \
            MappedBusReader(pong, file_size, 12, prefault=True, **_idle_kwargs(idle, spin)) as r:
        out, back = PriceUpdate(1, 0, 0), PriceUpdate()
        write, read_into, now = w.write, r.read_into, time.perf_counter_ns
        wait, read_message = r.wait, r.read_message
        # Collected in a list (cheap append), copied to the array after the loop.
        times = []
        append = times.append
        if idle is not None:
            for i in range(warmup):
                out.price = i
                write(out)
                wait()
                read_message(back)
            for i in range(n):
                out.price = i
                t0 = now()
                write(out)
                wait()
                read_message(back)
                append(now() - t0)
        else:
            for i in range(warmup):
                out.price = i
                write(out)
                while not read_into(back):
                    pass
            for i in range(n):
                out.price = i
                t0 = now()
                write(out)
                while not read_into(back):
                    pass
                append(now() - t0)
        if back.price != n - 1:
            raise SystemExit(f"echo mismatch: {back.price} != {n - 1}")
    rtt[:] = times
    rtt.tofile(rtt_file)
    s = np.sort(rtt)
    print(json.dumps({"round_trips": n, "p50_ns": int(s[n // 2]), "max_ns": int(s[-1])}))


PROBE_SIZE = 16          # the probe's message: int64 sequence number, int64 send time (ns)
PROBE_TIMEOUT = 30.0     # seconds a probe reader waits for one message before it gives up


def probe_writer(kind, chan, n, interval_ns):
    """The sporadic probe's writer (see the module docstring)."""
    import struct
    pack_into, now, sleep = struct.Struct("<qq").pack_into, time.monotonic_ns, time.sleep
    interval = interval_ns / 1e9
    buf = bytearray(PROBE_SIZE)
    if kind in ("bus", "bus_async"):
        with MappedBusWriter(chan) as w:
            write = w.write
            for i in range(n):
                pack_into(buf, 0, i, now())
                write(buf)
                sleep(interval)
    elif kind == "zmq":
        import zmq
        ctx = zmq.Context()
        sock = ctx.socket(zmq.PUSH)
        sock.connect(chan)
        send = sock.send
        for i in range(n):
            pack_into(buf, 0, i, now())
            send(buf)
            sleep(interval)
        sock.close(linger=-1)      # until every message is handed over
        ctx.term()
    elif kind in ("pipe", "pipe_async"):
        fd = os.open(chan, os.O_WRONLY)
        write = os.write
        try:
            for i in range(n):
                pack_into(buf, 0, i, now())
                write(fd, buf)
                sleep(interval)
        finally:
            os.close(fd)
    else:
        raise SystemExit(f"unknown probe kind {kind}")


def probe_reader(kind, chan, n, warmup, lat_file, spin=None):
    """The sporadic probe's reader: waits for each message as a user of KIND would."""
    import struct
    unpack_from, now, cpu = struct.Struct("<qq").unpack_from, time.monotonic_ns, time.process_time_ns
    lat = np.zeros(n, np.int64)
    mark = {}

    def got(i, payload, t):
        seq, sent = unpack_from(payload)
        if seq != i:
            raise SystemExit(f"{kind}: message {seq} where {i} was due")
        lat[i] = t - sent
        if i == warmup:
            mark["cpu0"], mark["wall0"] = cpu(), t
        mark["wall1"] = t

    if kind == "bus":
        with MappedBusReader(chan, **_idle_kwargs(None, spin)) as r:
            ready()
            read = r.read
            for i in range(n):
                rec = read(PROBE_TIMEOUT)
                t = now()
                if rec is None:
                    raise SystemExit(f"bus: no message {i} within {PROBE_TIMEOUT} s")
                got(i, rec.payload, t)
            mark["cpu1"] = cpu()
    elif kind == "bus_async":
        import asyncio

        async def run(r):
            for i in range(n):
                rec = await r.read_async(PROBE_TIMEOUT)
                t = now()
                if rec is None:
                    raise SystemExit(f"bus_async: no message {i} within {PROBE_TIMEOUT} s")
                got(i, rec.payload, t)
            mark["cpu1"] = cpu()
        with MappedBusReader(chan, **_idle_kwargs(None, spin)) as r:
            ready()
            asyncio.run(run(r))
    elif kind == "zmq":
        import zmq
        ctx = zmq.Context()
        sock = ctx.socket(zmq.PULL)
        sock.bind(chan)
        sock.setsockopt(zmq.RCVTIMEO, int(PROBE_TIMEOUT * 1000))
        ready()
        recv = sock.recv
        for i in range(n):
            data = recv()
            got(i, data, now())
        mark["cpu1"] = cpu()
        sock.close(linger=0)
        ctx.term()
    elif kind == "pipe":
        ready()
        fd = os.open(chan, os.O_RDONLY)      # returns once the writer has opened its end
        read = os.read
        for i in range(n):
            data = read(fd, PROBE_SIZE)
            t = now()
            if len(data) != PROBE_SIZE:
                raise SystemExit(f"pipe: {len(data)} bytes for message {i}")
            got(i, data, t)
        mark["cpu1"] = cpu()
        os.close(fd)
    elif kind == "pipe_async":
        import asyncio
        ready()
        fd = os.open(chan, os.O_RDONLY)      # blocking open: returns once the writer has its end
        os.set_blocking(fd, False)

        def wakeup(fut):
            if not fut.done():
                fut.set_result(None)

        async def run():
            loop = asyncio.get_running_loop()
            read = os.read

            async def read_async():
                # read_async's shape: look first; else register, await the loop's callback,
                # unregister, read.
                try:
                    return read(fd, PROBE_SIZE)
                except BlockingIOError:
                    pass
                fut = loop.create_future()
                loop.add_reader(fd, wakeup, fut)
                try:
                    await fut
                finally:
                    loop.remove_reader(fd)
                return read(fd, PROBE_SIZE)

            for i in range(n):
                data = await read_async()
                t = now()
                if len(data) != PROBE_SIZE:
                    raise SystemExit(f"pipe_async: {len(data)} bytes for message {i}")
                got(i, data, t)
            mark["cpu1"] = cpu()
        try:
            asyncio.run(run())
        finally:
            os.close(fd)
    else:
        raise SystemExit(f"unknown probe kind {kind}")
    lat.tofile(lat_file)
    print(json.dumps({"messages": n, "warmup": warmup, "cpu_ns": mark["cpu1"] - mark["cpu0"],
                      "wall_ns": mark["wall1"] - mark["wall0"]}), flush=True)


def floor(api, n, path=None, file_size=None):
    """The writer's and the reader's message loops with the bus calls replaced by a C no-op;
    with ``path``, also the writer's loop writing to that bus with no reader: the bus's own
    cost without a reader sharing its cache lines."""
    from operator import truth as noop      # a C function taking one object, returning True
    msg = PriceUpdate(1, 0, 7)
    writer_s = _writer_loop(api, n, msg, noop, _noop3() if api == "fields" else None)
    t1 = time.perf_counter()
    got = 0
    while got < n:
        if noop(msg):
            got += 1
    res = {"writer_ns_per_msg": writer_s / n * 1e9,
           "reader_ns_per_msg": (time.perf_counter() - t1) / n * 1e9}
    if path:
        with MappedBusWriter(path, file_size, 12, prefault=True) as w:
            alone_s = _writer_loop(api, n, msg, w.write, w.fields_writer(PriceUpdate))
        res["writer_alone_ns_per_msg"] = alone_s / n * 1e9
    print(json.dumps(res), flush=True)


def _writer_loop(api, n, msg, one, three):
    """The writer's message loop, its bus call ``one(msg)`` (message objects) or ``three(1, i,
    7)`` (write_fields); the seconds it took. The floor and the writer alone run this same loop."""
    t0 = time.perf_counter()
    if api == "fields":
        for i in range(n):
            three(1, i, 7)
    else:
        for i in range(n):
            msg.price = i
            one(msg)
    return time.perf_counter() - t0


def _noop3():
    # A C function taking three arguments as write_fields does (passing them is the loop's
    # cost, not the bus's).
    return _perf_pyx("noop").noop3


def _perf_pyx(name):
    """perf/NAME.pyx, compiled once (build/perf-pyx) with the package's Cython and its
    _atomic.h on the include path."""
    import importlib
    import pyximport
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    pyximport.install(build_dir=os.path.join(root, "build", "perf-pyx"), language_level=3,
                      setup_args={"include_dirs": [os.path.join(root, "mappedbus_py", "_core"),
                                                   np.get_include()]})
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    return importlib.import_module(name)


def main(argv):
    role, a = argv[0], argv[1:]
    flags = {x for x in a if x in ("mem", "noprefault")}
    idle = [x.partition("=")[2] for x in a if x.startswith("idle=")]
    spin = [float(x.partition("=")[2]) for x in a if x.startswith("spin=")]
    rolling = [int(x.partition("=")[2]) for x in a if x.startswith("rolling=")]
    a = [x for x in a if x not in flags and not x.startswith(("idle=", "spin=", "rolling="))]
    opts = dict(mem="mem" in flags, prefault="noprefault" not in flags,
                rolling=rolling[-1] if rolling else 0)
    idle = idle[-1] if idle else None
    spin = spin[-1] if spin else None
    if role == "bus-writer":
        bus_writer(a[0], int(a[1]), int(a[2]), a[3], int(a[4]), int(a[5]) if len(a) > 5 else 1,
                   **opts)
    elif role == "bus-reader":
        bus_reader(a[0], int(a[1]), int(a[2]), a[3], int(a[4]), int(a[5]), **opts, idle=idle,
                   spin=spin)
    elif role == "floor":
        floor(a[0], int(a[1]), *(a[2:3] + [int(x) for x in a[3:4]]))
    elif role == "ping-echo":
        ping_echo(a[0], a[1], int(a[2]), int(a[3]), idle, spin)
    elif role == "ping-init":
        ping_init(a[0], a[1], int(a[2]), int(a[3]), int(a[4]), a[5], idle, spin)
    elif role == "probe-writer":
        probe_writer(a[0], a[1], int(a[2]), int(a[3]))
    elif role == "probe-reader":
        probe_reader(a[0], a[1], int(a[2]), int(a[3]), a[4], spin)
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
