"""Files a test leaves in /dev/shm or the temp dir: the check tests/conftest.py runs around
every test (``no_leftovers``), so a test, sample or library path that forgets a bus's side file
fails, naming the file, instead of filling a user's /dev/shm.

What counts, and why this way:

- Names only: a listdir of /dev/shm and of the temp dir before and after each test (a few
  hundred names: well under a millisecond). A name new after the test is a candidate.
- Only this project's names (``is_project_name``): the prefixes its tests, samples, perf scripts
  and the JUnit suite use (``mb...``, ``mappedbus-``, ``diskspace``, ...) or any
  side-file suffix of a bus (``layout.SIDE_SUFFIXES``: ``.meta``, ``.writers``, ...). Other
  programs' files in the same directories are never looked at.
- Named with the pid of another live process (``mbtest-<pid>-...`` of another pytest session
  running at the same time on the machine, which uses the same prefixes; the JUnit suite's
  ``diskspace-<pid>-...`` while its JVM runs): not this run's. A name without a pid made by
  another session at the same time can still be reported: name new files with your pid.
- Still open or mapped by a live process (``/proc/*/fd``, ``/proc/*/maps``): not a leftover.
  That keeps out the rest of another session's files and a test's own child still exiting; it
  is looked up only when there are candidates, so a clean test pays for two listdirs.

A private directory for the suite's processes was the other way; it would need every test,
sample and JUnit test to take its directory from one place (many name /dev/shm directly), and
would not see what a user's run leaves in the real /dev/shm.
"""
import os
import re
import tempfile

from mappedbus_py.formats import layout

SHM = "/dev/shm"
#: Name prefixes of the files this project's tests, samples, perf scripts and JUnit suite make.
#: ("mb": mbtest-, mb-jsafety-, mbrollp-, mbperf-, mbcons-, mbrel-, ...)
PREFIXES = ("mb", "mappedbus-", "diskspace", "spark-pipeline-", "gaps-")
#: The pid most of those names carry (mbtest-<pid>-..., mappedbus-demo-<pid>-...): the pytest
#: process's or a child's.
_PID = re.compile(r"[a-z-]*?-(\d+)(?:[-.]|$)")
#: Any file ending so is a bus's side file (or a sample's bus): ours whatever its prefix.
SUFFIXES = tuple(layout.SIDE_SUFFIXES) + (layout.SEGMENT_SUFFIX,)


#: Paths a fixture wider than one test keeps on purpose (a module's or session's directory,
#: removed by that fixture at its end): never a test's leftover (``keep``).
_KEPT = set()


def keep(path):
    """Mark ``path`` (a file or directory a module- or session-scoped fixture made and removes
    itself) as no test's leftover."""
    _KEPT.add(os.fspath(path))


def directories():
    """The directories looked at: /dev/shm (if there is one) and the temp dir."""
    dirs = [SHM] if os.path.isdir(SHM) else []
    tmp = tempfile.gettempdir()
    return dirs + ([tmp] if tmp not in dirs else [])


def is_project_name(name):
    return name.startswith(PREFIXES) or name.endswith(SUFFIXES)


def another_live_process(name):
    """Whether ``name`` carries the pid of a live process other than this one."""
    m = _PID.match(name)
    return bool(m) and int(m.group(1)) != os.getpid() and os.path.exists(f"/proc/{m.group(1)}")


def snapshot(dirs):
    """The names in each directory: {dir: frozenset(names)} (filtered only when they differ)."""
    out = {}
    for d in dirs:
        try:
            out[d] = frozenset(os.listdir(d))
        except OSError:
            out[d] = frozenset()
    return out


def held_paths(candidates):
    """Those of ``candidates`` (absolute paths) that a live process has open or mapped."""
    want = set(candidates)
    held = set()
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        fd_dir = f"/proc/{pid}/fd"
        try:
            for fd in os.listdir(fd_dir):
                try:
                    target = os.readlink(f"{fd_dir}/{fd}")
                except OSError:
                    continue
                if target in want:
                    held.add(target)
            with open(f"/proc/{pid}/maps") as f:
                for line in f:
                    path = line.rstrip("\n").partition("/")[2]
                    if path and "/" + path in want:
                        held.add("/" + path)
        except OSError:
            continue        # gone, or not ours to read
        if held == want:
            break
    return held


def leftovers(before, after):
    """Sorted absolute paths new in ``after`` (a snapshot) and held by no live process."""
    new = sorted(os.path.join(d, n) for d, names in after.items()
                 for n in names - before.get(d, frozenset())
                 if is_project_name(n) and not another_live_process(n)
                 and os.path.join(d, n) not in _KEPT)
    if not new:
        return []
    # A file open inside a new directory (a rolling bus at /dev/shm/mbtest-...) holds it.
    dirs = [p for p in new if os.path.isdir(p) and not os.path.islink(p)]
    inside = {}
    for d in dirs:
        for root, _, files in os.walk(d):
            for f in files:
                inside[os.path.join(root, f)] = d
    held = held_paths(set(new) | set(inside))
    held |= {inside[p] for p in held if p in inside}
    return [p for p in new if p not in held]
