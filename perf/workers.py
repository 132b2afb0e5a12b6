"""The Python benchmark processes; the drivers (bench_*.py) start them, one role per process.

    workers.py bus-writer  PATH FILE_SIZE RECORD_SIZE API N [SOURCE] [mem] [noprefault]
    workers.py bus-reader  PATH FILE_SIZE RECORD_SIZE API N WARMUP [mem] [noprefault]
    workers.py floor       API N [PATH FILE_SIZE]
    workers.py ping-echo   PING PONG FILE_SIZE TOTAL
    workers.py ping-init   PING PONG FILE_SIZE N WARMUP RTT_FILE

API is message (PriceUpdate objects, read_into), fields (write_fields / read_into), bytes
(write(bytes), next()+read_buffer) or batch (numpy rows, write_batch/read_batch). noprefault
maps the bus as a user gets it by default (page faults inside the timing); otherwise every page
is mapped at open (prefault=True). floor runs the message loops of both roles in one process
with each bus call replaced by a no-op call into a C extension taking the same arguments
(operator.truth for one, perf/noop.pyx's noop3 for write_fields' three) and prints their ns per
message: what the Python loop itself costs; given a bus, also the bus writer's loop with no
reader (the bus's own cost, no cache line shared). Readers print 'ready' on stderr once open, then
one JSON line on stdout timed from message WARMUP to the last.
"""
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import numpy as np  # noqa: E402

from mappedbus_py import MappedBusReader, MappedBusWriter, PriceUpdate  # noqa: E402

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


def bus_writer(path, file_size, record_size, api, n, source=1, mem=False, prefault=True):
    with MappedBusWriter(path, file_size, record_size, prefault=prefault) as w:
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


def bus_reader(path, file_size, record_size, api, n, warmup, mem=False, prefault=True):
    warmup = min(warmup, n - 1)
    with MappedBusReader(path, file_size, record_size, prefault=prefault) as r:
        ready()
        if api in ("message", "fields"):
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


def ping_echo(ping, pong, file_size, total):
    with MappedBusReader(ping, file_size, 12, prefault=True) as r, \
            MappedBusWriter(pong, file_size, 12, prefault=True) as w:
        ready()
        msg = PriceUpdate()
        read_into, write = r.read_into, w.write
        for _ in range(total):
            while not read_into(msg):
                pass
            write(msg)


def ping_init(ping, pong, file_size, n, warmup, rtt_file):
    rtt = np.zeros(n, np.int64)
    with MappedBusWriter(ping, file_size, 12, prefault=True) as w, \
            MappedBusReader(pong, file_size, 12, prefault=True) as r:
        out, back = PriceUpdate(1, 0, 0), PriceUpdate()
        write, read_into, now = w.write, r.read_into, time.perf_counter_ns
        for i in range(warmup):
            out.price = i
            write(out)
            while not read_into(back):
                pass
        # Collected in a list (cheap append), copied to the array after the loop.
        times = []
        append = times.append
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
                      setup_args={"include_dirs": [os.path.join(root, "mappedbus_py"),
                                                   np.get_include()]})
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    return importlib.import_module(name)


def main(argv):
    role, a = argv[0], argv[1:]
    flags = {x for x in a if x in ("mem", "noprefault")}
    a = [x for x in a if x not in flags]
    opts = dict(mem="mem" in flags, prefault="noprefault" not in flags)
    if role == "bus-writer":
        bus_writer(a[0], int(a[1]), int(a[2]), a[3], int(a[4]), int(a[5]) if len(a) > 5 else 1,
                   **opts)
    elif role == "bus-reader":
        bus_reader(a[0], int(a[1]), int(a[2]), a[3], int(a[4]), int(a[5]), **opts)
    elif role == "floor":
        floor(a[0], int(a[1]), *(a[2:3] + [int(x) for x in a[3:4]]))
    elif role == "ping-echo":
        ping_echo(a[0], a[1], int(a[2]), int(a[3]))
    elif role == "ping-init":
        ping_init(a[0], a[1], int(a[2]), int(a[3]), int(a[4]), a[5])
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
