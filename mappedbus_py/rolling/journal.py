"""A rolling writer's journal (docs/journal.md; formats in layout.py, "the journal"): what
reaches the disk and when (``SyncPolicy``: "none", "segment", "interval"; ``sync()``), and the
time index it appends to (``formats.timeindex``). ``RollingBusWriter`` holds one
``WriterJournal``; the archive tier is ``rolling.archive``.

What ``sync()`` does, in this order: fdatasync of every segment written since the last sync
(the current one included) and of their time indices, fdatasync of the consumers' registry and
the group files when they exist, then fsync of every directory a file was created, linked,
renamed or removed in since the last sync (the bus directory, its ``index``)."""
import dataclasses
import glob
import os
import threading

from ..errors import MappedBusError
from ..formats.archive import archive_config, find_archived
from ..formats.layout import (CONSUMERS_FILE, GROUP_DIR, GROUP_SUFFIX, SYNC_POLICIES,
                              TIME_INDEX_DIR, TIME_INDEX_META_KEY, segment_name,
                              time_index_name)
from ..formats.timeindex import append as _append_entry, create_index, open_for_append
from .directory import read_bus_meta, segment_path

__all__ = ("SyncPolicy", "check_sync", "WriterJournal", "fsync_dir", "add_meta_keys",
           "keeps_time_index", "settle_time_index")


@dataclasses.dataclass(frozen=True)
class SyncPolicy:
    """When a writer's records reach the disk: ``policy`` "none" (when the kernel writes the
    page cache back, or ``sync()``), "segment" (a segment and its index when the writer rolls
    out of it), "interval" (everything committed, every ``interval_s`` seconds, by a
    background thread)."""
    policy: str = "none"
    interval_s: float = 0.0


def check_sync(sync, sync_interval):
    """The writer's ``sync``/``sync_interval`` arguments as a ``SyncPolicy``, checked."""
    if sync not in SYNC_POLICIES:
        raise ValueError(f"sync must be one of {', '.join(map(repr, SYNC_POLICIES))}, got {sync!r}")
    if sync == "interval":
        if isinstance(sync_interval, bool) or not isinstance(sync_interval, (int, float)) \
                or not 0 < sync_interval <= 3600:
            raise ValueError(f"sync=\"interval\" needs sync_interval, a number of seconds in "
                             f"(0, 3600], got {sync_interval!r}")
        return SyncPolicy("interval", float(sync_interval))
    if sync_interval is not None:
        raise ValueError(f"sync_interval={sync_interval!r} applies to sync=\"interval\" only, "
                         f"not sync={sync!r}")
    return SyncPolicy(sync)


def fsync_dir(path):
    """fsync a directory (its entries: files created, linked, renamed or removed)."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fdatasync_path(p):
    # A file gone since (archived: the archiver synced it; removed by retention) needs nothing.
    try:
        fd = os.open(p, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except FileNotFoundError:
        return
    try:
        os.fdatasync(fd)
    finally:
        os.close(fd)


def add_meta_keys(hot, meta, pairs, *, mode=0o600):
    """Rewrite ``DIR/bus.meta`` with the key/value ``pairs`` added (same id), atomically, and
    fsync the directory; returns the new ``BusMeta``."""
    import dataclasses
    from ..formats.busmeta import write_meta
    from ..formats.layout import META_FILE
    new = dataclasses.replace(meta, extra=tuple(meta.extra) + tuple(pairs))
    write_meta(os.path.join(hot, META_FILE), new, mode=mode, exclusive=False)
    fsync_dir(hot)
    return new


def keeps_time_index(meta):
    """Whether the bus's ``bus.meta`` says it keeps a time index (``time_index=1``)."""
    return dict(meta.extra).get(TIME_INDEX_META_KEY) == "1"


def settle_time_index(hot, meta, asked, *, mode=0o600):
    """Whether this writer appends to the time index: the bus's setting; ``asked`` True adds
    it to a bus without one (``bus.meta``), False on a bus that keeps one is ValueError (its
    readers' seek_time counts on every writer's entries), None takes the bus's."""
    have = keeps_time_index(meta)
    if asked is None or asked == have:
        return have, meta
    if not asked:
        raise ValueError(f"{hot!r} keeps a time index (bus.meta time_index=1): every writer "
                         f"appends to it, time_index=False is refused")
    return True, add_meta_keys(hot, meta, ((TIME_INDEX_META_KEY, "1"),), mode=mode)


