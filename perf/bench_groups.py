"""Work groups (issue 35): one writer process feeding a group of 1, 2 and 4 member processes,
each record acked, against the peers that hand each item to one of several consumers.

    python3 perf/bench_groups.py            # 500,000 records a run, 3 rounds of the cost
    python3 perf/bench_groups.py --quick    # a smoke run (50,000 records, 1 round)

Two measurements, in one run:

1. **Throughput** (items/s): a writer process writes N PriceUpdate records (12 bytes) as fast
   as it can, once every member is ready; then one stop record a member. Each member takes
   records and acks each one, ``read_into(msg)`` + ``ack()``, or 256 at a time,
   ``read_batch(256)`` + ``ack_batch``. Time: from the writer's start to the last member's
   last ack. Peers, with the same shape (one producer process, k consumer processes, each
   item taken by one): ``multiprocessing.Queue`` (put/get of a 12-byte bytes), faster-fifo
   if installed (the same), and Redis Streams if ``redis-server`` is on PATH (XADD pipelined
   256 at a time; XREADGROUP COUNT 256 and one XACK of the batch), started here on a free
   port, else skipped with a message.
2. **Cost over plain reading** (ns of CPU time per record, one process, a filled bus, no
   writer): a plain ``MappedBusReader.read_into`` loop against a one-member group's
   ``read_into`` + ``ack()`` loop and its ``read_batch(256)`` + ``ack_batch`` loop; medians of
   the rounds. CPU time (the thread's), not wall time: on a shared machine the wall time of a
   loop counts the time other processes ran.

3. **Redelivery after a death** (ms): a member process takes a group's one record and holds
   it; another member process waits for records (``read()``, parked as an idle member is);
   the victim is SIGKILLed; the time from just before ``kill()`` to the waiting member's
   ``read()`` returning the record (``deliveries == 2``), both on CLOCK_MONOTONIC. A new
   group for each kill; p50, p99 and max over the kills (50; ``--quick`` 20). Target: p99
   <= 10 ms. ``--redelivery`` runs this alone.
4. **64 members**: the throughput run of 1. with a group of 64 member processes (the group
   alone).

The machine is shared and has few cores: the throughput runs are load-sensitive; their
figures say how the group compares with its peers on this machine, not an absolute rate.
Results: perf/results/groups.md and .json.
"""
import argparse
import json
import multiprocessing as mp
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import machine  # noqa: E402

from mappedbus_py import MappedBusReader, MappedBusWriter, PriceUpdate  # noqa: E402
from mappedbus_py.formats.files import remove_bus  # noqa: E402
from mappedbus_py.groups import GroupReader  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
BATCH = 256
CTX = mp.get_context("fork")


def _bus_path(tag):
    base = "/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir()
    return os.path.join(base, f"bench-groups-{tag}-{os.getpid()}")


def _remove(path):
    remove_bus(path)


# -- the group ----------------------------------------------------------------------------

def _member(path, batch, ready, out):
    m = GroupReader(path, "bench")
    ready.wait()
    msg = PriceUpdate()
    n = 0
    last = 0
    if batch:
        while True:
            recs = m.read_batch(BATCH, None)
            stops = [r for r in recs if r.payload[:4] == b"\0\0\0\0"]    # source 0
            for extra in stops[1:]:
                m.release(extra)     # one stop a member: the others go to the others
            n += m.ack_batch(r for r in recs if r not in stops[1:])
            last = time.monotonic()
            if stops:
                break
    else:
        read_into, ack = m.read_into, m.ack
        while True:
            if read_into(msg):
                ack()
                n += 1
                if msg.source == 0:
                    break
            else:
                os.sched_yield()     # few cores: let the writer run
        last = time.monotonic()
    m.close()
    out.put((n, last))


def _writer(path, n, members, ready):
    ready.wait()
    msg = PriceUpdate(source=1, price=100, quantity=5)
    with MappedBusWriter(path) as w:
        for i in range(n):
            msg.price = i
            w.write(msg)
        msg.source = 0
        for _ in range(members):
            w.write(msg)


