"""Truncation campaign: live buses under running writer and reader processes are truncated,
overwritten, replaced and unlinked, over and over. No process may crash (SIGBUS shows as a
negative return code); each reports BusTruncatedError or BusReplacedError (a writer too,
through the writers' watch: it never goes on writing into a replaced or removed file)."""
import os
import queue
import shutil
import subprocess
import sys
import threading
import uuid

import pytest

from conftest import SHM
from mappedbus_py.formats.files import remove_bus

CHILD = os.path.join(os.path.dirname(__file__), "truncation_child.py")
ROUNDS = 240
ATTACKS = ("truncate_zero", "truncate_smaller", "open_w", "copy_over", "replace", "unlink")
TRUNCATING = {"truncate_zero", "truncate_smaller", "open_w", "copy_over"}


class Child:
    def __init__(self, role):
        self.p = subprocess.Popen([sys.executable, CHILD, role], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                  bufsize=1)
        # A thread reads the lines: select() on a buffered pipe misses lines already read ahead.
        self.lines = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self):
        for line in self.p.stdout:
            self.lines.put(line.strip())
        self.lines.put(None)

    def send(self, line):
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()

    def expect(self, timeout=20):
        """The next line of the child, without the detail after a '|'."""
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no answer within {timeout} s (return code {self.p.poll()})")
        assert line is not None, f"child ended: return code {self.p.wait()}, {self.p.stderr.read()}"
        self.last = line
        return line.split(" | ")[0]


def attack(kind, path, scratch):
    if kind == "truncate_zero":
        os.truncate(path, 0)
    elif kind == "truncate_smaller":
        with open(path, "rb") as f:
            limit = int.from_bytes(f.read(8), "little")
        os.truncate(path, (limit // 4096 + 1) * 4096)   # just past the records written
    elif kind == "open_w":
        open(path, "w").close()
    elif kind == "copy_over":
        with open(scratch, "wb") as f:
            f.write(b"not a bus")
        shutil.copyfile(scratch, path)
    elif kind == "replace":
        with open(scratch, "wb") as f:
            f.write(bytes(1 << 22))
        os.replace(scratch, path)
    else:
        os.unlink(path)


@pytest.mark.slow
def test_truncated_and_replaced_buses_never_crash_their_processes():
    base = str(SHM if SHM.is_dir() else "/tmp") + f"/mbtrunc-{uuid.uuid4().hex[:10]}"
    writer, reader = Child("writer"), Child("reader")
    outcomes = {}
    try:
        for i in range(ROUNDS):
            kind = ATTACKS[i % len(ATTACKS)]
            path, scratch = f"{base}-{i}", f"{base}-{i}.scratch"
            writer.send(f"open {path}")
            assert writer.expect() == f"ready {path}"
            reader.send(f"open {path}")
            assert reader.expect() == f"ready {path}"
            assert reader.expect() == "reading"
            attack(kind, path, scratch)
            got_reader = reader.expect()
            if kind in TRUNCATING:
                assert got_reader == "error BusTruncatedError", (i, kind, reader.last)
                got_writer = writer.expect()
                assert got_writer == "error BusTruncatedError", (i, kind, writer.last)
            else:
                assert got_reader == "error BusReplacedError", (i, kind, reader.last)
                # The writers' watch: it never goes on writing into the orphaned file.
                got_writer = writer.expect()
                assert got_writer == "error BusReplacedError", (i, kind, writer.last)
            outcomes[kind] = outcomes.get(kind, 0) + 1
            remove_bus(path)
            if os.path.exists(scratch):
                os.unlink(scratch)
        for c in (writer, reader):
            c.send("quit")
            assert c.p.wait(timeout=30) == 0, c.p.stderr.read()
    finally:
        for c in (writer, reader):
            if c.p.poll() is None:
                c.p.kill()
                c.p.wait()
        for name in os.listdir(os.path.dirname(base)):
            if name.startswith(os.path.basename(base)):
                os.unlink(os.path.join(os.path.dirname(base), name))
    assert sum(outcomes.values()) == ROUNDS >= 100
    print("attacks survived:", outcomes)