class WriterJournal:
    """One writer's time index descriptors and the files it must sync. Thread-safe where the
    ``interval`` thread meets the writer: the sets of descriptors, under ``_lock``; the
    descriptors it syncs are its own (dups), closed once synced and no longer current."""

    def __init__(self, path, policy, *, time_index=True, mode=0o600, allow_foreign=False):
        self.path = os.fspath(path)
        self.policy = policy
        self.time_index = time_index
        self._mode = mode
        self._allow_foreign = allow_foreign
        self._lock = threading.Lock()
        self._sync_lock = threading.Lock()
        self._segment_fds = {}      # segment index -> a dup'd descriptor to sync
        self._index_fds = {}        # segment index -> an O_APPEND descriptor (owned here)
        self._dirs = set()          # directories to fsync at the next sync
        self._pending = set()       # "none": paths of files left unsynced (not kept open)
        self._current = -1
        self._tix = None            # (segment, fd) the writer appends to now
        self._meta = None
        self._stop = threading.Event()
        self._thread = None
        self.error = None           # the interval thread's last failure (raised by sync())

    # -- the writer's calls --------------------------------------------------------------------

    def open(self, meta):
        """Start: remember ``meta`` (bus id, sizes); with "interval", the syncing thread."""
        self._meta = meta
        self._stop.clear()
        if self.policy.policy != "none":
            self._dirs.add(self.path)       # bus.meta may just have been made
        if self.policy.policy == "interval" and self._thread is None:
            self._thread = threading.Thread(target=self._run, name=f"mappedbus-sync {self.path}",
                                            daemon=True)
            self._thread.start()

    def entered(self, index, seg_fd, made):
        """The writer entered segment ``index`` (read-only descriptor ``seg_fd``; ``made``: a
        segment was linked since the last call). "segment": the one it left is synced now."""
        left = self._current
        with self._lock:
            if index not in self._segment_fds:
                self._segment_fds[index] = os.dup(seg_fd)
            self._current = index
            if made:
                self._dirs.add(self.path)
            if self.policy.policy == "none" and 0 <= left != index and left in self._segment_fds:
                # Nothing syncs it unless sync() is called: kept by path, not descriptor.
                os.close(self._segment_fds.pop(left))
                self._pending.add(os.path.join(self.path, segment_name(left)))
        if self.policy.policy == "segment" and 0 <= left != index:
            self.sync(only_before=index)

    def note_time(self, index, time_ns, position):
        """Append (time_ns, position) to segment ``index``'s index (made at the first entry)."""
        tix = self._tix
        if tix is None or tix[0] != index:
            tix = self._open_index(index)
        _append_entry(tix[1], time_ns, position)
        if os.fstat(tix[1]).st_nlink == 0 and self._kept(index):
            # The segment moved to the archive since this descriptor was opened (this writer
            # stalled between its write and this append): the entry went to the unlinked file.
            # Appended again by path, it makes the segment's hot index again, which seek_time
            # reads with the archived one and the next archiver merges into it
            # (docs/design/journal.md, "late entries"). An append before the move's unlink is
            # read by the move after its unlink.
            tix = self._open_index(index)
            _append_entry(tix[1], time_ns, position)

    def _kept(self, index):
        # Whether segment ``index`` is still hot or in the archive: its late entry belongs in
        # its index. Not when retention removed it (no index made for a segment that is gone).
        if os.path.lexists(segment_path(self.path, index)):
            return True
        try:
            meta = read_bus_meta(self.path, allow_foreign=self._allow_foreign)
            cfg = archive_config(meta) if meta is not None else None
            return cfg is not None and find_archived(cfg.dir, index) is not None
        except (OSError, MappedBusError):
            return False

    def _open_index(self, index):
        meta = self._meta
        d = os.path.join(self.path, TIME_INDEX_DIR)
        fresh = not os.path.lexists(d)
        p = create_index(self.path, meta.id, index, meta.segment_size, meta.record_size,
                         mode=self._mode)
        fd = open_for_append(p, allow_foreign=self._allow_foreign)
        with self._lock:
            old = self._index_fds.get(index)
            self._index_fds[index] = fd
            if fresh:
                self._dirs.add(self.path)
            self._dirs.add(d)
            if self._tix is not None and self._tix[0] != index and self.policy.policy == "none":
                # Nothing syncs the old one unless sync() is called: kept by path.
                os.close(self._index_fds.pop(self._tix[0]))
                self._pending.add(os.path.join(d, time_index_name(self._tix[0])))
            self._tix = (index, fd)
        if old is not None:
            os.close(old)
        return self._tix

    def sync(self, only_before=None):
        """Everything committed so far (``only_before``: in segments below it) to the disk:
        the module docstring's order. Raises what the interval thread met, if anything."""
        with self._sync_lock:       # one sync at a time: a sync closes what it synced
            self._sync(only_before)

    def _sync(self, only_before):
        with self._lock:
            segs = dict(self._segment_fds)
            idxs = dict(self._index_fds)
            dirs, self._dirs = self._dirs, set()
            pending, self._pending = (self._pending, set()) if only_before is None else (set(), self._pending)
            current = self._current
        try:
            for p in sorted(pending):
                _fdatasync_path(p)
            for k in sorted(segs):
                if only_before is None or k < only_before:
                    os.fdatasync(segs[k])
            for k in sorted(idxs):
                if only_before is None or k < only_before:
                    os.fdatasync(idxs[k])
            if only_before is None:
                self._sync_side_files()
            for d in sorted(dirs):
                fsync_dir(d)
        except BaseException:
            with self._lock:
                self._dirs |= dirs
                self._pending |= pending
            raise
        with self._lock:
            for k in list(self._segment_fds):
                if k != current and (only_before is None or k < only_before):
                    os.close(self._segment_fds.pop(k))
            tix = self._tix[0] if self._tix is not None else None
            for k in list(self._index_fds):
                if k != tix and (only_before is None or k < only_before):
                    os.close(self._index_fds.pop(k))
        if self.error is not None:
            e, self.error = self.error, None
            raise e

    def _sync_side_files(self):
        paths = [os.path.join(self.path, CONSUMERS_FILE)]
        paths += glob.glob(os.path.join(glob.escape(self.path), GROUP_DIR, "*" + GROUP_SUFFIX))
        for p in paths:
            _fdatasync_path(p)

    def _run(self):
        while not self._stop.wait(self.policy.interval_s):
            try:
                self.sync()
            except Exception as e:      # kept for the writer's next sync() to raise
                self.error = e

    def close(self):
        """Stop the thread; "segment" and "interval" sync what is left (a clean close leaves
        nothing unsynced); close every descriptor."""
        errors = []
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
        if self.policy.policy != "none" and self._meta is not None:
            try:
                self.sync()
            except BaseException as e:
                errors.append(e)
        with self._lock:
            for fd in list(self._segment_fds.values()) + list(self._index_fds.values()):
                os.close(fd)
            self._segment_fds.clear()
            self._index_fds.clear()
            self._dirs.clear()
        self._tix = None
        self._current = -1
        if errors:
            raise errors[0]
