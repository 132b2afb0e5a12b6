"""A rolling-bus client run as a separate process by tests/test_rolling_processes.py.

    write <dir> <segment_size> <record_size> <count> <writer_id> [--retain-segments n] [--go FILE]
        8-byte records (int32 writer_id, int32 i); prints "wrote <count> committed <n>"
    read <dir> <count> [--idle-exit ms] [--on-gap raise|skip] [--go FILE]
        one line per record "<position> <meta> <payload hex>", then
        "END <n> lost=<n> skipped=<n>" (or "GAP <lost_from> <lost_to> <lost>")
    bench-write <dir> <segment_size|0 for a single file> <count>    PriceUpdates, as fast as possible
    bench-read <dir> <segment_size|0> <count>                       prints "read <n> <seconds>"

With --go FILE the child prints "ready" and waits for FILE to exist (a start gate).
With MAPPEDBUS_TEST_ROLL_STALL=before-link|after-link a segment creator stops forever there.
"""
import argparse
import os
import struct
import sys
import time

from mappedbus_py import (BusGapError, MappedBusReader, MappedBusWriter, PriceUpdate,
                          RollingBusReader, RollingBusWriter)


def _gate(go):
    if go:
        print("ready", flush=True)
        while not os.path.exists(go):
            time.sleep(0.001)


def main(argv):
    p = argparse.ArgumentParser()
    p.add_argument("cmd")
    p.add_argument("path")
    p.add_argument("rest", nargs="*", type=int)
    p.add_argument("--retain-segments", type=int, default=0)
    p.add_argument("--idle-exit", type=int, default=5000)
    p.add_argument("--on-gap", default="raise")
    p.add_argument("--go")
    a = p.parse_args(argv)
    out = sys.stdout
    if a.cmd == "write":
        ss, rs, count, wid = a.rest
        rec = bytearray(8)
        committed = 0
        with RollingBusWriter(a.path, ss, rs, retain_segments=a.retain_segments) as w:
            _gate(a.go)
            for i in range(count):
                struct.pack_into("<ii", rec, 0, wid, i)
                committed += w.write(rec)
        print(f"wrote {count} committed {committed}", flush=True)
    elif a.cmd == "read":
        (count,) = a.rest
        lines, n = [], 0
        with RollingBusReader(a.path, on_gap=a.on_gap) as r:
            _gate(a.go)
            try:
                while n < count:
                    rec = r.read(timeout=a.idle_exit / 1000)
                    if rec is None:
                        break
                    lines.append(f"{rec.position} {rec.meta} {rec.data.hex()}")
                    n += 1
            except BusGapError as e:
                lines.append(f"GAP {e.lost_from} {e.lost_to} {e.lost}")
                out.write("\n".join(lines) + "\n")
                return
            lines.append(f"END {n} lost={r.lost} skipped={r.skipped}")
        out.write("\n".join(lines) + "\n")
    elif a.cmd == "bench-write":
        ss, count = a.rest
        w = (RollingBusWriter(a.path, ss, 12) if ss else
             MappedBusWriter(a.path, 12 + 20 * (count + 10), 12)).open()
        _gate(a.go)
        m = PriceUpdate(source=1, price=2, quantity=3)
        write = w.write
        t0 = time.perf_counter()
        for i in range(count):
            m.price = i
            write(m)
        t1 = time.perf_counter()
        w.close()
        print(f"wrote {count} {t1 - t0:.6f}", flush=True)
    elif a.cmd == "bench-roll":
        # Every write timed; the ones that moved to another segment are the rolls.
        ss, count = a.rest
        m = PriceUpdate(source=1, price=2, quantity=3)
        rolls, others = [], []
        clock = time.perf_counter_ns
        with RollingBusWriter(a.path, ss, 12) as w:
            for i in range(count):
                seg = w.segment
                t = clock()
                w.write(m)
                d = clock() - t
                (rolls if w.segment != seg else others).append(d)
        others.sort()
        print(f"rolls {len(rolls)} max_ns={max(rolls, default=0)} "
              f"median_ns={sorted(rolls)[len(rolls) // 2] if rolls else 0} "
              f"write_median_ns={others[len(others) // 2]} write_p999_ns="
              f"{others[int(len(others) * 0.999)]}", flush=True)
    elif a.cmd == "bench-read":
        ss, count = a.rest
        r = (RollingBusReader(a.path) if ss else
             MappedBusReader(a.path, 12 + 20 * (count + 10), 12)).open()
        _gate(a.go)
        m = PriceUpdate()
        n = 0
        read_into = r.read_into
        while not read_into(m):
            pass
        t0 = time.perf_counter()
        n = 1
        while n < count:
            if read_into(m):
                n += 1
        t1 = time.perf_counter()
        assert m.price == count - 1, m
        print(f"read {n} {t1 - t0:.6f}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
