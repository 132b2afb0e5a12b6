"""Helpers of the reliability campaign: child processes (Python and Java writers and
readers) and their outputs. MAPPEDBUS_LONG=1 runs the on-demand (`long`) variants."""
import os
import pathlib
import shutil
import subprocess
import sys
import uuid

import pytest

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent.parent
CHILD = [sys.executable, str(ROOT / "tests" / "support" / "bus_child.py")]
JARS = [str(ROOT / "build" / "jvm" / "mappedbuspy.jar"),
        str(ROOT / "build" / "jvm" / "mappedbuspy-tools.jar"),
        str(ROOT / "build" / "jvm" / "mappedbuspy-tests.jar")]
LONG = os.environ.get("MAPPEDBUS_LONG") == "1"

# No conftest.py here: a second module named "conftest" would shadow tests/conftest.py for
# the test modules that import from it. Test modules import these fixtures instead.


def long_variant(test):
    """Mark an on-demand variant: `long`, skipped unless MAPPEDBUS_LONG=1."""
    skip = pytest.mark.skipif(not LONG, reason="on-demand variant: set MAPPEDBUS_LONG=1")
    return pytest.mark.long(skip(test))


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


@pytest.fixture(scope="session")
def jars():
    """The project's jars, built once (a no-op when up to date)."""
    if not have_java():
        pytest.skip("needs a JDK (java and javac) on PATH")
    proc = subprocess.run(["bash", str(ROOT / "interop" / "build.sh")], capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return JARS


@pytest.fixture
def shm_dir(tmp_path):
    """A fresh directory in RAM (/dev/shm when there is one), removed afterwards."""
    base = pathlib.Path("/dev/shm")
    if not base.is_dir():
        yield tmp_path
        return
    d = base / f"mbrel-{os.getpid()}-{uuid.uuid4().hex[:10]}"
    d.mkdir()
    yield d
    shutil.rmtree(d, ignore_errors=True)
