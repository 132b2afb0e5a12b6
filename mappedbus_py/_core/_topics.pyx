# cython: language_level=3, embedsignature=True
"""The topics file of a framed bus: topic names mapped to small ids, append-only, safe under
racing writers (docs/design/frames.md, "Topics file"; layout.py TOPICS_*, TOPIC_*).

A writer names a topic once (``id_of``): it scans the published entries; absent, it claims the
next entry by compare-and-swap on the count, writes the name, then publishes its length with a
release store, before any message carries the id. Racing writers may publish one name twice:
a topic is the set of its ids (``ids_of``), so readers see the same messages either way. The
file is opened with the side files' safe-open rules (no links, regular files, owner and mode).
"""
import os
import time

from libc.stdint cimport int32_t, int64_t
from libc.string cimport memcpy
from posix.mman cimport mmap, munmap, PROT_READ, PROT_WRITE, MAP_SHARED, MAP_FAILED

from ._atomic cimport load_acquire_i64, load_acquire_i32, cas_i64, cas_i32, store_release_i32

from ..errors import CorruptBusError, TopicsFullError
from ..formats.files import open_file
from ..formats.layout import TOPICS_FILE_SIZE as _LAYOUT_SIZE

__all__ = ("TopicsFile", "check_topic_name")

cdef extern from "_frames.h" nogil:
    int TOPICS_FILE_SIZE, TOPICS_VERSION, TOPICS_MAGIC_OFFSET, TOPICS_VERSION_OFFSET
    int TOPICS_COUNT_OFFSET, TOPICS_ENTRIES_OFFSET, TOPIC_ENTRY_SIZE, TOPICS_MAX
    int TOPIC_LENGTH_OFFSET, TOPIC_NAME_OFFSET, TOPIC_NAME_MAX
    long long TOPICS_MAGIC

assert TOPICS_FILE_SIZE == _LAYOUT_SIZE

# How long a writer waits for an entry a racer claimed but has not published yet before it
# claims its own (a duplicate id is harmless; a dead claimer's entry stays unpublished).
cdef double PUBLISH_WAIT_S = 0.002


def check_topic_name(name):
    """The UTF-8 bytes of a valid topic name: a str of 1 to TOPIC_NAME_MAX (56) bytes, no NUL
    or control characters. TypeError / ValueError naming the problem."""
    if not isinstance(name, str):
        raise TypeError(f"a topic is a str (or None), not {type(name).__name__}: {name!r}")
    raw = name.encode("utf-8")
    if not 1 <= len(raw) <= TOPIC_NAME_MAX:
        raise ValueError(f"topic {name!r} takes {len(raw)} bytes in UTF-8; a topic name "
                         f"takes 1 to {TOPIC_NAME_MAX}")
    if any(ord(c) < 32 or ord(c) == 127 for c in name):
        raise ValueError(f"topic {name!r} holds a control character")
    return raw


