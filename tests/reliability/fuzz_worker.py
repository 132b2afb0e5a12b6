"""One batch of the corrupt-file fuzz campaign, run as its own process by test_fuzz.py so that
a segfault shows as a dead child (a signal in its exit status), never a dead pytest.

    python fuzz_worker.py <dir> <examples> <seed> [--java-every k]

Hypothesis generates bus files (random bytes, or valid buses written by the real writer
and then mutated: limits negative/huge/off the grid, random statuses and stored lengths,
random bytes, truncation) and opens them with random parameters (a wrong record_size or
file_size, read_only both ways, timeout 0, any start), then drives the Cython reader
through every read call, and the CLI dump over the same file. The only exceptions allowed
out are the library's own (CorruptBusError, BusFullError, BusClosedError), ValueError and
OSError; any other fails the batch with hypothesis's falsifying example. Every case runs
under a 20 s alarm (faulthandler exits the process with a traceback: a hang). With
--java-every k, every k-th file is kept and listed in <dir>/java-cases.txt for the Java
reader (FuzzReader). The last line printed is a JSON summary of the outcomes.
"""
import contextlib
import faulthandler
import io
import json
import os
import shutil
import struct
import sys
import warnings
from collections import Counter

import numpy as np
from hypothesis import HealthCheck, Phase, given, seed, settings, strategies as st

from mappedbus_py import (BusFullError, CorruptBusError, MappedBusReader, MappedBusWriter,
                          PriceUpdate, Trade)
from mappedbus_py.tools.cli import main as cli_main

ALLOWED = (CorruptBusError, BusFullError, ValueError, OSError)
CASE_SECONDS = 20

record_sizes = st.one_of(st.sampled_from([1, 3, 4, 7, 8, 10, 12, 16, 20, 33]),
                         st.integers(1, 300))
int64s = st.one_of(st.sampled_from([0, 8, -8, -1, 2**62, 2**63 - 1, -2**63, 2**31, 4096]),
                   st.integers(-2**63, 2**63 - 1), st.integers(-100, 100_000))
int32s = st.one_of(st.sampled_from([0, 1, 2, 3, -1, 255, 256, 2**31 - 1, -2**31]),
                   st.integers(-2**31, 2**31 - 1), st.integers(-4, 300))

mutation = st.one_of(
    st.tuples(st.just("limit"), int64s),
    st.tuples(st.just("limit_slot"), st.integers(-2, 3000)),     # on the grid, maybe far out
    st.tuples(st.just("status"), st.integers(0, 60), int32s),
    st.tuples(st.just("length"), st.integers(0, 60), int32s),
    st.tuples(st.just("bytes"), st.integers(0, 70_000), st.binary(min_size=1, max_size=16)),
    st.tuples(st.just("truncate"), st.integers(0, 70_000)),
)

OPS = ["next", "read", "read_buffer", "read_batch", "read_bytes", "read_message",
       "read_into", "seek_end", "seek", "has_recovered", "records", "wait", "limit"]


@st.composite
def cases(draw):
    rsize = draw(record_sizes)
    kind = draw(st.sampled_from(["random", "mutated", "mutated", "mutated"]))
    wsize = rsize if draw(st.booleans()) else draw(record_sizes)   # written with another size?
    slot = 8 + wsize
    file_size = draw(st.integers(16 + wsize, 8 + slot * 200))
    c = {"kind": kind, "file_size_w": file_size, "record_size_w": wsize}
    if kind == "random":
        c["data"] = draw(st.binary(max_size=6000))
    else:
        c["records"] = draw(st.lists(st.tuples(st.sampled_from(["commit", "hang", "rollback"]),
                                               st.binary(max_size=wsize)), max_size=40))
        c["mutations"] = draw(st.lists(mutation, max_size=6))
    c["file_size"] = file_size if draw(st.booleans()) else draw(st.integers(16 + rsize, 200_000))
    c["record_size"] = rsize
    c["read_only"] = draw(st.booleans())
    c["start"] = draw(st.one_of(st.none(), st.none(), st.none(), st.just("end"),
                                st.integers(-20, 30_000), st.integers(0, 50).map(lambda k: 8 + k * (8 + rsize))))
    c["ops"] = draw(st.lists(st.tuples(st.sampled_from(OPS), st.integers(0, 2**20)),
                             min_size=1, max_size=40))
    c["cli"] = draw(st.lists(st.sampled_from(["--bytes", "--json", "-lPriceUpdate", "-f",
                                              "--status=0,2", "--max=5"]), max_size=3,
                             unique=True))
    return c


