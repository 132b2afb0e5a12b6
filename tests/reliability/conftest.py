"""Fixtures of the reliability campaign; `long` tests run only with MAPPEDBUS_LONG=1."""
import os
import pathlib
import shutil
import subprocess
import uuid

import pytest

from reliability_helpers import JARS, LONG, ROOT, have_java


def pytest_collection_modifyitems(config, items):
    if LONG:
        return
    skip = pytest.mark.skip(reason="on-demand variant: set MAPPEDBUS_LONG=1")
    for item in items:
        if "long" in item.keywords:
            item.add_marker(skip)


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
