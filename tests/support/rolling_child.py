"""A rolling-bus client run as a separate process by tests/rolling/test_rolling_processes.py.

    write <dir> <segment_size> <record_size> <count> <writer_id> [--retain-segments n] [--go FILE]
          [--batch n]
        8-byte records (int32 writer_id, int32 i); prints "wrote <count> committed <n>";
        --batch n writes them n at a time with write_batch (one fetch-and-add per batch)
    verify <dir> <segment_size> <record_size> [--timeout ms] [--idle-exit ms] [--stop-file F]
          [--on-gap raise|skip] [--start pos] [--batch n]
        reads 8-byte (writer id, i) records without printing them: "ready" once open, then
        after the end (idle for --idle-exit ms, counted from when it saw --stop-file if
        given) maybe
        "GAP <lost_from> <lost_to> <lost>" or "REPLACED", then "RATE <n> <seconds first to last
        record> <cpu seconds>" and the
        summary line, the same as the Java RollingVerify prints (see Verifier); read_batch
        takes up to --batch records a call (default 65536)
    read <dir> <count> [--idle-exit ms] [--on-gap raise|skip] [--go FILE] [--timeout ms]
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

import numpy

from mappedbus_py import (BusGapError, BusReplacedError, MappedBusReader, MappedBusWriter,
                          PriceUpdate, RecordsRolledBackError, RollingBusReader,
                          RollingBusWriter)

# The order-sensitive hash of a reader's sequence of records: h = h * HASH_P + v (mod 2^64)
# per record, v = its 8 payload bytes as a little-endian uint64 (writer id | i << 32).
HASH_P = 0x100000001B3
_MASK = (1 << 64) - 1
_CHUNK = 1 << 16
# _POWS[j] = HASH_P ** j mod 2^64; reversed, it weighs a chunk's records oldest first.
_POWS = numpy.empty(_CHUNK, dtype=numpy.uint64)
_POWS[0] = 1
for _j in range(1, _CHUNK):
    _POWS[_j] = (int(_POWS[_j - 1]) * HASH_P) & _MASK


class Verifier:
    """Counts, per-writer order and the hash of (writer id, i) records, a chunk at a time."""

    def __init__(self):
        self.n = 0
        self.hash = 0
        self.bad = 0                # a writer's i not above its previous one
        self.writers = {}           # writer id -> [count, first i, last i]

    def add(self, v):
        """``v``: uint64 array of payloads, in read order."""
        n = len(v)
        if n == 0:
            return
        s = int(numpy.sum(v * _POWS[n - 1::-1], dtype=numpy.uint64))
        self.hash = (self.hash * pow(HASH_P, n, 1 << 64) + s) & _MASK
        self.n += n
        pairs = v.view("<i4").reshape(n, 2)
        order = numpy.argsort(pairs[:, 0], kind="stable")
        wid, seq = pairs[order, 0], pairs[order, 1]
        same = wid[1:] == wid[:-1]
        self.bad += int(numpy.count_nonzero(same & (seq[1:] <= seq[:-1])))
        starts = numpy.flatnonzero(numpy.r_[True, ~same])
        ends = numpy.r_[starts[1:], n]
        for a, b in zip(starts.tolist(), ends.tolist()):
            w, first, last = int(wid[a]), int(seq[a]), int(seq[b - 1])
            st = self.writers.get(w)
            if st is None:
                self.writers[w] = [b - a, first, last]
            else:
                if first <= st[2]:
                    self.bad += 1
                st[0] += b - a
                st[2] = last

    def summary(self, skipped, lost):
        ws = ",".join(f"{w}:{c}:{f}:{l}" for w, (c, f, l) in sorted(self.writers.items()))
        return (f"VERIFY n={self.n} skipped={skipped} lost={lost} hash={self.hash:016x} "
                f"bad={self.bad} writers={ws}")


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
    p.add_argument("--batch", type=int)
    p.add_argument("--timeout", type=int, default=2000)
    p.add_argument("--stop-file")
    p.add_argument("--start", type=int)
    a = p.parse_args(argv)
    out = sys.stdout
    if a.cmd == "write":
        ss, rs, count, wid = a.rest
        rec = bytearray(8)
        committed = 0
        with RollingBusWriter(a.path, ss, rs, retain_segments=a.retain_segments) as w:
            _gate(a.go)
            if (a.batch or 1) > 1:
                rows = numpy.empty((a.batch, 2), dtype="<i4")
                rows[:, 0] = wid
                for i in range(0, count, a.batch):
                    part = rows[:min(a.batch, count - i)]
                    part[:, 1] = numpy.arange(i, i + len(part))
                    try:
                        committed += w.write_batch(part, 8)
                    except RecordsRolledBackError as e:
                        committed += e.committed
            else:
                for i in range(count):
                    struct.pack_into("<ii", rec, 0, wid, i)
                    committed += w.write(rec)
        print(f"wrote {count} committed {committed}", flush=True)
    elif a.cmd == "verify":
        verify(a)
    elif a.cmd == "read":
        (count,) = a.rest
        lines, n = [], 0
        with RollingBusReader(a.path, on_gap=a.on_gap, timeout=a.timeout / 1000) as r:
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


def verify(a):
    ss, rs = a.rest
    ver = Verifier()
    buf = numpy.empty(a.batch or _CHUNK, dtype="<u8")
    end = None
    with RollingBusReader(a.path, ss, rs, timeout=a.timeout / 1000, start=a.start,
                          on_gap=a.on_gap) as r:
        print("ready", flush=True)
        t_first = t_last = None
        idle_since = time.monotonic()
        stop_seen = a.stop_file is None
        try:
            while True:
                n = r.read_batch(buf, timeout=0.05)
                now = time.monotonic()
                if n:
                    ver.add(buf[:n])
                    t_first = now if t_first is None else t_first
                    t_last = idle_since = now
                elif (now - idle_since) * 1000 >= a.idle_exit:
                    if stop_seen:
                        break
                    if os.path.exists(a.stop_file):
                        # Idle time counts from here: a reader paused (SIGSTOP) until after
                        # the stop file appeared has not looked for records yet.
                        stop_seen, idle_since = True, now
        except BusGapError as e:
            end = f"GAP {e.lost_from} {e.lost_to} {e.lost}"
        except BusReplacedError:
            end = "REPLACED"
        if end:
            print(end)
        cpu = sum(os.times()[:2])
        print(f"RATE {ver.n} {(t_last - t_first) if t_first else 0:.6f} {cpu:.3f}")
        print(ver.summary(r.skipped, r.lost), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
