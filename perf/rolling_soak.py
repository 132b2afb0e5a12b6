"""Soak of a rolling bus: one writer at full speed through many segments with retention, one
reader following it, in Python and in Java, each in its own processes.

    python3 perf/rolling_soak.py                       # 200 segments of 2 MiB, retention 4, py and java
    python3 perf/rolling_soak.py --segments 50 --lang py --out /tmp/soak

What it shows:
- the bus stays bounded: the largest /dev/shm use of the bus directory and the largest reader
  RSS seen (sampled every 20 ms by this process), against the retention;
- every record is read once, in order (the payload carries its sequence number), or the reader
  reports exactly how many slots it lost to retention (it runs with on_gap="skip");
- what a roll costs the writer: the time of every write() call is recorded; the table gives
  p50/p99/p99.9/max of all writes, of the writes that rolled to a new segment, and of the
  writes within 64 records after a roll, against the rest.

Writes perf/results/rolling_soak.json and rolling_soak.md (or into --out).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common  # noqa: E402

RECORD_SIZE = 16            # Tick: seq int64, spare int64
NEAR_ROLL = 64              # writes after a roll that count as "around" it


def _writer_py(path, segment_size, retain, n, out):
    import array

    from mappedbus_py import Message, int64
    from mappedbus_py.rolling import RollingBusWriter

    class Tick(Message, type_id=7):
        seq = int64()
        spare = int64()

    ns = time.perf_counter_ns
    durations = array.array("Q", bytes(8 * n))
    rolls = array.array("Q")
    msg = Tick()
    with RollingBusWriter(path, segment_size, RECORD_SIZE, retain_segments=retain) as w:
        seg = w.segment
        for i in range(n):
            msg.seq = i
            t0 = ns()
            w.write(msg)
            t1 = ns()
            durations[i] = t1 - t0
            if w.segment != seg:
                seg = w.segment
                rolls.append(i)
        segments = w.segment + 1
    with open(out, "wb") as f:
        f.write(len(rolls).to_bytes(8, "little"))
        f.write(rolls.tobytes())
        f.write(durations.tobytes())
    print(json.dumps({"segments": segments}), flush=True)


def _reader_py(path, n):
    import resource

    from mappedbus_py import Message, int64
    from mappedbus_py.rolling import RollingBusReader

    class Tick(Message, type_id=7):
        seq = int64()
        spare = int64()

    msg = Tick()
    expected = first = start = None
    out_of_order = 0
    read = 0
    with RollingBusReader(path, on_gap="skip") as r:
        t0 = time.perf_counter()
        while expected is None or expected < n:
            if not r.wait(30.0):
                break
            r.read_message(msg)
            if first is None:
                # start=None is the oldest retained record: a fast writer may have rolled
                # (and retention removed) segments before this process started
                first = expected = msg.seq
                # where it started: the slots skipped before the first record were lost already
                start = first - r.lost
            if msg.seq != expected:
                if msg.seq < expected:
                    out_of_order += 1
                expected = msg.seq
            expected += 1
            read += 1
        elapsed = time.perf_counter() - t0
        lost = r.lost
    print(json.dumps({"read": read, "lost_slots": lost, "out_of_order": out_of_order,
                      "first_seq": first, "start_seq": start,
                      "last_seq": expected - 1, "seconds": elapsed,
                      "maxrss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}), flush=True)


def _dir_bytes(path):
    total = 0
    try:
        with os.scandir(path) as it:
            for e in it:
                try:
                    total += e.stat(follow_symlinks=False).st_blocks * 512
                except FileNotFoundError:
                    pass
    except FileNotFoundError:
        pass
    return total


def _rss_kb(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except (FileNotFoundError, ProcessLookupError):
        pass
    return 0


def _percentiles(values):
    import numpy as np
    if len(values) == 0:
        return {}
    v = np.asarray(values, dtype=np.int64)
    q = np.percentile(v, [50, 99, 99.9])
    return {"n": int(v.size), "p50_ns": float(q[0]), "p99_ns": float(q[1]),
            "p99_9_ns": float(q[2]), "max_ns": int(v.max())}


def _analyse(out, n):
    import numpy as np
    with open(out, "rb") as f:
        k = int.from_bytes(f.read(8), "little")
        rolls = np.frombuffer(f.read(8 * k), dtype=np.uint64).astype(np.int64)
        durations = np.frombuffer(f.read(8 * n), dtype=np.uint64).astype(np.int64)
    near = np.zeros(n, dtype=bool)
    for r in rolls:
        near[r:r + NEAR_ROLL] = True
    return {"all": _percentiles(durations), "roll_writes": _percentiles(durations[rolls]),
            "near_rolls": _percentiles(durations[near]), "elsewhere": _percentiles(durations[~near]),
            "rolls": int(k)}


def _java(*args):
    from mappedbus_py import jvm
    return jvm.java_command("io.mappedbuspy.perf.RollingSoak", *args,
                            jvm_args=("-Xmx1g", "-XX:+UseSerialGC"))


def run_one(lang, segments, segment_size, retain, workdir):
    per_segment = (segment_size - 8) // (8 + RECORD_SIZE)
    n = segments * per_segment
    path = os.path.join("/dev/shm", f"mbsoak-{os.getpid()}-{lang}")
    shutil.rmtree(path, ignore_errors=True)
    out = os.path.join(workdir, f"{lang}-writer.bin")
    if lang == "py":
        me = [common.PY, os.path.abspath(__file__)]
        wcmd = me + ["_writer", path, str(segment_size), str(retain), str(n), out]
        rcmd = me + ["_reader", path, str(n)]
    else:
        wcmd = _java("writer", path, segment_size, retain, n, out)
        rcmd = _java("reader", path, segment_size, n)
    try:
        writer = subprocess.Popen(wcmd, stdout=subprocess.PIPE, text=True, env=common.env())
        # The reader opens the bus once the writer has made it.
        deadline = time.monotonic() + 60
        while not os.path.exists(os.path.join(path, "bus.meta")) and time.monotonic() < deadline:
            time.sleep(0.005)
        reader = subprocess.Popen(rcmd, stdout=subprocess.PIPE, text=True, env=common.env())
        max_dir = max_rss = samples = 0
        while reader.poll() is None or writer.poll() is None:
            max_dir = max(max_dir, _dir_bytes(path))
            max_rss = max(max_rss, _rss_kb(reader.pid))
            samples += 1
            time.sleep(0.02)
        wout, _ = writer.communicate()
        rout, _ = reader.communicate()
        if writer.returncode or reader.returncode:
            raise RuntimeError(f"{lang}: writer exit {writer.returncode}, reader exit {reader.returncode}")
        w = json.loads(wout.strip().splitlines()[-1])
        r = json.loads(rout.strip().splitlines()[-1])
    finally:
        shutil.rmtree(path, ignore_errors=True)
    result = {"records": n, "segments": w["segments"], "segment_size": segment_size,
              "retain_segments": retain, "max_dir_bytes": max_dir, "max_reader_rss_kb": max_rss,
              "samples": samples, "reader": r, "write_latency": _analyse(out, n)}
    os.unlink(out)
    return result


def render(results, machine):
    lines = [f"# Rolling-bus soak ({time.strftime('%Y-%m-%d %H:%M:%S %z')})", "",
             f"Machine: {machine}", ""]
    for lang, res in results.items():
        r = res["reader"]
        lat = res["write_latency"]
        bound = (res["retain_segments"] + 3) * res["segment_size"]
        lines += [f"## {'Python' if lang == 'py' else 'Java'}", "",
                  f"{res['records']:,} records of {RECORD_SIZE} bytes through {res['segments']} segments of "
                  f"{res['segment_size'] / 2**20:g} MiB, retention {res['retain_segments']} segments. "
                  f"Reader (from record {r['start_seq']:,}, the oldest retained when it started): "
                  f"{r['read']:,} read in order ({r['out_of_order']} out of order), "
                  f"{r['lost_slots']:,} slots lost to retention, {r['read'] / r['seconds'] / 1e6:.1f} M msgs/s. "
                  f"Largest /dev/shm use of the bus {res['max_dir_bytes'] / 2**20:.1f} MiB "
                  f"(bound: retention + current + spare + the temporary file of a spare being made = "
                  f"{bound / 2**20:g} MiB); "
                  f"largest reader RSS {res['max_reader_rss_kb'] / 1024:.1f} MiB.", "",
                  "| write() calls | n | p50 | p99 | p99.9 | max |", "| --- | ---: | ---: | ---: | ---: | ---: |"]
        for key, label in (("all", "all"), ("roll_writes", "the write that rolled"),
                           ("near_rolls", f"within {NEAR_ROLL} after a roll"), ("elsewhere", "the rest")):
            p = lat[key]
            if p:
                lines.append(f"| {label} | {p['n']:,} | {p['p50_ns'] / 1e3:.2f} us | {p['p99_ns'] / 1e3:.2f} us | "
                             f"{p['p99_9_ns'] / 1e3:.2f} us | {p['max_ns'] / 1e3:.1f} us |")
        lines.append("")
    return "\n".join(lines)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "_writer":
        return _writer_py(argv[1], int(argv[2]), int(argv[3]), int(argv[4]), argv[5])
    if argv and argv[0] == "_reader":
        return _reader_py(argv[1], int(argv[2]))
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--segments", type=int, default=200)
    p.add_argument("--segment-size", type=int, default=2 << 20)
    p.add_argument("--retain", type=int, default=4)
    p.add_argument("--lang", default="py,java")
    p.add_argument("--out", default=os.path.join(common.PERF, "results"))
    a = p.parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    machine = common.machine() if hasattr(common, "machine") else {}
    results = {}
    with tempfile.TemporaryDirectory() as work:
        for lang in a.lang.split(","):
            print(f"rolling soak: {lang}", file=sys.stderr, flush=True)
            results[lang] = run_one(lang, a.segments, a.segment_size, a.retain, work)
    with open(os.path.join(a.out, "rolling_soak.json"), "w") as f:
        json.dump({"machine": machine, "results": results}, f, indent=1)
    text = render(results, machine)
    with open(os.path.join(a.out, "rolling_soak.md"), "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main()
