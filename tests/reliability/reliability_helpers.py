"""Helpers of the reliability campaign: child processes (Python and Java writers and
readers) and their outputs. MAPPEDBUS_LONG=1 runs the on-demand (`long`) variants."""
import os
import pathlib
import shutil
import subprocess
import sys

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent.parent
CHILD = [sys.executable, str(ROOT / "tests" / "bus_child.py")]
JARS = [str(ROOT / "build" / "jvm" / "mappedbuspy.jar"),
        str(ROOT / "build" / "jvm" / "mappedbuspy-tests.jar")]
LONG = os.environ.get("MAPPEDBUS_LONG") == "1"


def have_java():
    return shutil.which("java") is not None and shutil.which("javac") is not None


def java(main_class, *args):
    return ["java", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto",
            "-cp", os.pathsep.join(JARS), main_class, *map(str, args)]


def spawn(cmd, out_path, env=None):
    """Start a child whose stdout goes to a file (no pipe to fill up and block it)."""
    f = open(out_path, "w")
    try:
        return subprocess.Popen([str(c) for c in cmd], stdout=f, stderr=subprocess.STDOUT,
                                env=env)
    finally:
        f.close()


def parse_reader(text):
    """Records and counters of a reader's output (bus_child read / BusTool read)."""
    lines = text.strip().splitlines()
    assert lines and lines[-1].startswith("END "), text[-2000:]
    recs = []
    for line in lines[:-1]:
        pos, meta, payload = line.split()
        recs.append((int(pos), int(meta), bytes.fromhex(payload)))
    counters = dict(kv.split("=") for kv in lines[-1].split()[2:])
    return recs, {k: int(v) for k, v in counters.items()}
