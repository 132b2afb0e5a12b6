"""A bus client run as a separate process by the tests (the Python twin of Java's BusTool).

    write <path> <file_size> <record_size> <count> <writer_id>
        byte records of 8 bytes: int32 writer_id, int32 i
    read <path> <file_size> <record_size> <count> [--timeout ms] [--idle-exit ms]
        one line per record: "<position> <meta> <payload hex>", then
        "END <n> rolledBackSkipped=<n> rollbacks=<n>"
    allocate-and-hang <path> <file_size> <record_size>
        allocate one record, print "allocated <offset>", never commit
    slow-write <path> <file_size> <record_size> <sleep_ms>
        allocate, sleep, then commit and print "committed true|false"
    stream <path> <file_size> <record_size> <count> <writer_id> [--progress n] [--pause-ms t]
        the records of "write", with "committed <i>" after every n-th commit (default 100),
        pausing t ms there (default 0), and "wrote <count> committed <n>" at the end. With MAPPEDBUS_TEST_STALL_EVERY=k in
        the environment (a fault-injection hook of this test child only, not of the
        library), every k-th record is allocated but not committed: the child prints
        "stalled <i> <offset>", stops itself (SIGSTOP), and once continued commits it and
        prints "resumed <i> <offset> committed true|false".
"""
import argparse
import os
import signal
import struct
import sys
import time

from mappedbus_py import BusFullError, MappedBusReader, MappedBusWriter


def main(argv):
    p = argparse.ArgumentParser()
    p.add_argument("cmd")
    p.add_argument("path")
    p.add_argument("file_size", type=int)
    p.add_argument("record_size", type=int)
    p.add_argument("rest", nargs="*", type=int)
    p.add_argument("--timeout", type=int, default=2000)
    p.add_argument("--idle-exit", type=int, default=5000)
    p.add_argument("--progress", type=int, default=100)
    p.add_argument("--pause-ms", type=float, default=0)
    a = p.parse_args(argv)
    out = sys.stdout
    if a.cmd == "write":
        count, wid = a.rest
        rec = bytearray(8)
        committed = 0
        with MappedBusWriter(a.path, a.file_size, a.record_size) as w:
            for i in range(count):
                struct.pack_into("<ii", rec, 0, wid, i)
                committed += w.write(rec)
        print(f"wrote {count} committed {committed}", flush=True)
    elif a.cmd == "read":
        (count,) = a.rest
        n = 0
        lines = []
        with MappedBusReader(a.path, a.file_size, a.record_size, timeout=a.timeout / 1000) as r:
            try:
                while n < count:
                    rec = r.read(timeout=a.idle_exit / 1000)
                    if rec is None:
                        break
                    lines.append(f"{rec.position} {rec.meta} {rec.payload.hex()}\n")
                    n += 1
            except BusFullError:
                pass
            out.writelines(lines)
            print(f"END {n} rolledBackSkipped={r.skipped} rollbacks={r.rollbacks}", flush=True)
    elif a.cmd == "allocate-and-hang":
        with MappedBusWriter(a.path, a.file_size, a.record_size) as w:
            print(f"allocated {w._allocate_only(b'hang')}", flush=True)
            time.sleep(3600)
    elif a.cmd == "slow-write":
        (sleep_ms,) = a.rest
        with MappedBusWriter(a.path, a.file_size, a.record_size) as w:
            pos = w._allocate_only(b"slow")
            print(f"allocated {pos}", flush=True)
            time.sleep(sleep_ms / 1000)
            print(f"committed {str(w._commit_at(pos)).lower()}", flush=True)
    elif a.cmd == "stream":
        stream(a, out)
    else:
        p.error(f"unknown command {a.cmd}")


def stream(a, out):
    count, wid = a.rest
    stall_every = int(os.environ.get("MAPPEDBUS_TEST_STALL_EVERY", "0"))
    rec = bytearray(8)
    committed = 0
    with MappedBusWriter(a.path, a.file_size, a.record_size) as w:
        for i in range(count):
            struct.pack_into("<ii", rec, 0, wid, i)
            if stall_every and (i + 1) % stall_every == 0:
                pos = w._allocate_only(rec)
                print(f"stalled {i} {pos}", file=out, flush=True)
                os.kill(os.getpid(), signal.SIGSTOP)      # frozen between allocate and commit
                ok = w._commit_at(pos)
                print(f"resumed {i} {pos} committed {str(ok).lower()}", file=out, flush=True)
            else:
                ok = w.write(rec)
            committed += ok
            if ok and (i + 1) % a.progress == 0:
                print(f"committed {i}", file=out, flush=True)
                if a.pause_ms:
                    time.sleep(a.pause_ms / 1000)
    print(f"wrote {count} committed {committed}", file=out, flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
