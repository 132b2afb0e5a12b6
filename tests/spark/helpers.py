"""Helpers shared by the Spark tests (a module of this test package, so that no second module named
``conftest`` shadows the top-level tests' one)."""
import pathlib
import subprocess

ROOT = pathlib.Path(__file__).resolve().parents[2]
CORE_JAR = ROOT / "build" / "jvm" / "mappedbuspy.jar"


def read_all(path, file_size, record_size, timeout_ms=2000, wait=0.0):
    """Every committed record of a bus, through the Python reader, as (position, meta, payload);
    stops when none comes within ``wait`` seconds."""
    from mappedbus_py import MappedBusReader
    out = []
    with MappedBusReader(path, file_size, record_size, timeout=timeout_ms / 1000) as r:
        while True:
            rec = r.read(wait)
            if rec is None:
                return out
            out.append((rec.position, rec.meta, bytes(rec.payload)))


def bus_tool(*args, check=True):
    """Runs the Java BusTool; returns its stdout."""
    res = subprocess.run(["java", "-cp", str(CORE_JAR), "io.mappedbuspy.tools.BusTool", *map(str, args)],
                         capture_output=True, text=True, timeout=60)
    if check and res.returncode != 0:
        raise AssertionError(f"BusTool {args} failed: {res.stderr}")
    return res.stdout


def hung_slot(path, file_size, record_size):
    """Leaves one allocated, never committed slot (a crashed writer); returns its offset."""
    p = subprocess.Popen(["java", "-cp", str(CORE_JAR), "io.mappedbuspy.tools.BusTool",
                          "allocate-and-hang", path, str(file_size), str(record_size)],
                         stdout=subprocess.PIPE, text=True)
    try:
        line = p.stdout.readline()
        assert line.startswith("allocated "), line
        return int(line.split()[1])
    finally:
        p.kill()
        p.wait()


def status_at(path, pos):
    with open(path, "rb") as f:
        f.seek(pos)
        return int.from_bytes(f.read(4), "little")


def bus_reader(spark, path, **options):
    r = spark.read.format("mappedbus").option("path", path)
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def _ensure_core_jar():
    if not CORE_JAR.exists():
        subprocess.run(["bash", str(ROOT / "interop" / "build.sh")], check=True, stdout=subprocess.DEVNULL)


_ensure_core_jar()