def run_group(n, k, batch):
    path = _bus_path("tp")
    _remove(path)
    MappedBusWriter(path, 8 + (n + k + 16) * 20 + 4096, 12).open().close()
    GroupReader(path, "bench", window=1 << 14).close()
    ready, out = CTX.Barrier(k + 2), CTX.Queue()
    procs = [CTX.Process(target=_member, args=(path, batch, ready, out)) for _ in range(k)]
    procs.append(CTX.Process(target=_writer, args=(path, n, k, ready)))
    for p in procs:
        p.start()
    ready.wait()
    t0 = time.monotonic()
    results = [out.get(timeout=300) for _ in range(k)]
    for p in procs:
        p.join(60)
    _remove(path)
    got = sum(r[0] for r in results) - k
    assert got == n, (got, n)
    return n / (max(r[1] for r in results) - t0)


# -- the peers ----------------------------------------------------------------------------

def _q_consumer(q, ready, out):
    ready.wait()
    get = q.get
    n = 0
    while True:
        if get() is None:
            break
        n += 1
    out.put((n, time.monotonic()))


def _q_producer(q, n, k, ready):
    ready.wait()
    put = q.put
    item = b"x" * 12
    for _ in range(n):
        put(item)
    for _ in range(k):
        put(None)


def run_queue(make, n, k):
    q = make()
    ready, out = CTX.Barrier(k + 2), CTX.Queue()
    procs = [CTX.Process(target=_q_consumer, args=(q, ready, out)) for _ in range(k)]
    procs.append(CTX.Process(target=_q_producer, args=(q, n, k, ready)))
    for p in procs:
        p.start()
    ready.wait()
    t0 = time.monotonic()
    results = [out.get(timeout=300) for _ in range(k)]
    for p in procs:
        p.join(60)
    assert sum(r[0] for r in results) == n
    return n / (max(r[1] for r in results) - t0)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _r_consumer(port, name, total, n_all, ready, out):
    # Stops once every item is acked (a shared count: a batch may hold any number of the
    # items, so stop markers could all go to one consumer).
    import redis
    r = redis.Redis(port=port)
    ready.wait()
    n = 0
    while total.value < n_all:
        got = r.xreadgroup("g", name, {"s": ">"}, count=BATCH, block=50)
        if not got:
            continue
        ids = [eid for _, entries in got for eid, _ in entries]
        r.xack("s", "g", *ids)
        n += len(ids)
        with total.get_lock():
            total.value += len(ids)
    out.put((n, time.monotonic()))


def _r_producer(port, n, k, ready):
    import redis
    r = redis.Redis(port=port)
    ready.wait()
    item = b"x" * 12
    pipe = r.pipeline(transaction=False)
    for i in range(n):
        pipe.xadd("s", {"v": item})
        if i % BATCH == BATCH - 1:
            pipe.execute()
    pipe.execute()


def run_redis(port, n, k):
    import redis
    r = redis.Redis(port=port)
    r.delete("s")
    r.xgroup_create("s", "g", id="0", mkstream=True)
    ready, out, total = CTX.Barrier(k + 2), CTX.Queue(), CTX.Value("q", 0)
    procs = [CTX.Process(target=_r_consumer, args=(port, f"c{i}", total, n, ready, out))
             for i in range(k)]
    procs.append(CTX.Process(target=_r_producer, args=(port, n, k, ready)))
    for p in procs:
        p.start()
    ready.wait()
    t0 = time.monotonic()
    results = [out.get(timeout=300) for _ in range(k)]
    for p in procs:
        p.join(60)
    assert sum(x[0] for x in results) == n
    return n / (max(x[1] for x in results if x[0]) - t0)


