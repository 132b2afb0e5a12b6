"""Shared fixtures: unique bus paths on /dev/shm and on disk, and the golden vectors."""
import json
import os
import pathlib
import shutil
import sys
import uuid

import pytest

from support import leftovers

ROOT = pathlib.Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests" / "data" / "golden"
SHM = pathlib.Path("/dev/shm")

# Subprocesses started by tests import the package from this checkout.
os.environ["PYTHONPATH"] = os.pathsep.join(
    p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)


# MAPPEDBUS_LEFTOVER_CHECK=0 turns the check below off (e.g. to look at what a test leaves).
_LEFTOVER_DIRS = leftovers.directories() if os.environ.get("MAPPEDBUS_LEFTOVER_CHECK") != "0" else []


@pytest.fixture(autouse=True)
def no_leftovers(request):
    """Fails a test that leaves a file of this project's in /dev/shm or the temp dir (a bus, a
    side file such as PATH.writers, a sample's temporary bus), naming every one: see
    tests/support/leftovers.py for what counts. Two listdirs a test."""
    before = leftovers.snapshot(_LEFTOVER_DIRS)
    yield
    left = leftovers.leftovers(before, leftovers.snapshot(_LEFTOVER_DIRS))
    if left:
        pytest.fail(f"{request.node.nodeid} left {len(left)} file(s) behind (remove a bus with "
                    f"mappedbus_py.formats.files.remove_bus, Layout.removeBus in Java): "
                    + ", ".join(left), pytrace=False)


@pytest.fixture
def bus_path(request):
    """A fresh bus path in RAM (/dev/shm), removed afterwards."""
    base = SHM if SHM.is_dir() else pathlib.Path("/tmp")
    path = base / f"mbtest-{os.getpid()}-{uuid.uuid4().hex[:12]}"
    yield str(path)
    # The bus and its side files (formats.files.side_files: the groups directory too), and
    # whatever else a test made beside it from the same name (PATH-src, PATH.<pid>.tmp.meta, ...),
    # files and directories alike.
    from mappedbus_py.formats.files import remove_bus
    remove_bus(path)
    for p in base.glob(path.name + "*"):
        remove_bus(p)       # a file, or a directory (a rolling bus at PATH-out, ...)


@pytest.fixture
def disk_bus_path(tmp_path):
    """A fresh bus path on disk."""
    return str(tmp_path / "bus.dat")


@pytest.fixture(scope="session")
def manifest():
    with open(GOLDEN / "manifest.json") as f:
        return json.load(f)


def golden_copy(tmp_path, name):
    """A writable copy of a golden file (readers may roll back its uncommitted slot)."""
    dst = tmp_path / name
    shutil.copyfile(GOLDEN / name, dst)
    os.chmod(dst, 0o600)
    return str(dst)
