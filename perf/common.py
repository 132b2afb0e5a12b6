"""Shared by the benchmark modules: paths, process launching, the machine, statistics."""
import json
import os
import platform
import re
import resource
import statistics
import subprocess
import sys
import time
import uuid

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PERF = os.path.join(ROOT, "perf")
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from mappedbus_py.formats.files import remove_bus  # noqa: E402

PY = sys.executable
HEADER = 8                 # record header: status + metadata
PRICE_UPDATE_SIZE = 12     # the benchmark message: three int32


def bus_file_size(n, record_size=PRICE_UPDATE_SIZE, slack=8192):
    """Bytes for n records plus a batch or two of slack."""
    return 8 + (n + slack) * (HEADER + record_size)


def env():
    e = dict(os.environ)
    e["PYTHONPATH"] = ROOT + (os.pathsep + e["PYTHONPATH"] if e.get("PYTHONPATH") else "")
    # numpy's BLAS threads would spin on the 2 cores the benchmark processes need
    e.setdefault("OPENBLAS_NUM_THREADS", "1")
    e.setdefault("OMP_NUM_THREADS", "1")
    return e


class ShmFiles:
    """Unique /dev/shm (or /tmp) names for one benchmark, all removed on exit."""

    def __init__(self, tag):
        self.tag = f"mbperf-{os.getpid()}-{tag}-{uuid.uuid4().hex[:8]}"
        self.paths = []

    def __call__(self, name, directory="/dev/shm"):
        p = os.path.join(directory, f"{self.tag}-{name}")
        self.paths.append(p)
        return p

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for p in self.paths:
            remove_bus(p)                   # a bus and every file beside it


def create_bus(path, file_size, record_size):
    """Create and preallocate the file before any benchmark process opens it."""
    from mappedbus_py import MappedBusWriter
    MappedBusWriter(path, file_size, record_size).open().close()


# The Java original (Mappedbus 0.5.1 built for JDK 17), a peer measured in the same run. It is not
# part of the project: it is looked up beside the checkout (or in $MAPPEDBUS_ORIGINAL_DIR, as the
# tests do: tests/support/java_original.py) and skipped when absent.
ORIGINAL_DIR = os.path.normpath(os.environ.get("MAPPEDBUS_ORIGINAL_DIR")
                                or os.path.join(ROOT, "..", "shared", "original"))
ORIGINAL_JAR = os.path.join(ORIGINAL_DIR, "mappedbus-0.5.1-jdk17.jar")
ORIGINAL_DRIVER = os.path.join(PERF, "java", "OriginalPerf.java")
ORIGINAL_BUILD = os.path.join(ROOT, "build", "perf-original")
# It reaches sun.nio.ch.FileChannelImpl.map0 by reflection (see its README).
ORIGINAL_OPENS = "java.base/sun.nio.ch=ALL-UNNAMED"


def original_missing():
    """None when the original can run here, else why not (for the skip note)."""
    if not os.path.isfile(ORIGINAL_JAR):
        return f"the Java original is absent ({ORIGINAL_JAR}): its figures and ratios are skipped"
    return None


def original_classpath():
    """Compile perf/java/OriginalPerf.java against the original's jar (once, into build/)."""
    from mappedbus_py import jvm
    out = os.path.join(ORIGINAL_BUILD, "OriginalPerf.class")
    if not os.path.exists(out) or os.path.getmtime(out) < max(
            os.path.getmtime(ORIGINAL_DRIVER), os.path.getmtime(ORIGINAL_JAR)):
        os.makedirs(ORIGINAL_BUILD, exist_ok=True)
        javac = os.path.join(os.path.dirname(jvm.java_executable()), "javac")
        subprocess.run([javac, "--add-exports", ORIGINAL_OPENS, "-d", ORIGINAL_BUILD, "-cp",
                        ORIGINAL_JAR, ORIGINAL_DRIVER], check=True, capture_output=True, text=True)
    return os.pathsep.join([ORIGINAL_BUILD, ORIGINAL_JAR])


def java_original(*args, heap="256m"):
    """Command running the original's driver (OriginalPerf writer|reader ...)."""
    from mappedbus_py import jvm
    return [jvm.java_executable(), f"-Xms{heap}", f"-Xmx{heap}", "--add-opens", ORIGINAL_OPENS,
            "-cp", original_classpath(), "OriginalPerf", *map(str, args)]


def py_worker(*args):
    return [PY, os.path.join(PERF, "workers.py"), *map(str, args)]


def java(main_class, *args, heap="256m"):
    from mappedbus_py import jvm
    return jvm.java_command(main_class, *args, jvm_args=[f"-Xms{heap}", f"-Xmx{heap}"])


