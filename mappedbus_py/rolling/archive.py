"""The archive tier (docs/journal.md; the move's states and crash cases in
docs/design/journal.md): ``Archiver``, the steps (and, in a thread, the loop) that move full,
settled segments (and their time indices) from the hot directory into the archive directory, one
archiver per bus at a time (the OFD lock on ``ARCHIVER_LOCK_BYTE`` of the archive's ``bus.meta``), and the
archive's retention; ``ArchiverProcess`` runs them in a child process of each writer (what
writers use); ``move_segment`` and ``complete_moves`` are the steps, ``ArchiveTier`` what readers
and tools use to find and open archived segments."""
import dataclasses
import enum
import mmap
import os
import secrets
import threading
import time
import typing

from .._core._frames import TopicNames, frames_settled, slots_settled
from .._core._liveness import Hold, LiveFile
from .._core._reader import MappedBusReader
from ..errors import BusFullError, BusMismatchError, MappedBusError
from ..formats.archive import (ArchiveConfig, archived_path, compress as _compress,
                               decompress_into, find_archived, list_archived)
from ..formats.busmeta import read_meta, write_meta
from ..formats.files import open_file, read_to_end
from ..formats.layout import (ARCHIVER_ACTIVE_POLL_MS, ARCHIVER_EARLY_FILL_PERCENT,
                              ARCHIVER_IDLE_AFTER_MS, ARCHIVER_IDLE_POLL_MS,
                              ARCHIVER_LOCK_BYTE, archive_index, FIRST_RECORD_OFFSET, META_FILE,
                              TIME_INDEX_DIR, TIME_INDEX_ENTRIES_OFFSET,
                              TIME_INDEX_ENTRY_SIZE, TMP_PREFIX, TOPICS_FILE,
                              WRITERS_FILE,
                              join_position, mapped_size, slot_size, time_index_name)
from ..formats.positions import end_boundary
from .directory import list_segments, open_dir, segment_path
from .journal import fsync_dir
from .retention import retention_plan

__all__ = ("Archiver", "ArchiveTier", "ArchivedSegment", "MoveState", "move_segment", "move_segments",
           "complete_moves", "copy_ahead", "CopyAhead", "COPY_AHEAD_STALL",
           "settled", "prepare_archive", "ARCHIVE_STALL_ENV", "ARCHIVE_POLL_S",
           "ARCHIVE_BEHIND_WARN")

#: Test hook: a MoveState's name makes the archiver stop forever right after reaching it
#: (the tests SIGKILL it there); COPY_AHEAD_STALL, right after it wrote a copy ahead.
ARCHIVE_STALL_ENV = "MAPPEDBUS_TEST_ARCHIVE_STALL"
#: ARCHIVE_STALL_ENV's value that stops the archiver once a copy ahead is written (not fsynced).
COPY_AHEAD_STALL = "COPY_AHEAD"
#: How often an idle archiver looks (a writer's roll wakes it at once).
ARCHIVE_POLL_S = ARCHIVER_IDLE_POLL_MS / 1000
#: The longest an archiver goes without listing both directories in full (between, it
#: looks cheaply: ``step``): the archive's retention by age is seen at this pace.
ARCHIVE_FULL_LOOK_S = 1
#: How long a writer's open() waits for its archiver process to run.
ARCHIVER_START_TIMEOUT_S = 60.0
_READY = b"\x06"          # the archiver process's first byte on its stdout: it runs
#: A writer warns (once) when more segments than this are due to move at a roll.
ARCHIVE_BEHIND_WARN = 8
#: The most segments moved together (one fsync of the archive directory for all of them).
MOVE_BATCH = 8


class MoveState(enum.Enum):
    """The move of one segment (layout.MOVE_STATES); each value says what holds then."""
    MOVE_SETTLED = "every slot of the segment is committed or rolled back"
    MOVE_INDEX = "its time index is in the archive (fsynced, renamed, directory fsynced)"
    MOVE_COPIED = "its copy is in a temporary file of the archive, fsynced"
    MOVE_RENAMED = "the copy has its name in the archive, the directory fsynced: in both tiers"
    MOVE_UNLINKED = "the hot segment and its index are removed, the hot directory fsynced"


for _state in MoveState:
    _state.__doc__ = _state.value      # each state documented by what holds then
del _state


def _stall(state):
    _stall_at(state.name)


def _stall_at(name):
    if os.environ.get(ARCHIVE_STALL_ENV) == name:
        # one write (print makes two, unbuffered): a test reading the writer's output and its
        # archiver's through one pipe never sees this line torn by the writer's
        os.write(2, f"stalled {name}\n".encode())
        while True:
            time.sleep(3600)


def prepare_archive(hot, meta, cfg, *, mode=0o600, allow_foreign=False):
    """Make the archive directory (0700) and its ``bus.meta`` (a copy of the hot one) if
    absent; BusMismatchError if it holds another bus's."""
    open_dir(cfg.dir, create=True, allow_foreign=allow_foreign)
    os.makedirs(os.path.join(cfg.dir, TIME_INDEX_DIR), mode=0o700, exist_ok=True)
    apath = os.path.join(cfg.dir, META_FILE)
    theirs = read_meta(apath, allow_foreign=allow_foreign)
    if theirs is None:
        write_meta(apath, meta, mode=mode, exclusive=True)
        fsync_dir(cfg.dir)
        theirs = read_meta(apath, allow_foreign=allow_foreign)
    if theirs.id != meta.id:
        raise BusMismatchError(f"{cfg.dir!r} is the archive of bus {theirs.id}, not of bus "
                               f"{meta.id} ({hot!r}): one archive directory per bus")


