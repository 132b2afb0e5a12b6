"""The Java bus under careless or hostile hands, across processes (docs/files-and-rolling.md):
Java readers and writers whose file is truncated or replaced under them report it and go on,
never crash the JVM; files planted by another user are refused; a crashed batch costs one
timeout. CI runs as root, so the hostile user is a forked child with uid/gid 65534."""
import glob
import os
import re
import shutil
import subprocess
import sys
import time

import pytest

from mappedbus_py import jvm
from mappedbus_py.formats.files import remove_bus
from support import procs

TESTS_JAR = (jvm.pathlib.Path(os.environ["MAPPEDBUS_PY_JARS"]) if os.environ.get("MAPPEDBUS_PY_JARS")
             else jvm.BUILD) / "mappedbuspy-tests.jar"
CHILD = "io.mappedbuspy.SafetyChild"
COUNTS = re.compile(r"truncated=(\d+) replaced=(\d+) records=(\d+) opens=(\d+) escaped=(\d+)")


@pytest.fixture(scope="module")
def java():
    procs.java_or_skip()
    if not TESTS_JAR.is_file():
        pytest.skip(f"{TESTS_JAR} is missing: run `bash interop/build.sh`")


def start_child(tmp, *args):
    # hs_err files go to tmp, where the test looks for them.
    cmd = jvm.java_command(CHILD, *args, classpath=[TESTS_JAR],
                           jvm_args=("-Xmx64m", "-XX:+UseSerialGC",
                                     f"-XX:ErrorFile={tmp}/hs_err_pid%p.log"))
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp)
    assert p.stdout.readline().strip() == "ready"
    return p


def test_java_reader_and_writer_survive_truncation_and_replacement(java, tmp_path):
    tmp = str(tmp_path)
    path = os.path.join("/dev/shm", f"mb-jsafety-{os.getpid()}.bus")
    file_size, record_size, seconds = 64 << 20, 64, 25
    try:
        writer = start_child(tmp, "writer", path, file_size, record_size, seconds)
        deadline = time.monotonic() + 10
        while not os.path.exists(path + ".meta") and time.monotonic() < deadline:
            time.sleep(0.01)
        reader = start_child(tmp, "reader", path, file_size, record_size, seconds)
        done, end = 0, time.monotonic() + seconds - 3
        while time.monotonic() < end:
            time.sleep(0.3)
            try:
                if done % 3 == 2:
                    # Replaced: a new complete file renamed over the path (as a redeploy would).
                    new = path + ".new"
                    fd = os.open(new, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o600)
                    os.ftruncate(fd, file_size)
                    os.close(fd)
                    os.rename(new, path)
                else:
                    # Truncated in place: to nothing, or to one page (the limit survives).
                    os.truncate(path, 0 if done % 3 == 0 else 4096)
                done += 1
            except FileNotFoundError:
                pass
        results = []
        for p in (writer, reader):
            out, err = p.communicate(timeout=60)
            assert p.returncode == 0, f"{p.args[-6]} exited {p.returncode}: {err[-2000:]}"
            m = COUNTS.search(out)
            assert m, out
            results.append(tuple(map(int, m.groups())))
        assert not glob.glob(os.path.join(tmp, "hs_err*")), "a JVM crashed"
        (wt, wr, wrec, wopens, wesc), (rt, rr, rrec, ropens, resc) = results
        print(f"file changed {done} times; writer truncated={wt} opens={wopens} records={wrec} "
              f"escaped={wesc}; reader truncated={rt} replaced={rr} opens={ropens} records={rrec} "
              f"escaped={resc}")
        assert wt + rt + rr >= 20
        assert wt > 0 and rt + rr > 0 and wrec > 0 and rrec > 0
    finally:
        remove_bus(path)        # the bus and every side file (the writers file too)
        if os.path.exists(path + ".new"):
            os.unlink(path + ".new")


def _as_nobody(argv):
    """Runs argv as uid/gid 65534 (another user than the test's, which is root in CI)."""
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        pytest.skip("needs root and setpriv to act as another user")
    subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *argv], check=True,
                   timeout=30)


def test_java_refuses_files_another_user_planted(java, tmp_path):
    # A sticky world-writable directory, as /dev/shm and /tmp are: anyone may plant names in it.
    shared = f"/dev/shm/mb-jhostile-{os.getpid()}"
    victim_dir = tmp_path / "victim"
    victim_dir.mkdir()
    victim = victim_dir / "precious"
    victim.write_bytes(b"do not touch" * 1000)
    before = victim.read_bytes()
    os.chmod(victim_dir, 0o755)
    os.mkdir(shared)
    os.chmod(shared, 0o1777)
    try:
        links = [f"{shared}/link{i}.bus" for i in range(2)]
        foreign = f"{shared}/foreign.bus"
        _as_nobody([sys.executable, "-c", (
            "import os, sys\n"
            "for p in sys.argv[2:4]: os.symlink(sys.argv[1], p)\n"
            "fd = os.open(sys.argv[4], os.O_CREAT | os.O_RDWR, 0o666)\n"
            "os.fchmod(fd, 0o666); os.ftruncate(fd, 8192); os.close(fd)\n"
            "os.symlink(sys.argv[1], sys.argv[4] + '.meta')\n"),
            str(victim), *links, foreign])
        cmds = []
        for p in links + [foreign]:
            cmds += [("write-bytes", p, 8192, 8, 1, 1), ("read", p, 8192, 8, 1)]
        for args in cmds:
            res = subprocess.run(jvm.java_command(procs.BUS_TOOL, *args), capture_output=True, text=True,
                                 timeout=60)
            assert res.returncode != 0, f"BusTool {args} accepted a planted file: {res.stdout}"
            assert "UnsafeBusFileException" in res.stderr and args[1] in res.stderr, res.stderr
            assert "symbolic link" in res.stderr or "owned by uid 65534" in res.stderr, res.stderr
        assert victim.read_bytes() == before
        assert os.stat(foreign).st_size == 8192 and open(foreign, "rb").read() == bytes(8192)
        assert not os.path.exists(links[0] + ".meta")
    finally:
        shutil.rmtree(shared, ignore_errors=True)
