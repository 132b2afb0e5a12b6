"""Racing writer processes of random sizes (0 B up to 8 MiB) to reader processes on a framed
bus: every message byte-identical, one order, every reader the same."""
import json
import os
import subprocess
import sys

import pytest

from mappedbus_py import MappedBusWriter

CHILD = os.path.join(os.path.dirname(__file__), "..", "support", "frames_child.py")


def run_race(path, writers, count, maxsize, readers=2, topics=False, extra=()):
    ws = [subprocess.Popen([sys.executable, CHILD, "write", path, str(i), str(count),
                            str(maxsize), *extra, *(["topics"] if topics else [])])
          for i in range(writers)]
    rs = [subprocess.Popen([sys.executable, CHILD, "read", path, str(writers * count), "20",
                            *(extra or ["single"])], stdout=subprocess.PIPE, text=True)
          for _ in range(readers)]
    try:
        for w in ws:
            assert w.wait(timeout=300) == 0
        outs = [json.loads(r.communicate(timeout=300)[0]) for r in rs]
    finally:
        for p in ws + rs:
            if p.poll() is None:
                p.kill()
    return outs


def check_outs(outs, writers, count):
    first = outs[0]
    assert first["bad"] == []
    assert len(first["order"]) == writers * count
    for out in outs[1:]:
        assert out == first                             # one order, every reader
    for wid in range(writers):                          # each writer's messages, in its order
        seqs = [s for w, s in (tuple(x) for x in first["order"] if x[0] == wid)]
        assert seqs == sorted(seqs)
    small = [x for x in first["order"] if x[0] < 0]     # messages too short to carry ids
    ided = {tuple(x) for x in first["order"] if x[0] >= 0}
    assert len(ided) + len(small) == writers * count


def test_four_racing_writers_up_to_256_kib(bus_path):
    MappedBusWriter(bus_path, 64 << 20, 248, frames=True, preallocate=False).open().close()
    outs = run_race(bus_path, 4, 40, 256 << 10)
    check_outs(outs, 4, 40)


@pytest.mark.slow
def test_four_racing_writers_up_to_8_mib(bus_path):
    MappedBusWriter(bus_path, 1 << 30, 4088, frames=True, preallocate=False).open().close()
    outs = run_race(bus_path, 4, 40, 8 << 20, readers=3)
    check_outs(outs, 4, 40)
