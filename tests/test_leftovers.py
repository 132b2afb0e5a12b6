"""The leftover check of tests/conftest.py (no_leftovers, tests/support/leftovers.py) fails a
test that leaves a bus's file in /dev/shm, naming it, and lets pass what is not a leftover."""
import glob
import os
import subprocess
import sys
import textwrap
import uuid

import pytest

from support import leftovers

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
pytestmark = pytest.mark.skipif(not os.path.isdir(leftovers.SHM), reason="needs /dev/shm")


def test_a_new_project_file_is_a_leftover_unless_a_process_holds_it_or_it_is_not_ours():
    assert os.path.exists(f"/proc/{os.getppid()}")
    dirs = [leftovers.SHM]
    tag = f"mbtest-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    planted = os.path.join(leftovers.SHM, tag + ".writers")
    held = os.path.join(leftovers.SHM, tag + "-held")
    mapped_dir = os.path.join(leftovers.SHM, tag + "-rolling")
    other = os.path.join(leftovers.SHM, f"not-ours-{tag[7:]}")
    # Another live process's (a pytest session at the same time: its pid in the name).
    session = os.path.join(leftovers.SHM, f"mbtest-{os.getppid()}-{tag[7:]}.writers")
    before = leftovers.snapshot(dirs)
    fd = os.open(held, os.O_CREAT | os.O_RDWR, 0o600)
    os.mkdir(mapped_dir)
    inner = os.open(os.path.join(mapped_dir, "bus.meta"), os.O_CREAT | os.O_RDWR, 0o600)
    try:
        for p in (planted, other, session):
            open(p, "w").close()
        assert leftovers.leftovers(before, leftovers.snapshot(dirs)) == [planted]
        os.close(inner)
        inner = None
        assert leftovers.leftovers(before, leftovers.snapshot(dirs)) == [mapped_dir, planted]
    finally:
        os.close(fd)
        if inner is not None:
            os.close(inner)
        for p in (planted, held, other, session, os.path.join(mapped_dir, "bus.meta")):
            os.unlink(p)
        os.rmdir(mapped_dir)
    assert leftovers.leftovers(before, leftovers.snapshot(dirs)) == []


def test_the_suite_fails_a_test_that_leaves_a_side_file_naming_it(tmp_path):
    # A test that forgets PATH.writers, run by pytest with this suite's conftest as a plugin
    # (its leak named with that pytest's pid, as the suite's own names are).
    tag = uuid.uuid4().hex[:12]
    (tmp_path / "test_planted.py").write_text(textwrap.dedent(f"""
        import os

        def test_clean():
            path = f"/dev/shm/mbtest-{{os.getpid()}}-{tag}.tmp"
            open(path, "w").close()
            os.unlink(path)

        def test_leaks():
            open(f"/dev/shm/mbtest-{{os.getpid()}}-{tag}.writers", "w").close()
    """))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([ROOT, os.path.join(ROOT, "tests")])}
    env.pop("MAPPEDBUS_LEFTOVER_CHECK", None)
    try:
        r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "conftest", "-p",
                            "no:cacheprovider", "--rootdir", str(tmp_path), str(tmp_path)],
                           capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    finally:
        leaks = glob.glob(f"/dev/shm/mbtest-*-{tag}.writers")
        for p in leaks:
            os.unlink(p)
    out = r.stdout + r.stderr
    assert r.returncode == 1, out
    assert "2 passed, 1 error" in out, out   # test_leaks passed, then failed at teardown
    assert len(leaks) == 1, leaks
    assert "test_planted.py::test_leaks left 1 file(s) behind" in out and leaks[0] in out, out
