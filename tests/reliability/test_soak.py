"""Soak: 4 writers and 2 readers running for MAPPEDBUS_SOAK_SECONDS (20 in CI; minutes on
demand), a new bus every epoch, with the memory (anonymous RSS: the mapped bus pages are
shared, not leaks) and open descriptors of every process sampled twice a second and required
to stay flat; every epoch is checked whole by both readers."""
import os
import re
import statistics
import sys
import time

import psutil
import pytest

from reliability_helpers import HERE, shm_dir, spawn  # noqa: F401 (fixtures)

WRITERS, READERS, PER_EPOCH = 4, 2, 20_000
SECONDS = float(os.environ.get("MAPPEDBUS_SOAK_SECONDS", "20"))


def epochs_done(path):
    return [int(m) for m in re.findall(r"^epoch (\d+)$", path.read_text(), re.M)]


def remove_finished_epochs(shm_dir, outs, deleted):
    """Remove the epochs every process is done with, as a rotating bus would; returns how
    many are removed now in all."""
    done = min(max(epochs_done(o), default=-1) for o in outs)
    while deleted < done:
        os.unlink(shm_dir / f"epoch-{deleted}")
        os.unlink(shm_dir / f"epoch-{deleted}.meta")
        deleted += 1
    return deleted


def anon_rss(p):
    m = p.memory_info()
    return m.rss - m.shared


@pytest.mark.slow
def test_four_writers_two_readers_keep_memory_and_descriptors_flat(shm_dir):
    child = [sys.executable, str(HERE / "soak_child.py")]
    procs = [spawn(child + ["writer", shm_dir, w, PER_EPOCH], shm_dir / f"w{w}.out")
             for w in range(WRITERS)]
    procs += [spawn(child + ["reader", shm_dir, r, WRITERS, PER_EPOCH], shm_dir / f"r{r}.out")
              for r in range(READERS)]
    outs = [shm_dir / f"w{w}.out" for w in range(WRITERS)] + \
           [shm_dir / f"r{r}.out" for r in range(READERS)]
    samples = {p.pid: [] for p in procs}
    deleted = 0
    try:
        handles = [psutil.Process(p.pid) for p in procs]
        deadline = time.monotonic() + SECONDS
        while time.monotonic() < deadline:
            time.sleep(0.5)
            for p, h in zip(procs, handles):
                assert p.poll() is None, f"{h.pid} exited early: {p.returncode}"
                samples[p.pid].append((anon_rss(h), h.num_fds()))
            deleted = remove_finished_epochs(shm_dir, outs, deleted)
        last = max(int(f.split("-")[1]) for f in os.listdir(shm_dir)
                   if f.startswith("epoch-") and f[6:].isdigit())   # not the .meta files
        stop = shm_dir / "stop.tmp"
        stop.write_text(str(last + 1))
        os.rename(stop, shm_dir / "stop")       # atomic: every process sees the same last epoch
        # Keep removing finished epochs: a writer's back-pressure waits for them to go before
        # it can reach the last epoch.
        finish_by = time.monotonic() + 120
        while any(p.poll() is None for p in procs):
            assert time.monotonic() < finish_by, "processes did not reach the last epoch"
            deleted = remove_finished_epochs(shm_dir, outs, deleted)
            time.sleep(0.05)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    for p, o in zip(procs, outs):
        assert p.returncode == 0, o.read_text()[-2000:]
        assert epochs_done(o) == list(range(last + 2)), o.read_text()[-500:]
    records = (last + 2) * WRITERS * PER_EPOCH
    print(f"soak {SECONDS:.0f}s: {last + 2} epochs, {records} records written, "
          f"{records * READERS} checked")
    for pid, s in samples.items():
        steady = s[len(s) // 4:]                  # after start-up
        third = max(1, len(steady) // 3)
        mem_first = statistics.median(m for m, _ in steady[:third])
        mem_last = statistics.median(m for m, _ in steady[-third:])
        assert mem_last - mem_first < 8 << 20, f"{pid}: anonymous memory grew {s}"
        fds = [n for _, n in steady]
        assert max(fds) - min(fds) <= 2, f"{pid}: descriptors changed {fds}"