def settled(path, segment_size, record_size, frames=False):
    """Whether segment ``path`` is full and every slot of it committed or rolled back (a
    look at its limit and status words, read-only). On a framed bus (``frames``), every
    message's first slot (``frames_settled``: continuation slots hold payload, not a status)."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        with _map_segment(fd, segment_size) as m:
            return _settled_in(m, segment_size, record_size, frames, path)
    finally:
        os.close(fd)


def _map_segment(fd, segment_size):
    # A read-only mapping of a whole segment, its pages mapped by one system call (they are
    # all read: a fault each would cost about 1 ms per 4 MiB here).
    return mmap.mmap(fd, mapped_size(segment_size), flags=mmap.MAP_SHARED | mmap.MAP_POPULATE,
                     prot=mmap.PROT_READ)


def _settled_in(m, segment_size, record_size, frames, path):
    # settled() of the segment mapped in m; its status loads are acquire loads, so that the
    # records read from m afterwards are what was committed.
    limit = int.from_bytes(m[:8], "little", signed=True)
    end = end_boundary(segment_size, record_size)
    if limit < end:
        return False
    slot = slot_size(record_size)
    if frames:
        return frames_settled(m, end, slot, path)
    return slots_settled(m, end, slot)


def _write_tmp(directory, name, data, mode, sync=True):
    tmp = os.path.join(directory, f"{TMP_PREFIX}{name}-{os.getpid()}-{secrets.token_hex(4)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    try:
        os.fchmod(fd, mode)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        if sync:
            os.fsync(fd)
    except BaseException:
        os.close(fd)
        os.unlink(tmp)
        raise
    os.close(fd)
    return tmp


def _read_all(path, allow_foreign):
    fd, _ = open_file(path, os.O_RDONLY, allow_foreign=allow_foreign)
    try:
        return read_to_end(fd)
    finally:
        os.close(fd)


def move_segment(hot, cfg, index, segment_size, *, mode=0o600, allow_foreign=False):
    """Move settled segment ``index`` (``move_segments`` of one)."""
    move_segments(hot, cfg, [index], segment_size, mode=mode, allow_foreign=allow_foreign)


def move_segments(hot, cfg, indices, segment_size, *, mode=0o600, allow_foreign=False,
                  ahead=()):
    """Move settled segments ``indices`` from ``hot`` into the archive together, through the
    states of ``MoveState`` in order (the caller holds the archiver's lock and checked
    ``settled``): each copy fsynced, then all renamed and the archive directory fsynced once,
    then the hot files removed. A time index is renamed into the archive without an fsync of
    its own (the directory's covers its name): one lost to a power loss makes ``seek_time``
    place its segment by the segment's mtime, which the copy keeps, never skip a record.
    ``ahead``: ``CopyAhead``s of some of ``indices`` (``copy_ahead``), their copies, taken
    over (those segments are not read again); their time indices are read now (writers may
    append)."""
    aix_dir = os.path.join(cfg.dir, TIME_INDEX_DIR)
    ahead = {a.index: a for a in ahead}
    _stall(MoveState.MOVE_SETTLED)
    copied = {}             # index -> (its index bytes or None, tmp path of the segment)
    syncs = []              # the copies' fsyncs (Futures)
    for index in indices:
        hix = os.path.join(hot, TIME_INDEX_DIR, time_index_name(index))
        try:
            index_bytes = _read_all(hix, allow_foreign)
        except FileNotFoundError:
            index_bytes = None
        if index_bytes is not None:
            tmp = _write_tmp(aix_dir, time_index_name(index), index_bytes, mode, sync=False)
            os.rename(tmp, os.path.join(aix_dir, time_index_name(index)))
        _stall(MoveState.MOVE_INDEX)
        st = os.stat(segment_path(hot, index))
        made = ahead.get(index)
        if made is not None:
            copied[index] = (index_bytes, made.tmp)
            syncs.append(made.synced)
            if os.stat(made.tmp).st_mtime_ns != st.st_mtime_ns:     # touched since: kept
                os.utime(made.tmp, ns=(st.st_atime_ns, st.st_mtime_ns))
                syncs.append(_fsync_pool().submit(_fsync_path, made.tmp))
            continue
        data = _read_all(segment_path(hot, index), allow_foreign)
        if len(data) != mapped_size(segment_size):
            raise MappedBusError(f"{segment_path(hot, index)!r} is {len(data)} bytes, not "
                                 f"{mapped_size(segment_size)}: not archived")
        final = archived_path(cfg.dir, index, cfg.compress)
        tmp = _write_tmp(cfg.dir, os.path.basename(final), _compress(data, cfg.compress), mode,
                         sync=False)
        del data
        # its mtime stays when it filled (retention ages it by that; seek_time bounds it by it)
        os.utime(tmp, ns=(st.st_atime_ns, st.st_mtime_ns))
        copied[index] = (index_bytes, tmp)
        # fsynced in the background while the next one is read and compressed (the disk's
        # wait overlaps the CPU's work); every copy is fsynced before any is renamed
        syncs.append(_fsync_pool().submit(_fsync_path, tmp))
    try:
        for done in syncs:
            done.result()
    except BaseException:
        for _, tmp in copied.values():      # never renamed: as if not copied
            try:
                os.unlink(tmp)
            except FileNotFoundError:
                pass
        raise
    _stall(MoveState.MOVE_COPIED)
    for index, (_, tmp) in copied.items():
        os.rename(tmp, archived_path(cfg.dir, index, cfg.compress))
    fsync_dir(aix_dir)
    fsync_dir(cfg.dir)
    _stall(MoveState.MOVE_RENAMED)
    for index, (index_bytes, _) in copied.items():
        _unlink_hot_segment(hot, index)
        # A writer's entries appended after the copy (it appends after its commit): its hot
        # index read after its unlink, and merged into the archive's.
        _merge_hot_index(hot, cfg, index, mode, allow_foreign, copied=index_bytes)
    fsync_dir(hot)
    if os.path.isdir(os.path.join(hot, TIME_INDEX_DIR)):
        fsync_dir(os.path.join(hot, TIME_INDEX_DIR))
    _stall(MoveState.MOVE_UNLINKED)


@dataclasses.dataclass
class CopyAhead:
    """The copy of a full hot segment not due yet (``index``), made before it is due
    (``copy_ahead``):
    its temporary file ``tmp`` in the archive (a TMP_PREFIX name: nothing is named in the
    archive yet, and the next archiver removes it after a kill) and ``synced``, the Future of
    its fsync. ``move_segments(ahead=)`` takes it over; ``discard()`` removes it."""
    index: int
    tmp: str
    synced: typing.Any

    def discard(self):
        """Remove the temporary file (once its fsync is over)."""
        try:
            self.synced.result()
        except Exception:
            pass                # removed either way
        try:
            os.unlink(self.tmp)
        except FileNotFoundError:
            pass


def copy_ahead(hot, cfg, index, segment_size, *, record_size=None, frames=False, mode=0o600,
               allow_foreign=False):
    """The heavy part of the move of settled segment ``index`` (the caller holds the
    archiver's lock), done while it is still hot and not due: its copy (compressed as
    ``cfg`` says) written to a temporary file of the archive, with the segment's mtime, and
    fsynced in the background. Returns its ``CopyAhead``. With ``record_size``, the segment
    is checked to be ``settled`` first, through the mapping the copy reads (None, and
    nothing made, if it is not); without it, the caller checked."""
    path = segment_path(hot, index)
    fd, _ = open_file(path, os.O_RDONLY, allow_foreign=allow_foreign)
    try:
        st = os.fstat(fd)
        if st.st_size != mapped_size(segment_size):
            raise MappedBusError(f"{path!r} is {st.st_size} bytes, not "
                                 f"{mapped_size(segment_size)}: not archived")
        with _map_segment(fd, segment_size) as m:
            if record_size is not None and not _settled_in(m, segment_size, record_size,
                                                           frames, path):
                return None
            final = archived_path(cfg.dir, index, cfg.compress)
            with memoryview(m) as view:
                packed = view if cfg.compress == "none" else _compress(view, cfg.compress)
                tmp = _write_tmp(cfg.dir, os.path.basename(final), packed, mode, sync=False)
                del packed
    finally:
        os.close(fd)
    os.utime(tmp, ns=(st.st_atime_ns, st.st_mtime_ns))
    _stall_at(COPY_AHEAD_STALL)
    return CopyAhead(index, tmp, _fsync_pool().submit(_fsync_path, tmp))


_FSYNC_POOL = []
_FSYNC_POOL_LOCK = threading.Lock()


def _fsync_pool():
    # The archiver's fsyncs of its copies (a thread: os.fsync lets the GIL go); made once,
    # by the archiver's thread or its copier thread, whichever asks first.
    with _FSYNC_POOL_LOCK:
        if not _FSYNC_POOL:
            import concurrent.futures
            _FSYNC_POOL.append(concurrent.futures.ThreadPoolExecutor(
                2, thread_name_prefix="mappedbus-archive-fsync"))
        return _FSYNC_POOL[0]


def _fsync_path(path):
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _unlink_hot_segment(hot, index):
    try:
        os.unlink(segment_path(hot, index))
    except FileNotFoundError:
        pass


def _merge_hot_index(hot, cfg, index, mode, allow_foreign, copied=None):
    """Segment ``index``'s hot time index (moved, or being moved: its segment archived) taken
    out of the hot directory: unlinked, then read through a descriptor opened before, and any
    entry of it the archive's index lacks appended there (a temporary file, fsynced, renamed,
    the directory fsynced; ``copied``: the bytes the move copied, when nothing can be new).
    So a writer's append racing the unlink is read here (before it) or appended again by path
    by the writer (after it: journal.note_time), never lost; a kill between the unlink and the
    merge loses the entries appended since the copy (docs/design/journal.md, "late entries")."""
    hix = os.path.join(hot, TIME_INDEX_DIR, time_index_name(index))
    try:
        fd, _ = open_file(hix, os.O_RDONLY, allow_foreign=allow_foreign)
    except FileNotFoundError:
        return
    try:
        try:
            os.unlink(hix)
        except FileNotFoundError:
            pass
        late = read_to_end(fd)
    finally:
        os.close(fd)
    if copied is not None and late == copied:
        return
    aix_dir = os.path.join(cfg.dir, TIME_INDEX_DIR)
    aix = os.path.join(aix_dir, time_index_name(index))
    try:
        have = _read_all(aix, allow_foreign)
    except FileNotFoundError:
        have = None
    merged = _merged_index(have, late)
    if merged is None:
        return
    os.makedirs(aix_dir, mode=0o700, exist_ok=True)
    tmp = _write_tmp(aix_dir, time_index_name(index), merged, mode)
    os.rename(tmp, aix)
    fsync_dir(aix_dir)


def _merged_index(have, late):
    # An index file's bytes holding every entry of ``have`` (the archive's, or None) and of
    # ``late`` (a hot one of the same segment), or None when ``have`` holds them all already
    # (or ``late`` is not an index of the same header: left out). Whole entries only.
    head = TIME_INDEX_ENTRIES_OFFSET
    if len(late) < head or (have is not None and have[:head] != late[:head]):
        return None
    size = TIME_INDEX_ENTRY_SIZE

    def entries(b):
        return [b[i:i + size] for i in range(head, len(b) - size + 1, size)]
    base = [] if have is None else entries(have)
    known = set(base)
    extra = [e for e in entries(late) if e not in known and any(e)]
    if have is not None and not extra:
        return None
    return late[:head] + b"".join(base) + b"".join(dict.fromkeys(extra))


def complete_moves(hot, cfg, *, mode=0o600, allow_foreign=False):
    """What a killed archiver left (the caller holds the archiver's lock): temporary files
    removed; a segment in both tiers (MOVE_RENAMED) removed from the hot one; a hot index
    whose segment is archived (a killed move's, or one a writer's late append made again)
    merged into the archive's and removed. Returns the segments it completed."""
    for d in (cfg.dir, os.path.join(cfg.dir, TIME_INDEX_DIR)):
        try:
            with os.scandir(d) as it:
                for e in it:
                    if e.name.startswith(TMP_PREFIX):
                        try:
                            os.unlink(e.path)
                        except FileNotFoundError:
                            pass
        except FileNotFoundError:
            pass
    archived = list_archived(cfg.dir)
    done = []
    for k in list_segments(hot):
        if k in archived:
            _unlink_hot_segment(hot, k)
            done.append(k)
    hidx = os.path.join(hot, TIME_INDEX_DIR)
    if os.path.isdir(hidx):
        for name in os.listdir(hidx):
            if name.endswith(".time") and name[:-5].isdigit() and int(name[:-5]) in archived \
                    and not os.path.lexists(segment_path(hot, int(name[:-5]))):
                _merge_hot_index(hot, cfg, int(name[:-5]), mode, allow_foreign)
        fsync_dir(hidx)
    if done:
        fsync_dir(hot)
    return done


def apply_archive_retention(cfg, meta, now_ns=None, archived=None):
    """The archive's own retention (``archive_retain_*``): the oldest archived segments beyond
    it removed (with their indices). Returns the removed indices. Without any, the archive is
    not listed (a look stays one of the hot directory, however long the archive grows).
    ``archived``: the archive's ``list_archived`` as the caller knows it (an ``Archiver``'s
    ``ArchiveListing``), else it is listed now."""
    if not has_archive_retention(cfg):
        return []
    if archived is None:
        archived = list_archived(cfg.dir)
    plan = archive_retention_plan(cfg, meta, archived, now_ns)
    removed = []
    for i in plan:
        for p in (os.path.join(cfg.dir, archived[i]),
                  os.path.join(cfg.dir, TIME_INDEX_DIR, time_index_name(i))):
            try:
                os.unlink(p)
            except FileNotFoundError:
                pass
        removed.append(i)
    if removed:
        fsync_dir(cfg.dir)
    return removed


def has_archive_retention(cfg):
    """Whether the archive ``cfg`` has a retention of its own (any ``archive_retain_*``)."""
    return bool(cfg.retain_segments or cfg.retain_bytes or cfg.retain_age_ms)


class ArchiveListing:
    """What an archiver knows of its archive's segments, for the archive's retention: the
    archive listed in full at most every ARCHIVE_FULL_LOOK_S (and at the first use), and
    between, its own moves and removals applied (only the holder of the archiver's lock adds
    or removes archived segments; a file removed by hand is seen at the next full listing). A
    look then costs no listing of an archive of any length."""

    def __init__(self, cfg):
        self._cfg = cfg
        self._names = None          # {segment index: file name} as of the last listing
        self._listed_ns = 0         # time.monotonic_ns of the next full listing

    def current(self, moved, now_ns):
        """The archive as it stands after this archiver moved ``moved`` since the last call:
        ``{segment index: file name}``."""
        if self._names is None or now_ns >= self._listed_ns:
            self._names = list_archived(self._cfg.dir)
            self._listed_ns = now_ns + ARCHIVE_FULL_LOOK_S * 1_000_000_000
        else:
            for k in moved:
                self._names[k] = os.path.basename(archived_path(self._cfg.dir, k,
                                                                self._cfg.compress))
        return self._names

    def removed(self, indices):
        """The archive's retention removed ``indices``."""
        for i in indices:
            self._names.pop(i, None)


def archive_retention_plan(cfg, meta, archived, now_ns=None):
    """The archived segments (``archived``: ``list_archived``) the archive's retention
    removes, oldest first."""
    if not (cfg.retain_segments or cfg.retain_bytes or cfg.retain_age_ms):
        return []
    segs = sorted(archived)
    if not segs:
        return []
    view = dataclasses.replace(meta, retain_segments=cfg.retain_segments,
                               retain_bytes=cfg.retain_bytes, retain_age_ms=cfg.retain_age_ms)

    def full_ms(i):
        try:
            return os.stat(os.path.join(cfg.dir, archived[i])).st_mtime_ns // 1_000_000
        except FileNotFoundError:
            return None
    now_ms = (time.time_ns() if now_ns is None else now_ns) // 1_000_000
    # Every archived segment is history: "newest" past the last one keeps none of them back.
    return retention_plan(segs, view, segs[-1] + 1, segs[-1] + 1, now_ms, full_ms)


class Archiver:
    """An archiver (``run_once`` in ``ArchiverProcess``'s child; ``start`` runs it in a thread of
    this process instead): while it holds the bus's archiver lock, it completes what a
    killed archiver left, then moves each full, settled segment beyond ``cfg.after`` full hot
    segments (or filled longer than ``cfg.age_ms`` ago) into the archive, oldest first, then
    applies the archive's retention; while none is due (``cfg.after`` >= 1), it copies ahead
    the full hot segments not due yet (``copy_ahead``: oldest first, one a look, each dropped
    when its segment is gone or moved without it), and each segment's move takes its copy
    over. ``wake()`` (a roll) makes it
    look at once. Its failures are kept in ``error`` (raised by the writer's ``close()``)."""

    def __init__(self, hot, meta, cfg, *, mode=0o600, allow_foreign=False, timeout=2.0):
        self.hot, self.meta, self.cfg = os.fspath(hot), meta, cfg
        self._mode, self._allow_foreign, self._timeout = mode, allow_foreign, timeout
        self._event = threading.Event()
        self._stop = False
        self._thread = None
        self._live = None
        self._holding = False
        self._settling = None       # (index, MappedBusReader) rolling back dead writers' slots
        self._busy = False          # run_once is running
        self._view = None           # HotView of the last run_once
        self._watch = None          # _Watch of the current segment, between listings
        self._full_at_ns = 0        # when step() runs run_once again without a change
        self._copied = {}           # segment index -> Future of its CopyAhead (or None)
        self._copier = None         # the thread that copies ahead (made at the first copy)
        self._archived = ArchiveListing(cfg)    # the archive's segments, for its retention
        self.error = None
        self.moved = 0

    def start(self):
        """Start the thread (the archive directory is made first, in the caller)."""
        self._thread = threading.Thread(target=self._run, name=f"mappedbus-archiver {self.hot}",
                                        daemon=True)
        self._thread.start()

    def wake(self):
        """Look now (the writer rolled)."""
        self._event.set()

    def wait_idle(self, timeout):
        """Wait (waking the thread) until no segment is due to move, or ``timeout`` seconds;
        True if none is (this archiver holds the lock: another's work is not waited for)."""
        deadline = time.monotonic() + timeout
        while True:
            if self._holding and not self._busy and not self.candidates():
                return True
            if time.monotonic() >= deadline:
                return False
            self._event.set()
            time.sleep(0.005)

    def stop(self):
        """Stop the thread and let the lock go."""
        self._stop = True
        self._event.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._settling is not None:
            self._settling[1].close()
            self._settling = None
        self._drop_copied()
        if self._watch is not None:
            self._watch.close()
            self._watch = None
        if self._live is not None:
            self._live.close()
            self._live = None
            self._holding = False

    def _run(self):
        woken = True
        while not self._stop:
            self._busy = True
            try:
                wait = self.step(woken)
            except Exception as e:      # kept; the writer's close() raises it
                self.error = e
                wait = ARCHIVER_IDLE_POLL_MS / 1000
            finally:
                self._busy = False
            woken = self._event.wait(wait)
            self._event.clear()

    def step(self, woken):
        """One turn of the archiver's loop (this thread's, or the child process's): a look,
        and ``run_once`` when it is due (``woken``: the writer rolled; the watch saw a roll, a
        spare made, or the current segment's limit pass the early-move fill; or the periodic
        full look). Returns the seconds to wait before the next turn (a wake cuts it short):
        ARCHIVER_ACTIVE_POLL_MS while the current segment's limit changes, ARCHIVER_IDLE_POLL_MS
        once it has not changed for ARCHIVER_IDLE_AFTER_MS (layout: WHEN a segment moves)."""
        now = time.monotonic_ns()
        full = woken or self._watch is None or now >= self._full_at_ns
        if not full:
            full = self._watch.look(now)
        if full:
            # Due again only on a change, else at the pace of what may become due by itself.
            self._full_at_ns = now + ARCHIVE_FULL_LOOK_S * 1_000_000_000
            moved = self.run_once()
            if self._view is not None:
                self._rewatch(self._view, now)
                if self._view.pending:
                    self._full_at_ns = now + ARCHIVER_IDLE_POLL_MS * 1_000_000
                elif self._view.age_due_ns is not None:
                    self._full_at_ns = min(self._full_at_ns, now + max(
                        0, self._view.age_due_ns - time.time_ns()))
            if len(moved) >= MOVE_BATCH:
                return 0.0              # more due: on at once
        if not self._holding or self._watch is None or \
                now - self._watch.changed_ns >= ARCHIVER_IDLE_AFTER_MS * 1_000_000:
            return ARCHIVER_IDLE_POLL_MS / 1000
        return ARCHIVER_ACTIVE_POLL_MS / 1000

    def _rewatch(self, view, now):
        if self._watch is not None and self._watch.view.current == view.current \
                and self._watch.view.newest == view.newest:
            self._watch.view = view
            return
        if self._watch is not None:
            self._watch.close()
        self._watch = _Watch.open(self.hot, view, self.meta.segment_size, now)

    def _take_lock(self):
        if self._holding:
            return True
        if self._live is None:
            # the archive's bus.meta: never replaced (the hot one is, when keys are added)
            fd, _ = open_file(os.path.join(self.cfg.dir, META_FILE), os.O_RDWR,
                              allow_foreign=self._allow_foreign)
            self._live = LiveFile(fd)
        self._holding = self._live.hold(ARCHIVER_LOCK_BYTE) is Hold.TAKEN
        if self._holding:
            complete_moves(self.hot, self.cfg, mode=self._mode,
                           allow_foreign=self._allow_foreign)
        return self._holding

    def candidates(self):
        """The hot segments due to move, oldest first (not yet checked to be settled)."""
        return self._due(hot_view(self.hot))

    def _due(self, view):
        if view.current is None:
            return []
        full = [k for k in view.segments if k < view.current]
        keep = self.cfg.after
        if keep >= 1 and len(full) >= keep and \
                past_early_fill(view.current_limit, self.meta.segment_size):
            keep -= 1       # the oldest full one moves while the current one fills
        due = full[:max(0, len(full) - keep)]
        if self.cfg.age_ms:
            now = time.time_ns()
            for k in full[len(due):]:
                try:
                    mtime = os.stat(segment_path(self.hot, k)).st_mtime_ns
                except FileNotFoundError:
                    continue
                if (now - mtime) // 1_000_000 > self.cfg.age_ms:
                    due.append(k)
                else:
                    break
        return due

    def _age_due_ns(self, view, due):
        # When (time.time_ns) the oldest full segment kept hot ages past archive_age; None.
        if not self.cfg.age_ms or view.current is None:
            return None
        for k in view.segments:
            if k < view.current and k not in due:
                try:
                    return os.stat(segment_path(self.hot, k)).st_mtime_ns + \
                        (self.cfg.age_ms + 1) * 1_000_000
                except FileNotFoundError:
                    continue
        return None

    def run_once(self):
        """One look: returns the segments moved."""
        if not self._take_lock():
            return []
        view = hot_view(self.hot)
        due = self._due(view)
        full = _full_segments(view)
        for k in [k for k in self._copied if k not in full]:
            _discard_copy(self._copied.pop(k))  # its segment gone, or moved without it
        ready = []
        for k in due:
            if self._stop or len(ready) >= MOVE_BATCH:
                break
            p = segment_path(self.hot, k)
            try:
                # A segment copied ahead was settled then, and a full settled segment stays
                # so (a decided slot is never undecided): not scanned again.
                ok = self._copy_made(k) or settled(
                    p, self.meta.segment_size, self.meta.record_size,
                    bool(self.meta.frames)) or self._settle(k)
            except FileNotFoundError:
                continue
            if not ok:
                break       # oldest first: a later segment waits for this one
            ready.append(k)
        if ready:
            # a copy under way is waited for: finishing it is quicker than copying again
            ahead = [made for made in map(self._take_copy, ready) if made is not None]
            try:
                move_segments(self.hot, self.cfg, ready, self.meta.segment_size,
                              mode=self._mode, allow_foreign=self._allow_foreign, ahead=ahead)
            except BaseException:
                for made in ahead:
                    made.discard()
                raise
            self.moved += len(ready)
        waiting = self._copy_ahead([k for k in full if k not in ready])
        if has_archive_retention(self.cfg):
            archived = self._archived.current(ready, time.monotonic_ns())
            self._archived.removed(apply_archive_retention(self.cfg, self.meta,
                                                           archived=archived))
        self._view = dataclasses.replace(view, pending=len(ready) < len(due) or waiting,
                                         age_due_ns=self._age_due_ns(view, due))
        return ready

    def _copy_ahead(self, full):
        """Copy ahead, in the copier thread, the oldest of the full hot segments ``full``
        without a copy (one copy at a time; ``copy_ahead``, which checks that it is settled);
        take in the copies that finished (one not settled, or gone, is forgotten: looked at
        again). A segment is copied from the roll that filled it, while the moves go on in
        this thread, so its copy has until its own move, one and a half to two segments'
        fill with ``archive_after=2``. True while a copy is under way or left to make: look
        again soon."""
        for k, fut in list(self._copied.items()):
            if fut.done():
                try:
                    made = fut.result()
                except FileNotFoundError:
                    made = None             # gone meanwhile
                except BaseException:
                    del self._copied[k]
                    raise
                if made is None:
                    del self._copied[k]     # not settled when looked at
        if self.cfg.after < 1 or self._stop:
            return False
        if any(not fut.done() for fut in self._copied.values()):
            return True
        todo = [k for k in full if k not in self._copied]
        if not todo:
            return False
        if self._copier is None:
            import concurrent.futures
            self._copier = concurrent.futures.ThreadPoolExecutor(
                1, thread_name_prefix="mappedbus-archive-copy")
        self._copied[todo[0]] = self._copier.submit(
            copy_ahead, self.hot, self.cfg, todo[0], self.meta.segment_size,
            record_size=self.meta.record_size, frames=bool(self.meta.frames), mode=self._mode,
            allow_foreign=self._allow_foreign)
        return True

    def _copy_made(self, k):
        # Whether segment k's copy ahead is made (then k was settled, and stays so).
        fut = self._copied.get(k)
        return fut is not None and fut.done() and fut.exception() is None \
            and fut.result() is not None

    def _take_copy(self, k):
        # Segment k's CopyAhead for its move (waiting for one under way), or None.
        fut = self._copied.pop(k, None)
        if fut is None:
            return None
        try:
            return fut.result()
        except FileNotFoundError:
            return None

    def _drop_copied(self):
        copied, self._copied = self._copied, {}
        for fut in copied.values():
            _discard_copy(fut)
        if self._copier is not None:
            self._copier.shutdown(wait=True)
            self._copier = None

    def _settle(self, k):
        """Read segment ``k`` as a reader does (rolling back, after the timeout, the slots of
        writers that are gone): True once every slot is settled."""
        if self._settling is not None and self._settling[0] != k:
            self._settling[1].close()
            self._settling = None
        if self._settling is None:
            framed = {}
            if self.meta.frames:      # whole messages: continuation slots are not records
                framed = dict(frames=True, _topics=TopicNames(
                    os.path.join(self.hot, TOPICS_FILE), None, self._allow_foreign))
            r = MappedBusReader(segment_path(self.hot, k), self.meta.segment_size,
                                self.meta.record_size, timeout=self._timeout,
                                start=FIRST_RECORD_OFFSET, allow_foreign=self._allow_foreign,
                                _segment=True, idle="busy_spin",
                                _writers_path=os.path.join(self.hot, WRITERS_FILE),
                                _position_base=join_position(k, 0, self.meta.segment_size),
                                **framed)
            r.open()
            self._settling = (k, r)
        r = self._settling[1]
        try:
            while r.next():
                pass
        except BusFullError:
            r.close()
            self._settling = None
            return settled(segment_path(self.hot, k), self.meta.segment_size,
                           self.meta.record_size, bool(self.meta.frames))
        return False


def _discard_copy(fut):
    # Removes the copy ahead of a Future (copy_ahead's), now or once it is made.
    def discard(f):
        try:
            made = f.result()
        except Exception:
            return              # nothing made (a failed copy removes its file)
        if made is not None:
            made.discard()
    fut.add_done_callback(discard)


def _full_segments(view):
    # The full hot segments of a HotView (before its current one), oldest first.
    if view.current is None:
        return []
    return [k for k in view.segments if k < view.current]


def _limit(hot, k):
    try:
        fd = os.open(segment_path(hot, k), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return 0
    try:
        return int.from_bytes(os.pread(fd, 8, 0), "little", signed=True)
    finally:
        os.close(fd)


def past_early_fill(limit, segment_size):
    """Whether a current segment's ``limit`` is past ARCHIVER_EARLY_FILL_PERCENT % of the
    segment (its ``segment_size`` bytes): the oldest full hot segment is due then."""
    return limit * 100 > segment_size * ARCHIVER_EARLY_FILL_PERCENT


@dataclasses.dataclass(frozen=True)
class HotView:
    """What an archiver saw in the hot directory at one listing: ``segments`` (oldest first),
    ``newest`` and ``current`` (the segment being written: the newest, or the one before it
    when the newest is a spare made ahead, with no record yet; both None in an empty
    directory), the current one's limit, and, after ``run_once``, whether due segments were
    left (``pending``: one not settled yet, or more than a batch) and when the age rule makes
    the next one due (``age_due_ns``, ``time.time_ns``; None: never by age)."""
    segments: tuple
    newest: typing.Optional[int]
    current: typing.Optional[int]
    current_limit: int
    pending: bool = False
    age_due_ns: typing.Optional[int] = None


def hot_view(hot):
    """The ``HotView`` of the hot directory ``hot`` now."""
    segs = tuple(list_segments(hot))
    if not segs:
        return HotView(segs, None, None, 0)
    newest = segs[-1]
    limit = _limit(hot, newest)
    if len(segs) >= 2 and limit <= FIRST_RECORD_OFFSET:
        # the newest is a spare made ahead (or just rolled into): the one before is current
        return HotView(segs, newest, segs[-2], _limit(hot, segs[-2]))
    return HotView(segs, newest, newest, limit)


class _Watch:
    """An archiver's cheap look between listings: whether the segment after the newest
    appeared (a roll, or a spare made ahead), the spare got records (the writer rolled into
    it), or the current segment's limit changed (through descriptors kept open: one pread and
    one lstat a look, no listing). ``changed_ns``: when it last saw a change."""

    def __init__(self, view, next_path, current_fd, newest_fd, segment_size, now):
        self.view, self._next_path = view, next_path
        self._current_fd, self._newest_fd = current_fd, newest_fd
        self._segment_size = segment_size
        self.limit = view.current_limit
        self.changed_ns = now

    @classmethod
    def open(cls, hot, view, segment_size, now):
        if view.current is None:
            return cls(view, segment_path(hot, 0), None, None, segment_size, now)
        current = _open_quiet(segment_path(hot, view.current))
        newest = None if view.newest == view.current else \
            _open_quiet(segment_path(hot, view.newest))
        return cls(view, segment_path(hot, view.newest + 1), current, newest, segment_size, now)

    def look(self, now):
        """True if the archiver must list the hot directory again (something changed that
        may make a segment due)."""
        if os.path.lexists(self._next_path):
            self.changed_ns = now
            return True
        if self._newest_fd is not None and _pread_limit(self._newest_fd) > FIRST_RECORD_OFFSET:
            self.changed_ns = now
            return True
        if self._current_fd is None:
            return False
        limit = _pread_limit(self._current_fd)
        if limit == self.limit:
            return False
        self.changed_ns = now
        crossed = past_early_fill(limit, self._segment_size) and \
            not past_early_fill(self.limit, self._segment_size)
        self.limit = limit
        return crossed

    def close(self):
        for fd in (self._current_fd, self._newest_fd):
            if fd is not None:
                os.close(fd)
        self._current_fd = self._newest_fd = None


def _open_quiet(path):
    try:
        return os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return None


def _pread_limit(fd):
    return int.from_bytes(os.pread(fd, 8, 0), "little", signed=True)


@dataclasses.dataclass
class ArchivedSegment:
    """An archived segment opened for reading (``ArchiveTier.open_segment``): ``path``, the
    archived file (the file to map when it is stored uncompressed; else only its name in
    messages), and ``fd``, a memory file holding the decompressed segment (``memfd_create``:
    it has no name, and the kernel frees it with its last descriptor or mapping, a killed
    reader's too) or None. ``close()`` closes ``fd`` (a mapping of it stays valid)."""
    path: str
    fd: typing.Optional[int]

    def close(self):
        """Close the memory file's descriptor (its mappings keep its pages)."""
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


@dataclasses.dataclass
class _Ahead:
    """The next compressed segment, being decompressed by the read-ahead thread into the
    memory file ``fd`` through ``mapping``; ``done`` its Future."""
    index: int
    path: str
    fd: int
    mapping: mmap.mmap
    done: typing.Any

    def discard(self):
        try:
            self.done.result()
        except Exception:
            pass
        self.mapping.close()
        os.close(self.fd)


def _memory_file(name, size):
    """A memory file of ``size`` bytes (anonymous: freed by the kernel with its last user)
    and a writable mapping of it."""
    fd = os.memfd_create(f"mappedbus-archived-{name}", os.MFD_CLOEXEC)
    try:
        os.ftruncate(fd, size)
        return fd, mmap.mmap(fd, size)
    except BaseException:
        os.close(fd)
        raise


def _decompress_into(src, how, expected, path, mapping):
    # In the read-ahead thread: one call that lets the GIL go (the library's, for every frame
    # of a seekable .zst), then copies into the mapping with the GIL held; no system call that
    # would wait for the GIL again. One thread: the reader's is the other core's.
    decompress_into(src, how, expected, path, mapping)


class ArchiveTier:
    """A reader's view of a bus's archive: which segments it holds, and a segment's bytes to
    map (``open_segment``: the archived file itself when uncompressed, else a memory file the
    kernel frees with the process, a killed one's too). While a reader reads compressed
    segment k, segment k+1 is decompressed ahead in a background thread (its file read and
    its memory file made by the reader's thread, so that the background thread waits for the
    GIL at most twice); ``close()`` drops what was not used."""

    def __init__(self, cfg, meta, *, allow_foreign=False, ahead=True):
        self.cfg, self.meta, self._allow_foreign = cfg, meta, allow_foreign
        self._checked = False
        self._read_ahead = ahead    # decompress the next segment ahead (readers; not tools)
        self._ahead = None          # _Ahead: the next segment, or None
        self._pool = None

    def _check(self):
        if self._checked:
            return
        theirs = read_meta(os.path.join(self.cfg.dir, META_FILE), allow_foreign=self._allow_foreign)
        if theirs is not None and theirs.id != self.meta.id:
            raise BusMismatchError(f"{self.cfg.dir!r} is the archive of bus {theirs.id}, not "
                                   f"of bus {self.meta.id}")
        self._checked = True

    def segments(self):
        """``{index: file name}`` of the archived segments."""
        if not os.path.isdir(self.cfg.dir):
            return {}
        self._check()
        return list_archived(self.cfg.dir)

    def has(self, index):
        """Whether segment ``index`` is archived (its names looked up, no listing)."""
        if not os.path.isdir(self.cfg.dir):
            return False
        self._check()
        return find_archived(self.cfg.dir, index) is not None

    def _source(self, index, name):
        """(path, how, compressed bytes) of archived segment ``index``."""
        path = os.path.join(self.cfg.dir, name)
        found = archive_index(name)
        if found is None or found[0] != index:
            raise ValueError(f"{name!r} is not an archive name of segment {index}")
        return path, found[1], _read_all(path, self._allow_foreign)

    def open_segment(self, index):
        """``ArchivedSegment`` of archived segment ``index`` (the caller closes it once
        mapped); FileNotFoundError if it is not archived. It looks up that segment's names,
        not the archive's listing: a replay of a long archive costs the same per segment."""
        name = None
        if os.path.isdir(self.cfg.dir):
            self._check()
            name = find_archived(self.cfg.dir, index)
        if name is None:
            self._drop_ahead()
            raise FileNotFoundError(f"segment {index} is not in the archive {self.cfg.dir!r}")
        if not name.endswith((".zst", ".lz4")):
            self._drop_ahead()
            return ArchivedSegment(os.path.join(self.cfg.dir, name), None)
        size = mapped_size(self.meta.segment_size)
        found = None
        if self._ahead is not None and self._ahead.index == index:
            ahead, self._ahead = self._ahead, None
            try:
                ahead.done.result()
                found = ArchivedSegment(ahead.path, ahead.fd)
                ahead.mapping.close()
            except Exception:
                ahead.discard()     # decompressed again below: its error raised from here
        self._drop_ahead()
        if found is None:
            path, how, src = self._source(index, name)
            fd, m = _memory_file(name, size)
            try:
                with m:
                    _decompress_into(src, how, size, path, m)
            except BaseException:
                os.close(fd)
                raise
            found = ArchivedSegment(path, fd)
        nxt = find_archived(self.cfg.dir, index + 1) if self._read_ahead else None
        if nxt is not None and nxt.endswith((".zst", ".lz4")):
            self._start_ahead(index + 1, nxt, size)
        return found

    def _start_ahead(self, index, name, size):
        import concurrent.futures
        try:
            path, how, src = self._source(index, name)
        except OSError:
            return                  # moved or removed meanwhile: read when (if) it is needed
        fd, m = _memory_file(name, size)
        if self._pool is None:
            self._pool = concurrent.futures.ThreadPoolExecutor(
                1, thread_name_prefix="mappedbus-archive-ahead")
        self._ahead = _Ahead(index, path, fd, m,
                             self._pool.submit(_decompress_into, src, how, size, path, m))

    def _drop_ahead(self):
        if self._ahead is not None:
            ahead, self._ahead = self._ahead, None
            ahead.discard()

    def close(self):
        """Drop a segment decompressed ahead and not used; stop the thread."""
        self._drop_ahead()
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None


@dataclasses.dataclass(frozen=True)
class ArchiveRequest:
    """What a writer asked of the archive: ``cfg`` (the defaults filled in, for a bus without
    one yet) and ``given``, the names of the ``ArchiveConfig`` fields it set itself (the
    others are the bus's, for a bus that has an archive)."""
    cfg: ArchiveConfig
    given: frozenset


def check_archive(archive, after, age, compress, retain_segments, retain_bytes, retain_age,
                  hot_segments, hot_bytes, hot_age):
    """The writer's archive arguments as an ``ArchiveRequest`` (None without ``archive``),
    checked at once; None for an argument means "the bus's, else the default"."""
    if archive is None:
        if any(v is not None for v in (after, age, compress, retain_segments, retain_bytes,
                                       retain_age)):
            raise ValueError("archive_after, archive_age, compress and archive_retain_* apply "
                             "to an archive: give archive=DIR too")
        return None
    if hot_segments or hot_bytes or hot_age:
        raise ValueError("retain_segments/retain_bytes/retain_age would delete hot segments "
                         "before they are archived: with archive=, the hot tier keeps "
                         "archive_after segments (and archive_age), and the archive's "
                         "retention is archive_retain_segments/bytes/age")
    for name, v in (("archive_after", after), ("archive_retain_segments", retain_segments),
                    ("archive_retain_bytes", retain_bytes)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 0):
            raise ValueError(f"{name} must be a non-negative integer, got {v!r}")
    for name, v in (("archive_age", age), ("archive_retain_age", retain_age)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0):
            raise ValueError(f"{name} must be a non-negative number of seconds, got {v!r}")
    if compress not in (None, "none", "zstd", "lz4"):
        raise ValueError(f"compress must be None, 'zstd' or 'lz4', got {compress!r}")
    path = os.path.abspath(os.fspath(archive))
    if "\n" in path:
        raise ValueError(f"archive path {path!r} cannot be stored in bus.meta")
    given = {"dir"} | {name for name, v in (
        ("after", after), ("age_ms", age), ("compress", compress),
        ("retain_segments", retain_segments), ("retain_bytes", retain_bytes),
        ("retain_age_ms", retain_age)) if v is not None}
    cfg = ArchiveConfig(dir=path, after=1 if after is None else after,
                        age_ms=int(round((age or 0) * 1000)),
                        compress=compress or "none", retain_segments=retain_segments or 0,
                        retain_bytes=retain_bytes or 0,
                        retain_age_ms=int(round((retain_age or 0) * 1000)))
    return ArchiveRequest(cfg, frozenset(given))


def settle_meta(hot, meta, request, *, mode=0o600, allow_foreign=False):
    """The archive this writer applies: the ``ArchiveRequest``'s, written into ``bus.meta`` if
    the bus has none yet, else the bus's own, which what it set must match (ValueError: fixed
    once set); a writer that asks for none still archives a bus that has one. None: no
    archive."""
    from ..formats.archive import archive_config
    mpath = os.path.join(hot, META_FILE)
    have = archive_config(meta, mpath)
    if request is None:
        return have
    cfg = request.cfg
    if have is not None and all(getattr(have, f) == getattr(cfg, f) for f in request.given):
        return have
    if have is not None:
        raise ValueError(f"{mpath!r} has the archive {have}; this writer asked for {cfg}: the "
                         f"archive settings are fixed once set")
    write_meta(mpath, dataclasses.replace(meta, extra=tuple(meta.extra) + cfg.to_extra()),
               mode=mode, exclusive=False)
    fsync_dir(hot)
    return cfg


def archived_segment(bus_path, index, allow_foreign=False):
    """For readers that open segments one by one (work groups): the ``ArchivedSegment`` of
    segment ``index`` of the rolling bus ``bus_path`` in its archive (``ArchiveTier.open_segment``:
    a compressed one in a memory file the kernel frees with the process; the caller closes it
    once mapped), or None if the bus has no archive or the segment is not there."""
    from ..formats.archive import archive_config
    from .directory import read_bus_meta
    meta = read_bus_meta(bus_path, allow_foreign=allow_foreign)
    cfg = None if meta is None else archive_config(meta, os.path.join(bus_path, META_FILE))
    if cfg is None:
        return None
    try:
        return ArchiveTier(cfg, meta, allow_foreign=allow_foreign, ahead=False).open_segment(index)
    except FileNotFoundError:
        return None


def all_segments(bus_path, allow_foreign=False):
    """The segments of the rolling bus ``bus_path`` in either tier, oldest first."""
    from ..formats.archive import archive_config
    from .directory import read_bus_meta
    segs = set(list_segments(bus_path))
    meta = read_bus_meta(bus_path, allow_foreign=allow_foreign)
    cfg = None if meta is None else archive_config(meta, os.path.join(bus_path, META_FILE))
    if cfg is not None:
        segs |= set(ArchiveTier(cfg, meta, allow_foreign=allow_foreign).segments())
    return sorted(segs)


class ArchiverProcess:
    """The archiver as a child process of the writer (``python -m
    mappedbus_py.rolling._archiver_main``), so that moving and compressing never wait for the writer's
    GIL: the same ``Archiver`` steps in the child's main thread. The child dies with the writer
    (``PR_SET_PDEATHSIG``, and the end of its stdin); a byte on its stdin is a ``wake()``; an
    error it meets is written back on its stdout and raised by ``stop()``."""

    def __init__(self, hot, meta, cfg, *, mode=0o600, allow_foreign=False):
        self.hot, self.meta, self.cfg = os.fspath(hot), meta, cfg
        self._mode, self._allow_foreign = mode, allow_foreign
        self._proc = None
        self.error = None
        self.behind = 0             # segments due to move at the writer's last roll
        self.most_behind = 0        # the most seen at a roll
        self._warned = False

    def start(self):
        """Start the child."""
        import subprocess
        import sys
        args = [sys.executable, "-m", "mappedbus_py.rolling._archiver_main", self.hot,
                oct(self._mode), "1" if self._allow_foreign else "0"]
        env = dict(os.environ)
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH")
                                    else "")
        self._proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      env=env, close_fds=True, preexec_fn=_die_with_parent)
        self._wait_ready()

    def _wait_ready(self):
        # The child's first byte says it runs (imported, its archiver made): a writer that
        # wrote at once would otherwise fill segments for as long as the interpreter starts
        # (about 0.2 s on an idle machine, a second or more on a loaded one) with nobody
        # moving them. An error instead (its first line) is raised here.
        import select
        fd = self._proc.stdout.fileno()
        deadline = time.monotonic() + ARCHIVER_START_TIMEOUT_S
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                self._proc.kill()
                self._proc.wait()
                raise MappedBusError(f"the archiver of {self.hot!r} did not start within "
                                     f"{ARCHIVER_START_TIMEOUT_S:g} s")
            r, _, _ = select.select([fd], [], [], left)
            if r:
                break
        first = os.read(fd, 1)
        if first == _READY:
            return
        rest = first + self._proc.stdout.read()
        self._proc.wait()
        self._proc = None
        raise MappedBusError(f"the archiver of {self.hot!r} did not start: "
                             f"{rest.decode(errors='replace').strip() or 'it exited'}")

    def wake(self):
        """Look now (the writer rolled)."""
        try:
            os.write(self._proc.stdin.fileno(), b"w")
        except (BlockingIOError, BrokenPipeError, OSError):
            pass

    def rolled(self):
        """The writer rolled: ``wake()``, then the policy when the archiver falls behind (a
        writer faster than the archiver can copy, compress and fsync on this machine): the
        segments due to move are counted (``behind``, the most in ``most_behind``) and, the
        first time more than ``ARCHIVE_BEHIND_WARN`` are due, a ``RuntimeWarning`` says so.
        The writer never waits for the archiver; the hot directory grows meanwhile."""
        self.wake()
        self.behind = len(Archiver(self.hot, self.meta, self.cfg).candidates())
        self.most_behind = max(self.most_behind, self.behind)
        if self.behind > ARCHIVE_BEHIND_WARN and not self._warned:
            import warnings
            self._warned = True
            warnings.warn(f"the archiver of {self.hot!r} is {self.behind} segments behind "
                          f"(archive_after={self.cfg.after}): this writer fills segments "
                          f"faster than they are archived on this machine, and the hot "
                          f"directory grows until it catches up (docs/journal.md, Costs)",
                          RuntimeWarning, stacklevel=4)

    def candidates(self):
        """The hot segments due to move (as the child sees them)."""
        return Archiver(self.hot, self.meta, self.cfg).candidates()

    def _due(self):
        return bool(self.candidates()) or bool(
            archive_retention_plan(self.cfg, self.meta, list_archived(self.cfg.dir)))

    def wait_idle(self, timeout):
        """Wait until no segment is due to move and the archive's retention has nothing to
        remove (``timeout`` seconds at most): True if so."""
        deadline = time.monotonic() + timeout
        while self._due():
            if time.monotonic() >= deadline or self._proc.poll() is not None:
                return not self._due()
            self.wake()
            time.sleep(0.01)
        return True

    def stop(self):
        """End the child (closing its stdin) and wait for it; its error, if any, in ``error``."""
        if self._proc is None:
            return
        try:
            self._proc.stdin.close()
        except OSError:
            pass
        try:
            out = self._proc.stdout.read()
            self._proc.wait(timeout=60)
        except Exception:
            self._proc.kill()
            self._proc.wait()
            out = b""
        self._proc.stdout.close()
        self._proc = None
        if out.strip():
            self.error = MappedBusError(f"the archiver of {self.hot!r}: "
                                        f"{out.decode(errors='replace').strip()}")


def _die_with_parent():
    # In the child, before exec: SIGKILL when the writer that started it dies.
    import ctypes
    import signal
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL))   # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def child_main(argv):
    import select
    import sys
    from ..formats.archive import archive_config
    from .directory import read_bus_meta
    hot, mode, allow_foreign = argv[0], int(argv[1], 8), argv[2] == "1"
    meta = read_bus_meta(hot, allow_foreign=allow_foreign)
    cfg = archive_config(meta, os.path.join(hot, META_FILE))
    a = Archiver(hot, meta, cfg, mode=mode, allow_foreign=allow_foreign)
    stdin = sys.stdin.fileno()
    os.write(sys.stdout.fileno(), _READY)
    reported = None
    woken = True
    while True:
        try:
            wait = a.step(woken)
        except Exception as e:          # reported once to the writer; retried meanwhile
            wait = ARCHIVE_POLL_S
            if repr(e) != reported:
                reported = repr(e)
                os.write(sys.stdout.fileno(), f"{type(e).__name__}: {e}\n".encode())
        r, _, _ = select.select([stdin], [], [], wait)
        woken = bool(r)
        if r and not os.read(stdin, 4096):
            break                       # the writer closed (or died)
    a.stop()