cdef class TopicsFile:
    """TopicsFile(path, *, writable=True, allow_foreign=False, mode=0o600)

    The topics file at ``path``, mapped shared. ``writable`` (a writer's): created, all zero,
    if absent, and ``id_of`` may name new topics; otherwise it must exist and is only read."""

    def __cinit__(self, path, *, bint writable=True, bint allow_foreign=False, mode=0o600):
        self.path = os.fspath(path)
        self.base = NULL
        self.writable = writable
        self._ids = {}
        self._names = {}
        self._scanned = 0
        flags = (os.O_RDWR | os.O_CREAT) if writable else os.O_RDONLY
        fd, st = open_file(self.path, flags, mode, allow_foreign=allow_foreign)
        try:
            if st.st_size != TOPICS_FILE_SIZE:
                if st.st_size > TOPICS_FILE_SIZE or not writable:
                    if st.st_size == 0 and not writable:
                        raise FileNotFoundError(f"{self.path!r} is not a topics file yet "
                                                f"(0 bytes)")
                    raise CorruptBusError(f"{self.path!r} is not a bus topics file: "
                                          f"{st.st_size} bytes, not {TOPICS_FILE_SIZE}")
                os.ftruncate(fd, TOPICS_FILE_SIZE)      # only ever grows it: zeros are valid
            prot = PROT_READ | PROT_WRITE if writable else PROT_READ
            p = mmap(NULL, TOPICS_FILE_SIZE, prot, MAP_SHARED, fd, 0)
            if p == MAP_FAILED:
                raise OSError(f"{self.path!r}: cannot map the topics file")
            self.base = <char *>p
            if writable:
                magic = cas_i64(self.base + TOPICS_MAGIC_OFFSET, 0, TOPICS_MAGIC)
                version = cas_i32(self.base + TOPICS_VERSION_OFFSET, 0, TOPICS_VERSION)
            else:
                magic = load_acquire_i64(self.base + TOPICS_MAGIC_OFFSET)
                version = load_acquire_i32(self.base + TOPICS_VERSION_OFFSET)
            if magic not in (0, TOPICS_MAGIC):
                raise CorruptBusError(f"{self.path!r} is not a bus topics file: its magic is "
                                      f"{magic:#x}")
            if version not in (0, TOPICS_VERSION):
                raise CorruptBusError(f"{self.path!r}: topics file version {version} is not "
                                      f"known (this version reads {TOPICS_VERSION})")
            self._load_count()
        except BaseException:
            self._unmap()
            os.close(fd)
            raise
        os.close(fd)        # the mapping stays; no lock is held on this file
        self.st_ino = st.st_ino
        self.st_dev = st.st_dev

    cdef _unmap(self):
        if self.base != NULL:
            munmap(self.base, TOPICS_FILE_SIZE)
            self.base = NULL

    def close(self):
        """Unmap. Closing twice is harmless."""
        self._unmap()

    @property
    def closed(self):
        return self.base == NULL

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __dealloc__(self):
        self._unmap()

    cdef int32_t _load_count(self) except -1:
        if self.base == NULL:
            raise ValueError("the topics file is closed")
        cdef int32_t c = load_acquire_i32(self.base + TOPICS_COUNT_OFFSET)
        if not 0 <= c <= TOPICS_MAX:
            raise CorruptBusError(f"{self.path!r}: topics file count {c} is outside "
                                  f"0..{TOPICS_MAX}")
        return c

    cdef object _entry_name(self, int32_t i):
        # Entry i's name once published; None while it is not.
        cdef char *e = self.base + TOPICS_ENTRIES_OFFSET + <int64_t>i * TOPIC_ENTRY_SIZE
        cdef int32_t n = load_acquire_i32(e + TOPIC_LENGTH_OFFSET)
        if n == 0:
            return None
        if not 0 < n <= TOPIC_NAME_MAX:
            raise CorruptBusError(f"{self.path!r}: topic entry {i + 1} has length {n} "
                                  f"(1..{TOPIC_NAME_MAX})")
        raw = e[TOPIC_NAME_OFFSET:TOPIC_NAME_OFFSET + n]
        try:
            name = raw.decode("utf-8")
            check_topic_name(name)
        except (UnicodeDecodeError, ValueError, TypeError) as err:
            raise CorruptBusError(f"{self.path!r}: topic entry {i + 1} holds no valid name "
                                  f"({err})") from None
        return name

    cdef int _scan(self) except -1:
        # Learn the entries published since the last scan (in id order: the lowest id of a
        # name is found first). Stops at the first unpublished one.
        cdef int32_t c = self._load_count()
        cdef int32_t i = self._scanned
        while i < c:
            name = self._entry_name(i)
            if name is None:
                break
            self._names[i + 1] = name
            self._ids.setdefault(name, i + 1)
            i += 1
        self._scanned = i
        return 0

    def names(self):
        """{id: name} of every published entry (an unpublished one is left out)."""
        cdef int32_t i, c = self._load_count()
        self._scan()
        out = dict(self._names)
        for i in range(self._scanned, c):
            name = self._entry_name(i)
            if name is not None:
                out[i + 1] = name
        return out

    def name_of(self, int topic_id):
        """The name of ``topic_id`` (1..TOPICS_MAX); None if the entry is not published."""
        if not 1 <= topic_id <= TOPICS_MAX:
            raise CorruptBusError(f"{self.path!r}: topic id {topic_id} outside 1..{TOPICS_MAX}")
        name = self._names.get(topic_id)
        if name is None and topic_id <= self._load_count():
            name = self._entry_name(topic_id - 1)
            if name is not None:
                self._names[topic_id] = name
        return name

    def ids_of(self, name):
        """Every published id named ``name`` (racing writers may have made two)."""
        check_topic_name(name)
        return sorted(i for i, n in self.names().items() if n == name)

    def id_of(self, name):
        """The id of topic ``name``, named now if it is new (a writable file): the lowest
        published id of that name. TopicsFullError when all TOPICS_MAX entries are taken."""
        cdef bytes raw = check_topic_name(name)
        cdef int32_t c, i
        cdef char *e
        tid = self._ids.get(name)
        if tid is not None:
            return tid
        if not self.writable:
            raise ValueError(f"{self.path!r} is opened read-only: it cannot name {name!r}")
        deadline = time.monotonic() + PUBLISH_WAIT_S
        while True:
            names = self.names()
            found = [i for i, n in names.items() if n == name]
            if found:
                tid = min(found)
                self._ids[name] = tid
                return tid
            c = self._load_count()
            if len(names) < c and time.monotonic() < deadline:
                time.sleep(0)       # a racer's entry, claimed, not yet published: maybe ours
                continue
            if c >= TOPICS_MAX:
                raise TopicsFullError(f"{self.path!r}: the topics file holds {TOPICS_MAX} "
                                      f"topics, none named {name!r}; topics name kinds of "
                                      f"messages, not keys")
            if cas_i32(self.base + TOPICS_COUNT_OFFSET, c, c + 1) != c:
                continue            # another writer claimed entry c: look again
            e = self.base + TOPICS_ENTRIES_OFFSET + <int64_t>c * TOPIC_ENTRY_SIZE
            memcpy(e + TOPIC_NAME_OFFSET, <char *>raw, len(raw))
            store_release_i32(e + TOPIC_LENGTH_OFFSET, <int32_t>len(raw))
            # (a racer may have published the name under a lower id meanwhile: the loop's
            # next look returns the lowest)

    @property
    def count(self):
        """Entries claimed so far (published or not)."""
        return self._load_count()
