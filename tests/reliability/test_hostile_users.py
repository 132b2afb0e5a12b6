"""Another user of a shared directory (a 1777 dir under /dev/shm) plants symbolic links and
world-writable files where root's buses will go: root's writers and readers refuse them,
and no file a link points to changes (contents, size, mtime)."""
import os
import shutil
import subprocess
import sys
import textwrap
import uuid

import pytest

from mappedbus_py import MappedBusReader, MappedBusWriter
from mappedbus_py.errors import UnsafeBusFileError

SIZE = 100_000
NOBODY = 65534

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="acting as another user needs root")


def as_nobody(code, *args):
    """Run ``code`` as uid/gid 65534 in a forked child (os.setuid), like a local attacker."""
    script = textwrap.dedent("""
        import os, sys, zlib, numpy, mappedbus_py   # imported first: the venv may be root's
        os.setgroups([])
        os.setgid(%d)
        os.setuid(%d)
        exec(sys.argv[1])
        """ % (NOBODY, NOBODY))
    r = subprocess.run([sys.executable, "-c", script, textwrap.dedent(code), *map(str, args)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout


@pytest.fixture
def shared_dir():
    path = f"/dev/shm/mbshared-{uuid.uuid4().hex[:10]}"
    os.mkdir(path)
    os.chmod(path, 0o1777)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def victims(tmp_path):
    """Files of root's that an attacker would like root's writer to overwrite."""
    paths = []
    for name in ("passwd-like", "precious.bus"):
        p = tmp_path / name
        p.write_bytes(b"root's data " * 10)
        paths.append(str(p))
    os.chmod(tmp_path, 0o755)
    return paths


def fingerprint(path):
    st = os.lstat(path)
    with open(path, "rb") as f:
        return f.read(), st.st_size, st.st_mtime_ns, st.st_mode


def test_links_and_foreign_files_planted_by_another_user_are_refused(shared_dir, victims):
    before = {v: fingerprint(v) for v in victims}
    # The attacker's plants, made as uid 65534: links at the bus and at its metadata path,
    # a dangling link, and a world-writable bus (with metadata) it owns.
    as_nobody("""
        import os, sys
        d, v0, v1 = sys.argv[2], sys.argv[3], sys.argv[4]
        os.symlink(v0, os.path.join(d, "linked.bus"))
        os.symlink(v1, os.path.join(d, "meta.bus.meta"))
        os.symlink(os.path.join(d, "created-through-link"), os.path.join(d, "dangling.bus"))
        fd = os.open(os.path.join(d, "foreign.bus"), os.O_RDWR | os.O_CREAT, 0o666)
        os.fchmod(fd, 0o666)
        os.ftruncate(fd, 102400)
        os.close(fd)
        """, shared_dir, *victims)
    foreign = os.path.join(shared_dir, "foreign.bus")
    assert os.stat(foreign).st_uid == NOBODY
    foreign_before = fingerprint(foreign)

    for cls in (MappedBusWriter, MappedBusReader):
        for name, why in (("linked.bus", "symbolic link"), ("dangling.bus", "symbolic link"),
                          ("foreign.bus", "owned by uid 65534")):
            with pytest.raises(UnsafeBusFileError, match=why):
                cls(os.path.join(shared_dir, name), SIZE, 8).open()
    # A bus whose metadata path is the attacker's link: the writer creates the bus, then
    # refuses to trust or write metadata through the link, and removes what it created.
    meta_bus = os.path.join(shared_dir, "meta.bus")
    with pytest.raises(UnsafeBusFileError, match="symbolic link"):
        MappedBusWriter(meta_bus, SIZE, 8).open()

    assert {v: fingerprint(v) for v in victims} == before
    assert fingerprint(foreign) == foreign_before
    assert not os.path.exists(os.path.join(shared_dir, "created-through-link"))
    assert not os.path.exists(meta_bus)
    assert sorted(os.listdir(shared_dir)) == ["dangling.bus", "foreign.bus", "linked.bus",
                                              "meta.bus.meta"]


def test_a_foreign_bus_is_accepted_only_with_allow_foreign(shared_dir):
    path = os.path.join(shared_dir, "theirs.bus")
    out = as_nobody("""
        import os, sys
        from mappedbus_py import MappedBusWriter
        with MappedBusWriter(sys.argv[2], 100000, 8, mode=0o644) as w:
            w.write(b"nobody")
            print(w.bus_id)
        """, path)
    with pytest.raises(UnsafeBusFileError, match="owned by uid 65534"):
        MappedBusReader(path, SIZE, 8).open()
    with MappedBusReader(path, SIZE, 8, allow_foreign=True) as r:
        assert r.read(0).data == b"nobody"
        assert r.bus_id == out.strip()


def test_another_user_cannot_use_roots_bus(shared_dir):
    path = os.path.join(shared_dir, "roots.bus")
    with MappedBusWriter(path, SIZE, 8) as w:
        w.write(b"secret")
    before = fingerprint(path)
    out = as_nobody("""
        import sys
        from mappedbus_py import MappedBusReader, MappedBusWriter
        for cls in (MappedBusWriter, MappedBusReader):
            try:
                cls(sys.argv[2], 100000, 8, allow_foreign=True).open()
                print("opened")
            except PermissionError as e:
                print(type(e).__name__)
        """, path)
    assert out.split() == ["PermissionError", "PermissionError"]
    assert fingerprint(path) == before
