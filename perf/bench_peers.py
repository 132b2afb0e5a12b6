"""The peers a user would otherwise pick, with the same 12-byte message (a PriceUpdate's
bytes) and the same count, 1 writer process -> 1 reader process, timed in the reader from
message WARMUP to the last: multiprocessing.Queue, multiprocessing.Pipe, pyzmq PUSH/PULL
over ipc://, faster-fifo, iceoryx2 (its Python publish-subscribe API, lossless: safe overflow
off, the publisher retrying until delivered; skipped with a note when the package is missing);
and Py4J (PySpark's Python -> JVM channel), one Java call per
message, timed in Python.

    bench_peers.py PEER N WARMUP      (one run in fresh processes; prints JSON)
"""
import json
import multiprocessing as mp
import os
import sys
import tempfile
import time

from common import ROOT, finish, py_worker, start  # noqa: F401  (ROOT puts the repo on sys.path)

MESSAGE = None   # set in main(): PriceUpdate(1, 100, 7).to_bytes(), 12 bytes


def _timed_receive(recv, n, warmup):
    for _ in range(warmup + 1):
        recv()
    t0 = time.perf_counter()
    for _ in range(n - warmup - 1):
        recv()
    return time.perf_counter() - t0


def _iox2_service(name):
    import ctypes
    import iceoryx2 as iox2

    class PriceUpdateC(ctypes.Structure):
        _fields_ = [("source", ctypes.c_int32), ("price", ctypes.c_int32),
                    ("quantity", ctypes.c_int32)]
    iox2.set_log_level_from_env_or(iox2.LogLevel.Error)
    node = iox2.NodeBuilder.new().create(iox2.ServiceType.Ipc)
    svc = (node.service_builder(iox2.ServiceName.new(name)).publish_subscribe(PriceUpdateC)
           .enable_safe_overflow(False).subscriber_max_buffer_size(4096).open_or_create())
    return iox2, node, svc, PriceUpdateC


def _reader(kind, chan, n, warmup, ready, result, done):
    if kind == "iox2":
        iox2, node, svc, _ = _iox2_service(chan)
        sub = svc.subscriber_builder().buffer_size(4096).create()
        receive = sub.receive

        def recv():
            while True:
                sample = receive()
                if sample is not None:
                    sample.delete()     # hands the slot back to the publisher
                    return
    elif kind == "zmq":
        import zmq
        ctx = zmq.Context()
        sock = ctx.socket(zmq.PULL)
        sock.set_hwm(0)
        sock.bind(chan)
        recv = sock.recv
    elif kind == "mp_queue":
        recv = chan.get
    elif kind == "mp_pipe":
        recv = chan[0].recv_bytes
    elif kind == "faster_fifo":
        recv = chan.get
    ready.set()
    dt = _timed_receive(recv, n, warmup)
    done.set()
    result.put(dt)
    if kind == "zmq":
        sock.close(linger=0)
        ctx.term()


def _writer(kind, chan, n, msg, done):
    if kind == "iox2":
        iox2, node, svc, PriceUpdateC = _iox2_service(chan)
        pub = (svc.publisher_builder()
               .backpressure_strategy(iox2.BackpressureStrategy.RetryUntilDelivered).create())
        # A sample sent before the publisher has connected to the subscriber is lost: wait for it.
        deadline = time.monotonic() + 60
        while svc.dynamic_config.number_of_subscribers < 1 and time.monotonic() < deadline:
            time.sleep(0.001)
        pub.update_connections()
        send = pub.send_copy
        msg = PriceUpdateC.from_buffer_copy(msg)
    elif kind == "zmq":
        import zmq
        ctx = zmq.Context()
        sock = ctx.socket(zmq.PUSH)
        sock.set_hwm(0)
        sock.connect(chan)
        send = sock.send
    elif kind == "mp_queue":
        send = chan.put
    elif kind == "mp_pipe":
        send = chan[1].send_bytes
    elif kind == "faster_fifo":
        send = chan.put
    for _ in range(n):
        send(msg)
    if kind == "iox2":
        # The samples live in the publisher's memory: it stays until the reader has them all.
        done.wait(600)
    if kind == "zmq":
        sock.close(linger=-1)     # lingers until every message is handed over
        ctx.term()