def start(cmd, stdout=subprocess.PIPE, stdin=None):
    return subprocess.Popen(cmd, stdin=stdin, stdout=stdout, stderr=subprocess.PIPE, text=True,
                            env=env())


def wait_ready(proc, timeout=60):
    """Block until the process prints 'ready' on stderr (it has opened its bus)."""
    deadline = time.monotonic() + timeout
    lines = []
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        if line.strip() == "ready":
            return
        lines.append(line)
    proc.kill()
    raise RuntimeError(f"{proc.args[:4]} never became ready: {''.join(lines)[-2000:]}")


def _children_minflt():
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_minflt


def finish(procs, timeout=900, minflt=None):
    """Wait for every process; the last JSON line each printed on stdout (or None). With a list
    ``minflt``, each process's minor page faults are appended to it, in order (the growth of
    RUSAGE_CHILDREN as each is reaped: this driver waits for its children one at a time)."""
    results = []
    for p in procs:
        before = _children_minflt()
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            raise RuntimeError(f"{p.args[:4]} timed out")
        if p.returncode:
            for q in procs:
                if q.poll() is None:
                    q.kill()
            raise RuntimeError(f"{p.args[:6]} failed ({p.returncode}): {err[-3000:]}")
        if minflt is not None:
            minflt.append(_children_minflt() - before)
        res = None
        for line in (out or "").splitlines():
            if line.startswith("{"):
                res = json.loads(line)
        results.append(res)
    return results


def reader_then_writers(reader_cmd, writer_cmds, timeout=900, faults=False, barrier=False):
    """Start the reader, wait until it polls, start the writers; the reader's JSON. With
    ``faults``, it also holds each process's minor page faults: reader_minflt, writer_minflt
    (the first writer's), start-up included. With ``barrier``, each writer prints 'ready' on
    stderr and waits for a line on stdin: they are released together once all are ready."""
    reader = start(reader_cmd)
    writers = []
    wf, rf = [], []
    try:
        wait_ready(reader)
        writers = [start(c, stdin=subprocess.PIPE if barrier else None) for c in writer_cmds]
        if barrier:
            for w in writers:
                wait_ready(w)
            for w in writers:
                w.stdin.write("go\n")
                w.stdin.close()
                w.stdin = None  # communicate() would flush it
        finish(writers, timeout, wf)
        res = finish([reader], timeout, rf)[0]
        if faults and res is not None:
            res.update(reader_minflt=rf[0], writer_minflt=wf[0])
        return res
    finally:
        for p in [reader, *writers]:
            if p.poll() is None:
                p.kill()
                p.wait()


def summarize(samples, key="msgs_per_s"):
    """Median of k runs (the figure reported) plus best and all samples (kept in the raw file)."""
    vals = [s[key] for s in samples]
    return {"median": statistics.median(vals), "best": max(vals), "samples": vals}


def _first(pattern, text, default="unknown"):
    m = re.search(pattern, text, re.M)
    return m.group(1).strip() if m else default


def write_dated_results(name, started, res, markdown):
    """A run's figures ``res`` and its report ``markdown``, as
    ``perf/results/<name>-<YYYY-MM-DD-HHMM of started>.json`` and ``.md``; prints the report
    and the path."""
    out = os.path.join(PERF, "results", f"{name}-{started:%Y-%m-%d-%H%M}")
    with open(out + ".json", "w") as f:
        json.dump(res, f, indent=1)
    with open(out + ".md", "w") as f:
        f.write(markdown)
    print(markdown)
    print("wrote", out + ".md")


def machine():
    with open("/proc/cpuinfo") as f:
        cpu = f.read()
    with open("/proc/meminfo") as f:
        mem = f.read()
    try:
        from mappedbus_py import jvm
        jv = subprocess.run([jvm.java_executable(), "-version"], capture_output=True, text=True).stderr
        java_version = jv.splitlines()[0] if jv else "unknown"
    except (OSError, FileNotFoundError):
        java_version = "none"
    return {
        "machine_cpu": _first(r"^model name\s*:\s*(.*)$", cpu),
        "machine_cores": os.cpu_count(),
        "machine_ram_gb": round(int(_first(r"^MemTotal:\s*(\d+)", mem, "0")) / 2**20, 1),
        "machine_kernel": platform.release(),
        "machine_arch": platform.machine(),
        "machine_python": f"{platform.python_implementation()} {platform.python_version()}",
        "machine_java": java_version,
        "machine_load_avg_start": round(os.getloadavg()[0], 2),
    }


def proc_status():
    """Peak and current resident memory of this process, split by kind (kB)."""
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmHWM", "VmRSS", "RssAnon", "RssFile", "RssShmem"):
                out[k] = int(v.split()[0])
    return out