def build(path, c):
    if os.path.exists(path):
        os.unlink(path)
    if c["kind"] == "random":
        with open(path, "wb") as f:
            f.write(c["data"])
        return
    wsize, fsize = c["record_size_w"], c["file_size_w"]
    with MappedBusWriter(path, fsize, wsize) as w:
        for what, payload in c["records"]:
            try:
                if what == "commit":
                    w.write(payload)
                else:
                    off = w._allocate_only(payload)
                    if what == "rollback":
                        with open(path, "r+b") as f:
                            f.seek(off)
                            f.write(struct.pack("<i", 2))
            except BusFullError:
                break
    slot = 8 + wsize
    with open(path, "r+b") as f:
        for m in c["mutations"]:
            if m[0] == "limit":
                f.seek(0)
                f.write(struct.pack("<q", m[1]))
            elif m[0] == "limit_slot":
                f.seek(0)
                f.write(struct.pack("<q", 8 + m[1] * slot))
            elif m[0] in ("status", "length"):
                f.seek(8 + m[1] * slot + (0 if m[0] == "status" else 4))
                f.write(struct.pack("<i", m[2]))
            elif m[0] == "bytes":
                f.seek(m[1])
                f.write(m[2])
            elif m[0] == "truncate":
                f.truncate(m[1])


def drive(path, c, outcomes):
    """Open the reader and run the ops; record how the case ended."""
    rsize = c["record_size"]
    try:
        # A short lock timeout: an empty file is "a bus being created" to a reader, which
        # waits that long for it.
        r = MappedBusReader(path, c["file_size"], rsize, start=c["start"],
                            read_only=c["read_only"], lock_timeout=0.02)
        r._set_timeout_ns(0)     # stalled slots rolled back at first sight
        with r:
            buf = bytearray(rsize)
            batch = np.zeros((8, rsize), np.uint8)
            meta = np.zeros(8, np.int32)
            msg = PriceUpdate() if rsize >= PriceUpdate._payload_size_ else None
            for op, arg in c["ops"]:
                if op in ("next", "read_buffer", "read_bytes", "read_message"):
                    if r.next():
                        r.read_type()
                        if op == "read_buffer":
                            r.read_buffer(buf)
                        elif op == "read_bytes":
                            r.read_bytes()
                        elif op == "read_message" and msg is not None:
                            r.read_message(msg)
                elif op == "read":
                    rec = r.read(0)
                    if rec is not None:
                        rec.data
                elif op == "read_batch":
                    r.read_batch(batch, meta if arg & 1 else None, timeout=0)
                elif op == "read_into" and msg is not None:
                    r.read_into(msg)
                elif op == "seek_end":
                    r.seek_end()
                elif op == "seek":
                    r.seek(8 + (8 + rsize) * (arg % 5000))
                elif op == "has_recovered":
                    r.has_recovered()
                    r.position
                elif op == "records":
                    for rec in r.records(timeout=0):
                        rec.payload
                elif op == "wait":
                    r.wait(0)
                elif op == "limit":
                    r.limit
        outcomes["reader ok"] += 1
    except ALLOWED as e:
        outcomes[f"reader {type(e).__name__}"] += 1


def dump(path, c, outcomes):
    args = ["dump", path, "-r", str(c["record_size"])]
    for opt in c["cli"]:
        args += ["-f", str(c["file_size"])] if opt == "-f" else [opt]
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            code = cli_main(args)
        outcomes[f"dump exit {code}"] += 1
    except ALLOWED as e:
        outcomes[f"dump {type(e).__name__}"] += 1


def main(argv):
    directory, examples, the_seed = argv[0], int(argv[1]), int(argv[2])
    java_every = int(argv[argv.index("--java-every") + 1]) if "--java-every" in argv else 0
    path = os.path.join(directory, "case.bus")
    java_list = os.path.join(directory, "java-cases.txt")
    outcomes = Counter()
    warnings.simplefilter("ignore")    # read-only readers warn on every stall they skip

    @seed(the_seed)
    @settings(max_examples=examples, deadline=None, database=None,
              phases=[Phase.generate, Phase.shrink], suppress_health_check=list(HealthCheck))
    @given(cases())
    def campaign(c):
        outcomes["cases"] += 1
        faulthandler.dump_traceback_later(CASE_SECONDS, exit=True)
        try:
            build(path, c)
            drive(path, c, outcomes)
            if os.path.exists(path):
                dump(path, c, outcomes)
            if java_every and outcomes["cases"] % java_every == 0 and os.path.exists(path):
                kept = os.path.join(directory, f"java-{outcomes['cases']}.bus")
                shutil.copyfile(path, kept)
                with open(java_list, "a") as f:
                    f.write(f"{kept} {c['file_size']} {c['record_size']} "
                            f"{int(c['read_only'])} {outcomes['cases']}\n")
        finally:
            faulthandler.cancel_dump_traceback_later()

    campaign()
    print(json.dumps(dict(outcomes)), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