def start_redis():
    exe = shutil.which("redis-server")
    if exe is None:
        return None, None, "redis-server is not on PATH (apt-get install redis-server): skipped"
    try:
        import redis
    except ImportError:
        return None, None, "the redis Python client is not installed (pip install redis): skipped"
    port = _free_port()
    proc = subprocess.Popen([exe, "--port", str(port), "--save", "", "--appendonly", "no"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    client = redis.Redis(port=port)
    for _ in range(200):
        try:
            client.ping()
            return proc, port, None
        except redis.ConnectionError:
            time.sleep(0.02)
    proc.kill()
    return None, None, "redis-server did not answer: skipped"


# -- the cost over plain reading ------------------------------------------------------------

def _victim(path, group, held):
    m = GroupReader(path, group)
    rec = m.read(5.0)
    held.send(rec is not None)
    time.sleep(3600)                 # holds it until SIGKILLed


def _survivor(path, conn):
    # For each group named on conn: join it, say so, wait for the record, send the monotonic
    # ns when read() returned it and its delivery count.
    while True:
        group = conn.recv()
        if group is None:
            return
        with GroupReader(path, group) as m:
            conn.send("joined")
            rec = m.read(10.0)
            t = time.monotonic_ns()
            conn.send((t, rec.deliveries if rec is not None else 0))
            if rec is not None:
                m.ack(rec)


def run_redelivery(kills):
    """Milliseconds from SIGKILL of a member holding a record to its redelivery to a waiting
    member, one per kill."""
    import signal
    path = _bus_path("redeliver")
    _remove(path)
    with MappedBusWriter(path, 8 + 64 * 20 + 4096, 12) as w:
        w.write(PriceUpdate(source=1, price=1, quantity=1))
    ours, theirs = CTX.Pipe()
    surv = CTX.Process(target=_survivor, args=(path, theirs))
    surv.start()
    out = []
    try:
        for i in range(kills):
            group = f"r{i}"
            held_r, held_w = CTX.Pipe(duplex=False)
            victim = CTX.Process(target=_victim, args=(path, group, held_w))
            victim.start()
            assert held_r.recv() is True
            ours.send(group)
            assert ours.recv() == "joined"
            time.sleep(0.02)         # the survivor is parked now, as an idle member is
            t0 = time.monotonic_ns()
            os.kill(victim.pid, signal.SIGKILL)
            t, deliveries = ours.recv()
            victim.join(10)
            assert deliveries == 2, deliveries
            out.append((t - t0) / 1e6)
        ours.send(None)
        surv.join(10)
    finally:
        if surv.is_alive():
            surv.kill()
        _remove(path)
    return out


def _percentile(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def redelivery_summary(ms):
    return {"kills": len(ms), "p50_ms": round(_percentile(ms, 0.5), 3),
            "p99_ms": round(_percentile(ms, 0.99), 3), "max_ms": round(max(ms), 3)}


def cost_rounds(n, k):
    path = _bus_path("cost")
    _remove(path)
    out = []
    try:
        msg = PriceUpdate(source=1, price=100, quantity=5)
        with MappedBusWriter(path, 8 + n * 20 + 4096, 12) as w:
            for i in range(n):
                msg.price = i
                w.write(msg)
        for i in range(k):
            with MappedBusReader(path) as r:
                read_into = r.read_into
                t = time.thread_time_ns()
                c = 0
                try:
                    while read_into(msg):
                        c += 1
                except EOFError:
                    pass
                plain = (time.thread_time_ns() - t) / n
            with GroupReader(path, f"one{i}", window=1 << 14) as m:
                read_into, ack = m.read_into, m.ack
                t = time.thread_time_ns()
                try:
                    while read_into(msg):
                        ack()
                except EOFError:
                    pass
                group = (time.thread_time_ns() - t) / n
            with GroupReader(path, f"batch{i}", window=1 << 14) as m:
                t = time.thread_time_ns()
                try:
                    while True:
                        recs = m.read_batch(BATCH, 0)
                        if not recs:
                            break
                        m.ack_batch(recs)
                except EOFError:
                    pass
                batch = (time.thread_time_ns() - t) / n
            out.append({"plain": plain, "group": group, "batch": batch,
                        "group_over_plain": group - plain, "batch_over_plain": batch - plain})
    finally:
        _remove(path)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--redelivery", action="store_true",
                    help="measure only the redelivery after a member's death")
    args = ap.parse_args()
    if args.redelivery:
        print(json.dumps(redelivery_summary(run_redelivery(20 if args.quick else 50))))
        return
    n, rounds = (50_000, 1) if args.quick else (500_000, 5)
    info = machine()
    started = time.strftime("%Y-%m-%d %H:%M:%S %z")
    sizes = (1, 2, 4)
    rows = {}
    notes = []
    rows["group, read_into + ack"] = [run_group(n, k, False) for k in sizes]
    rows[f"group, read_batch({BATCH}) + ack_batch"] = [run_group(n, k, True) for k in sizes]
    qn = max(n // 5, 10_000)
    rows["multiprocessing.Queue"] = [run_queue(CTX.Queue, qn, k) for k in sizes]
    try:
        import faster_fifo
        rows["faster-fifo Queue"] = [run_queue(lambda: faster_fifo.Queue(1 << 24), qn, k)
                                     for k in sizes]
    except ImportError:
        notes.append("faster-fifo is not installed: skipped")
    proc, port, why = start_redis()
    if proc is None:
        notes.append("Redis Streams: " + why)
    else:
        try:
            rows[f"Redis Streams (XREADGROUP {BATCH} + XACK)"] = [run_redis(port, qn, k)
                                                                  for k in sizes]
        finally:
            proc.kill()
            proc.wait()
    cost = cost_rounds(n, rounds)
    redelivery = redelivery_summary(run_redelivery(20 if args.quick else 50))
    # 64 members (the most a group holds is 128): the group alone, the peers' 64-consumer
    # runs would take minutes on this machine.
    wide = {"read_into + ack": run_group(n, 64, False),
            f"read_batch({BATCH}) + ack_batch": run_group(n, 64, True)}
    med = {key: round(statistics.median(c[key] for c in cost), 1) for key in cost[0]}
    info["load_avg_end"] = round(os.getloadavg()[0], 2)
    result = {"started": started, "mode": "quick" if args.quick else "full", "records": n,
              "peer_records": qn, "machine": info, "throughput": rows, "cost": cost,
              "cost_median": med, "redelivery": redelivery, "members_64": wide, "notes": notes}
    lines = [
        f"# Work groups: one writer, a group of members (issue 35), {started}", "",
        f"Machine: {info['machine_cpu']}, {info['machine_cores']} cores, "
        f"{info['machine_ram_gb']} GB RAM, Linux {info['machine_kernel']}, "
        f"{info['machine_python']}. Load average {info['machine_load_avg_start']} at start, "
        f"{info['load_avg_end']} at end (the machine is shared). `{result['mode']}` mode: "
        f"{n:,} records a group run, {qn:,} a peer run; PriceUpdate (12 bytes).", "",
        "Items per second, writer start to last ack (each item to one consumer, acked):", "",
        "| | " + " | ".join(f"{k} member{'s' if k > 1 else ''}" for k in sizes) + " |",
        "| --- |" + " ---: |" * len(sizes),
    ]
    for name, vals in rows.items():
        lines.append(f"| {name} | " + " | ".join(f"{v:,.0f}" for v in vals) + " |")
    lines += [
        "", "Cost per record over a plain `read_into` loop (one process, a filled bus, no "
        f"writer; ns of CPU time, medians of {rounds} round(s)):", "",
        "| plain read_into | group read_into + ack() | read_batch + ack_batch | "
        "acquire + ack over plain | batch over plain |",
        "| ---: | ---: | ---: | ---: | ---: |",
        f"| {med['plain']} | {med['group']} | {med['batch']} | {med['group_over_plain']} | "
        f"{med['batch_over_plain']} |",
    ]
    lines += ["", "A group of 64 member processes (items per second, as above; "
              f"{info['machine_cores']} cores):", "", "| | 64 members |", "| --- | ---: |"]
    lines += [f"| group, {name} | {v:,.0f} |" for name, v in wide.items()]
    lines += [
        "", "A dead member's record redelivered (ms from SIGKILL to a waiting member's read; "
        f"{redelivery['kills']} kills; target p99 <= 10 ms):", "",
        "| p50 | p99 | max |", "| ---: | ---: | ---: |",
        f"| {redelivery['p50_ms']} | {redelivery['p99_ms']} | {redelivery['max_ms']} |",
    ]
    if notes:
        lines += [""] + [f"- {x}" for x in notes]
    text = "\n".join(lines) + "\n"
    print(text)
    if not args.quick:
        os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
        with open(os.path.join(HERE, "results", "groups.json"), "w") as f:
            json.dump(result, f, indent=1)
        with open(os.path.join(HERE, "results", "groups.md"), "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