def run_python_peer(kind, n, warmup):
    ctx = mp.get_context("fork")
    tmp = None
    if kind == "zmq":
        tmp = tempfile.mkdtemp(prefix="mbperf-zmq-")
        chan = f"ipc://{tmp}/sock"
    elif kind == "mp_queue":
        chan = ctx.Queue()
    elif kind == "mp_pipe":
        chan = ctx.Pipe(duplex=False)
    elif kind == "faster_fifo":
        from faster_fifo import Queue
        chan = Queue(max_size_bytes=64 * 1024 * 1024)
    elif kind == "iox2":
        chan = f"mbperf/{os.getpid()}/{time.monotonic_ns()}"    # the service name
    else:
        raise SystemExit(f"unknown peer {kind}")
    ready, result, done = ctx.Event(), ctx.SimpleQueue(), ctx.Event()
    r = ctx.Process(target=_reader, args=(kind, chan, n, warmup, ready, result, done))
    r.start()
    if not ready.wait(60):
        raise RuntimeError(f"{kind} reader never started")
    w = ctx.Process(target=_writer, args=(kind, chan, n, MESSAGE, done))
    w.start()
    # A reader that never gets every message (a lost one) would wait forever: bounded here.
    r.join(600)
    if r.is_alive():
        r.kill()
        w.kill()
        raise RuntimeError(f"{kind}: the reader did not receive {n} messages within 600 s")
    dt = result.get()
    w.join(60)
    r.join(60)
    if tmp:
        import shutil
        shutil.rmtree(tmp, ignore_errors=True)
    timed = n - warmup - 1
    return {"messages": n, "timed": timed, "seconds": dt, "msgs_per_s": timed / dt}


def run_py4j(n, warmup):
    from py4j.java_gateway import GatewayParameters, JavaGateway, launch_gateway
    from mappedbus_py import jvm
    # Py4jSink is a benchmark driver: in the checkout's perf jar, beside the library jar.
    perf_jar = jvm.BUILD / jvm.CHECKOUT_JARS["io.mappedbuspy.perf."]
    if not perf_jar.is_file():
        jvm.build_jars()
    classpath = os.pathsep.join([str(jvm.jar_path()), str(perf_jar)])
    port = launch_gateway(classpath=classpath, die_on_exit=True,
                          javaopts=["-Xmx256m"], redirect_stderr=sys.stderr)
    gw = JavaGateway(gateway_parameters=GatewayParameters(port=port))
    try:
        sink = gw.jvm.io.mappedbuspy.perf.Py4jSink()
        accept = sink.accept
        for _ in range(warmup + 1):
            accept(MESSAGE)
        t0 = time.perf_counter()
        for _ in range(n - warmup - 1):
            accept(MESSAGE)   # returns once the JVM has taken it
        dt = time.perf_counter() - t0
        if sink.count() != n:
            raise RuntimeError(f"py4j sink took {sink.count()} of {n}")
    finally:
        gw.shutdown()
    timed = n - warmup - 1
    return {"messages": n, "timed": timed, "seconds": dt, "msgs_per_s": timed / dt}


PEERS = ("mp_queue", "mp_pipe", "zmq_ipc", "faster_fifo", "iox2", "py4j")


def missing(peer):
    """Why a peer cannot run here (its package is absent), or None."""
    import importlib.util
    module = {"zmq_ipc": "zmq", "faster_fifo": "faster_fifo", "iox2": "iceoryx2",
              "py4j": "py4j"}.get(peer)
    if module and importlib.util.find_spec(module) is None:
        return f"{peer} skipped: the Python package {module!r} is not installed"
    return None


def one_run(peer, n, warmup):
    cmd = [sys.executable, os.path.abspath(__file__), peer, str(n), str(warmup)]
    p = start(cmd)
    return finish([p])[0]


def benchmarks(cfg):
    from common import summarize
    out = []
    for peer in PEERS:
        def f(peer=peer):
            why = missing(peer)
            if why:
                print(f" {why}", end="", file=sys.stderr)
                return {}, {peer: {"skipped": why}}
            # iceoryx2's Python binding takes microseconds per message: fewer of them
            n = cfg["py4j_n"] if peer in ("py4j", "iox2") else cfg["peer_n"]
            runs = [one_run(peer, n, n // 10) for _ in range(cfg["k"])]
            s = summarize(runs)
            return {f"{peer}_msgs_per_s": s["median"], f"{peer}_best_msgs_per_s": s["best"]}, \
                {peer: {**s, "messages": n}}
        out.append((peer, f))
    return out


def main():
    global MESSAGE
    from mappedbus_py import PriceUpdate
    MESSAGE = PriceUpdate(1, 100, 7).to_bytes()
    assert len(MESSAGE) == 12
    peer, n, warmup = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    if peer == "py4j":
        res = run_py4j(n, warmup)
    else:
        res = run_python_peer("zmq" if peer == "zmq_ipc" else peer, n, warmup)
    print(json.dumps(res), flush=True)


if __name__ == "__main__":
    main()
