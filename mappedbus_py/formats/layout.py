"""The Mappedbus 0.5.1 wire layout, written once.

All integers are little-endian (the byte order of x86-64 and aarch64, which the Java
original writes through ``sun.misc.Unsafe`` in native order). Offsets are in bytes.

::

     0               8
     +---------------+------------------------+------------------------+----
     | limit (int64) | record 0               | record 1               | ...
     +---------------+------------------------+------------------------+----
                     ^ FIRST_RECORD_OFFSET

     one record (a "slot") = HEADER_SIZE + record_size bytes, whatever the payload uses:
     +----------------+------------------+--------------------------------------+
     | status (int32) | metadata (int32) | payload: record_size bytes           |
     +----------------+------------------+--------------------------------------+
     ^ STATUS_OFFSET  ^ METADATA_OFFSET  ^ PAYLOAD_OFFSET
       0 = not set      object message: its type id
       1 = committed    byte array:     the number of payload bytes used
       2 = rolled back

``limit`` is the offset just past the last allocated slot: 0 in a new file, set to
``FIRST_RECORD_OFFSET`` by the first writer (compare-and-swap 0 -> 8), then moved by
fetch-and-add of ``slot_size(record_size)`` for every record. It may point past the end
of the file after a failed write (see ``golden/full-r16.bus``).

Neither ``record_size`` nor ``file_size`` is stored in the file: every process must be
given the same values. The file is ``mapped_size(file_size)`` bytes long (rounded up to
``PAGE_SIZE``); end-of-file checks use the unrounded ``file_size``.

Files around the wire format (this project's, never read by the Java original)
-----------------------------------------------------------------------------

A bus created by this project records what 0.5.1 never stores, in a *metadata file*::

    single-file bus   PATH                         the Mappedbus 0.5.1 file
                      PATH + META_SUFFIX           its metadata (kind=single)
    rolling bus       DIR/                         mode 0700
                      DIR/META_FILE                its metadata (kind=rolling)
                      DIR/segment_name(0)          "00000000000000000000.bus": segment 0, a
                      DIR/segment_name(1)          complete Mappedbus 0.5.1 file of segment_size
                      ...                          bytes that the Java original can read alone
                      DIR/TMP_PREFIX + "..."       a segment or metadata file being written;
                                                   linked or renamed into place once complete

A metadata file is UTF-8 text of at most META_MAX_BYTES: the line META_MAGIC, then one
``key=value`` per line (no spaces around ``=``; Java's Properties syntax). Unknown keys are
kept and ignored, so later formats can add some::

    format=1                       META_FORMAT
    kind=single | rolling
    id=<32 lowercase hex digits>   128 random bits made at creation: a bus deleted and
                                   recreated under the same path has another id
    created_ns=<int>               creation time, Unix epoch nanoseconds
    record_size=<int>              payload bytes per record
    file_size=<int>                (single) the logical file size
    inode=<int>                    (single) st_ino of the file it describes: a file recreated
                                   under PATH by a process that writes no metadata (the Java
                                   original) has another inode, so the old metadata no longer
                                   applies to it
    segment_size=<int>             (rolling) the logical size of every segment
    retain_segments=<int>          (rolling) retention; 0 means no limit
    retain_bytes=<int>
    retain_age_ms=<int>
    max_consumer_lag=<int>         (rolling) segments a registered consumer may lag behind
                                   the writers and still keep from retention; 0: none
    consumer_block_ms=<int>        (rolling) how long a writer waits for a lagging consumer
                                   (on_consumer_lag=block) before BusBackPressureError
    on_consumer_lag=expire | block (rolling) what happens to a consumer past max_consumer_lag

It is written to a temporary name in the same directory first, then linked into place
(created exclusively: one creator wins a race) or renamed over the old one, so nobody ever
reads half of it.

Readers park on a *wake file* beside the bus (``PATH + WAKE_SUFFIX``, or ``DIR/WAKE_FILE``
for a rolling bus), which writers of this project look at after each commit. It is
WAKE_FILE_SIZE bytes, all zero when new (a valid empty state), little-endian::

      0            8            12     16          64           68           72
      +------------+------------+------+-- zeros --+------------+------------+-- zeros --
      | magic i64  | version i32|      |           | parked i32 | armed i32  |
      +------------+------------+------+-----------+------------+------------+----------
      ^ WAKE_MAGIC_OFFSET       ^ WAKE_VERSION_OFFSET
                                       ^ WAKE_OPEN_LOCK_OFFSET: the byte openers lock
                                                   ^ WAKE_PARKED_OFFSET: readers parked now
                                                                ^ WAKE_ARMED_OFFSET: 1 once a
                                                     reader parked since the last wake; a writer
                                                     loads it after every commit, and wakes
                                                     only if it exchanges it from 1 to 0
      128             132                 256
      +---------------+-- zeros ----------+--------+--------+--------+-----
      | seq u32       |                   | slot 0 | slot 1 | ...    | slot WAKE_SLOT_COUNT-1
      +---------------+-------------------+--------+--------+--------+-----
      ^ WAKE_SEQ_OFFSET: the futex word: a writer that finds parked > 0 adds 1 and
        FUTEX_WAKEs it; a parker FUTEX_WAITs while it holds what it read

      one slot (WAKE_SLOT_SIZE bytes) per parking reader:
      +-----------+-------------+---------------------------------+
      | pid i32   | state i32   | taken_ns i64                    |
      +-----------+-------------+---------------------------------+
      ^ the slot's liveness byte (its first): held by its parker's OFD lock (_liveness.h),
        which the kernel drops when the parker dies; unlocked = free, whatever the words say
      ^ WAKE_SLOT_PID_OFFSET: the parker's pid, for people only (0 once let go)
                  ^ WAKE_SLOT_STATE_OFFSET: 0 idle, 1 parked (counted in parked); a dead
                    parker's park is undone by whoever takes its byte next
                                ^ WAKE_SLOT_START_OFFSET: when it was taken (Unix ns), for
                                  people only

The magic (WAKE_MAGIC, "MBUSWAK1") and version are set by compare-and-swap from zero by
whoever opens the file first. Version 2 (WAKE_VERSION): slots are held by OFD locks;
version 1 told them by pid and start time, and a file of version 1 is refused (stop the
processes of the bus and delete it). The protocol is in ``_wake.h``.

Named consumers keep their positions in a *consumer registry* beside the bus (``PATH +
CONSUMERS_SUFFIX``, or ``DIR/CONSUMERS_FILE`` for a rolling bus), CONSUMERS_FILE_SIZE
bytes, all zero when new, little-endian; version 2 (CONSUMERS_VERSION) knows holders by OFD
locks, version 1 (by pid) is refused. The protocol is in ``_consumers.h``::

      0            8             12     16        64                     72
      +------------+-------------+------+-- zeros -+----------------------+-- zeros --
      | magic i64  | version i32 |      |          | lock i64             |
      +------------+-------------+------+----------+----------------------+-----------
      ^ CONSUMERS_MAGIC_OFFSET   ^ CONSUMERS_VERSION_OFFSET
                                        ^ CONSUMERS_OPEN_LOCK_OFFSET: the byte openers lock
                                                  ^ CONSUMERS_LOCK_OFFSET: the lock is an
        OFD lock on this word's first byte (_liveness.h), taken without blocking and retried
        for a bounded time (BusLockTimeoutError); the kernel drops it when its holder dies.
        The word shows the holder's pid, for people only. Held for structural changes only
        (an entry made, claimed, expired, removed), never for a commit

      128            256            384
      +--------------+--------------+-----+------------------------------------------
      | entry 0      | entry 1      | ... | entry CONSUMER_ENTRY_COUNT - 1
      +--------------+--------------+-----+------------------------------------------
      ^ CONSUMERS_ENTRIES_OFFSET, CONSUMER_ENTRY_SIZE bytes each

      one entry:
      0          4          8          12         16            24              32
      +----------+----------+----------+----------+-------------+---------------+
      | gen i32  | flags i32| pid i32  | zero     | start i64   | position i64  |
      +----------+----------+----------+----------+-------------+---------------+
      32                  40                  48                       64                  128
      +-------------------+-------------------+------------------------+-------------------+
      | committed_ns i64  | created_ns i64    | bus id: 16 bytes       | name: 64 bytes    |
      +-------------------+-------------------+------------------------+-------------------+
      CONSUMER_GEN_OFFSET: even = free, odd = in use; +1 when an entry is made and when it
        is removed (under the lock), so a lock-free reader of name, bus id and created_ns
        (read between two equal odd gens) never sees a torn entry
      CONSUMER_FLAGS_OFFSET: CONSUMER_FLAG_EXPIRED (bit 0) once a writer's retention
        expired it (cleared by its next commit)
      the entry's liveness byte (its first, at CONSUMER_GEN_OFFSET): held by the reader
        holding the name, by an OFD lock through a description of its own (_liveness.h); a
        second live holder is refused, a dead one's name is taken at once
      CONSUMER_PID_OFFSET, CONSUMER_START_OFFSET: the holder's pid and when it took the
        name (Unix ns), for people only
      CONSUMER_POSITION_OFFSET: the committed position (where the consumer goes on reading,
        a position as readers use them), stored with one atomic 8-byte store by its holder
      CONSUMER_COMMITTED_NS_OFFSET: when it was last committed (Unix ns, a coarse clock)
      CONSUMER_CREATED_NS_OFFSET: when the entry was made (Unix ns)
      CONSUMER_BUS_ID_OFFSET: the bus's id (metadata ``id`` as 16 bytes; zeros for a file
        without metadata): an entry of a bus since recreated under the path starts anew
      CONSUMER_NAME_OFFSET: 1 to CONSUMER_NAME_MAX bytes of UTF-8, no NUL or control
        characters, padded with NUL

Writers of this project say which slots they hold in a *writers file* beside the bus
(``PATH + WRITERS_SUFFIX``, or ``DIR/WRITERS_FILE`` for a rolling bus), WRITERS_FILE_SIZE
bytes, all zero when new, little-endian (docs/design/side-files.md, "The writers file"; the
protocol is in ``_writers.h``)::

      0            8             12                         64
      +------------+-------------+-- zeros -----------------+--------+--------+-----+
      | magic i64  | version i32 |                          | slot 0 | slot 1 | ... | slot 254
      +------------+-------------+--------------------------+--------+--------+-----+
      ^ WRITERS_MAGIC_OFFSET     ^ WRITERS_VERSION_OFFSET   ^ WRITERS_SLOTS_OFFSET,
        (WRITERS_MAGIC "MBUSWRT1", WRITERS_VERSION, set by    WRITER_SLOT_SIZE bytes each (a
        compare-and-swap from zero by the first opener)       cache line its writer owns),
                                                              WRITER_SLOT_COUNT slots

      one slot:
      0              8              16          20         24               32        64
      +--------------+--------------+-----------+----------+----------------+--- zeros -+
      | begin i64    | end i64      | pid i32   | zero     | taken_ns i64   |           |
      +--------------+--------------+-----------+----------+----------------+-----------+
      WRITER_BEGIN_OFFSET, WRITER_END_OFFSET: the writer's current claim [begin, end) in bus
        positions (a rolling bus: global positions), published after each fetch-and-add,
        begin then end; begin >= end: none
      WRITER_PID_OFFSET, WRITER_TAKEN_NS_OFFSET: who took the slot and when (Unix ns), for
        people only: no decision reads them
      the slot's liveness byte is its own first byte (``writers_live_byte``): its holder keeps
      an OFD write lock on it (``_liveness.h``); unlocked means the holder is gone

The Spark connector's exactly-once sink keeps a *commit log* beside the bus (``PATH +
COMMIT_LOG_SUFFIX``, or ``DIR/COMMIT_LOG_FILE`` for a rolling bus): an append-only file of
COMMIT_ENTRY_SIZE-byte entries, little-endian, appended under an exclusive file lock
(docs/files-and-rolling.md, "Spark sink commit log"; ``mappedbus_py.formats.commitlog`` reads it)::

      0           4          8              16             24           32            36
      +-----------+----------+--------------+--------------+------------+-------------+------+
      | magic i32 | kind i32 | query hi i64 | query lo i64 | epoch i64  | partition   | zero |
      |           |          |              |              |            | i32         |      |
      +-----------+----------+--------------+--------------+------------+-------------+------+
      40             48             56              64                 72
      +--------------+--------------+---------------+------------------+
      | first i64    | count i64    | source i64    | crc i64          |
      +--------------+--------------+---------------+------------------+
      COMMIT_ENTRY_MAGIC_OFFSET: COMMIT_LOG_MAGIC ("MBCL" as int32 little-endian)
      COMMIT_ENTRY_KIND_OFFSET: COMMIT_ENTRY_INTENT, _SEALED, _DONE or _VOID
      COMMIT_ENTRY_QUERY_HI_OFFSET, _QUERY_LO_OFFSET: the query id (a UUID's two halves),
        COMMIT_ENTRY_EPOCH_OFFSET (-1 for a batch write), COMMIT_ENTRY_PARTITION_OFFSET:
        the key of the task that wrote the entry
      COMMIT_ENTRY_FIRST_OFFSET, _COUNT_OFFSET: INTENT/VOID: a range's first slot (a
        position) and its slots; SEALED: the group's first position and its records
      COMMIT_ENTRY_SOURCE_OFFSET: -1, or the group a repair copies (its first position)
      COMMIT_ENTRY_CRC_OFFSET: CRC-32 (zlib's) of bytes [0, COMMIT_ENTRY_CRC_OFFSET), as a
        zero-extended int64; an entry with another magic or crc (a torn last entry) is
        not one

A rolling bus's consumers hold segments for retention up to ``max_consumer_lag`` segments
(metadata), then by ``on_consumer_lag``: ``expire`` (the entry is flagged expired and no
longer holds anything) or ``block`` (a writer about to roll waits up to
``consumer_block_ms`` for the consumer, then raises BusBackPressureError).

A position on a rolling bus is one int64 across segments::

    position = segment_index * segment_size + offset      (FIRST_RECORD_OFFSET <= offset)

so position 8 is the first record of segment 0, as on a single-file bus, and positions
grow with the total order.

A *framed* bus (metadata ``frames=1``) lays messages of any size over consecutive slots and
names topics in a topics file beside it: the FRAME_*/TOPICS_* section below, with its
diagrams, and docs/design/frames.md for the writer's and readers' protocols.

The Java side mirrors these names in ``interop/.../Layout.java``; a test checks they agree.
"""

__all__ = (
    "LIMIT_OFFSET", "FIRST_RECORD_OFFSET", "STATUS_OFFSET", "METADATA_OFFSET",
    "PAYLOAD_OFFSET", "HEADER_SIZE", "STATUS_NOT_SET", "STATUS_COMMITTED",
    "STATUS_ROLLED_BACK", "PAGE_SIZE", "DEFAULT_TIMEOUT_MS", "MIN_ROLLBACK_TIMEOUT_MS",
    "MAX_RECORD_SIZE",
    "META_SUFFIX", "META_FILE", "META_MAGIC", "META_FORMAT", "META_MAX_BYTES",
    "SEGMENT_SUFFIX", "SEGMENT_DIGITS", "TMP_PREFIX", "SEGMENT_CLAIM_BASE", "SEGMENT_CLAIM_WAIT_MS",
    "slot_size", "record_offset", "writer_slot_offset", "mapped_size", "record_index", "is_record_boundary",
    "segment_name", "segment_index", "split_position", "join_position",
    "frame_meta", "frame_meta_slots", "frame_slots", "frame_max_length", "topic_entry_offset",
    "CONSTANTS",
)

#: File header: the int64 limit, then the first record.
LIMIT_OFFSET = 0
FIRST_RECORD_OFFSET = 8

#: Record header, relative to the start of a record.
STATUS_OFFSET = 0
METADATA_OFFSET = 4
PAYLOAD_OFFSET = 8
HEADER_SIZE = 8

#: Status values (int32 at STATUS_OFFSET). They differ only in the low byte.
STATUS_NOT_SET = 0
STATUS_COMMITTED = 1
STATUS_ROLLED_BACK = 2

PAGE_SIZE = 4096
DEFAULT_TIMEOUT_MS = 2000
#: The shortest rollback timeout a reader takes: below it, healthy writers that are merely
#: descheduled between their fetch-and-add and their commit would be rolled back.
MIN_ROLLBACK_TIMEOUT_MS = 10

#: The metadata int32 holds a byte-array length, so a payload cannot be longer.
MAX_RECORD_SIZE = 2**31 - 1 - HEADER_SIZE

#: Metadata files and rolling-bus segments (see the module docstring).
META_SUFFIX = ".meta"
META_FILE = "bus.meta"
META_MAGIC = "# mappedbus bus metadata"
META_FORMAT = 1
META_MAX_BYTES = 4096
SEGMENT_SUFFIX = ".bus"
SEGMENT_DIGITS = 20
TMP_PREFIX = ".tmp-"
#: A segment's claim: a POSIX write lock (F_SETLK, never waited for) on the one byte at
#: SEGMENT_CLAIM_BASE + index of DIR/META_FILE, held by the writer making that segment, so
#: the others wait for it (at most SEGMENT_CLAIM_WAIT_MS) instead of making it too. The byte is
#: far past the file's end: a lock needs no data there.
SEGMENT_CLAIM_BASE = 2**40
SEGMENT_CLAIM_WAIT_MS = 2000

#: The wake file (see the module docstring and _wake.h).
WAKE_SUFFIX = ".wake"
WAKE_FILE = "bus.wake"
WAKE_FILE_SIZE = 4096
WAKE_MAGIC = int.from_bytes(b"MBUSWAK1", "little")
WAKE_VERSION = 2     # 2: parkers known by OFD locks, not pids (1 is refused: CorruptBusError)
WAKE_MAGIC_OFFSET = 0
WAKE_VERSION_OFFSET = 8
#: The one byte openers lock (a POSIX lock, as bus files' whole-file open lock) while they
#: create and size the file; a whole-file lock would wait on the slots' liveness locks.
WAKE_OPEN_LOCK_OFFSET = 16
WAKE_PARKED_OFFSET = 64
WAKE_ARMED_OFFSET = 68
WAKE_SEQ_OFFSET = 128
WAKE_SLOTS_OFFSET = 256
WAKE_SLOT_SIZE = 16
WAKE_SLOT_COUNT = (WAKE_FILE_SIZE - WAKE_SLOTS_OFFSET) // WAKE_SLOT_SIZE
WAKE_SLOT_PID_OFFSET = 0
WAKE_SLOT_STATE_OFFSET = 4
WAKE_SLOT_START_OFFSET = 8
#: A parked reader looks by itself after this long (records from writers that wake nobody:
#: the Java original, a writer killed between its commit and its wake), doubling up to
#: DEFAULT_PARK_MAX_NS while its looks find nothing, back to this once one finds a record
#: that came without a wake (_wake.h, wake_backoff).
DEFAULT_PARK_NS = 1_000_000
DEFAULT_PARK_MAX_NS = 16_000_000
#: How long a spin_park reader spins before it parks (``perf/bench_wake.py --spin-sweep``,
#: perf/results/wake_spin.md): below it both sides of a round trip park (p99 33-117 us); 20 us
#: was no better within this VM's noise and costs 0.8 % of a core more at 1 kHz.
DEFAULT_SPIN_NS = 10_000

#: The consumer registry (see the module docstring and _consumers.h).
CONSUMERS_SUFFIX = ".consumers"
CONSUMERS_FILE = "bus.consumers"
CONSUMERS_FILE_SIZE = 32768
CONSUMERS_MAGIC = int.from_bytes(b"MBUSCON1", "little")
CONSUMERS_VERSION = 2     # 2: holders and the lock by OFD locks, not pids (1 is refused)
CONSUMERS_MAGIC_OFFSET = 0
CONSUMERS_VERSION_OFFSET = 8
#: As WAKE_OPEN_LOCK_OFFSET: the byte openers lock while they create and size the file.
CONSUMERS_OPEN_LOCK_OFFSET = 16
CONSUMERS_LOCK_OFFSET = 64
CONSUMERS_ENTRIES_OFFSET = 128
CONSUMER_ENTRY_SIZE = 128
CONSUMER_ENTRY_COUNT = (CONSUMERS_FILE_SIZE - CONSUMERS_ENTRIES_OFFSET) // CONSUMER_ENTRY_SIZE
CONSUMER_GEN_OFFSET = 0
CONSUMER_FLAGS_OFFSET = 4
CONSUMER_PID_OFFSET = 8
CONSUMER_START_OFFSET = 16
CONSUMER_POSITION_OFFSET = 24
CONSUMER_COMMITTED_NS_OFFSET = 32
CONSUMER_CREATED_NS_OFFSET = 40
CONSUMER_BUS_ID_OFFSET = 48
CONSUMER_BUS_ID_SIZE = 16
CONSUMER_NAME_OFFSET = 64
CONSUMER_NAME_MAX = 64
CONSUMER_FLAG_EXPIRED = 1
#: How a rolling bus treats a consumer more than max_consumer_lag segments behind.
ON_CONSUMER_LAG = ("expire", "block")
DEFAULT_CONSUMER_BLOCK_MS = 10_000

#: The writers file (see the module docstring and _writers.h).
WRITERS_SUFFIX = ".writers"
WRITERS_FILE = "bus.writers"
WRITERS_FILE_SIZE = 16384
WRITERS_MAGIC = int.from_bytes(b"MBUSWRT1", "little")
WRITERS_VERSION = 1
WRITERS_MAGIC_OFFSET = 0
WRITERS_VERSION_OFFSET = 8
WRITERS_SLOTS_OFFSET = 64
WRITER_SLOT_SIZE = 64
WRITER_SLOT_COUNT = (WRITERS_FILE_SIZE - WRITERS_SLOTS_OFFSET) // WRITER_SLOT_SIZE
WRITER_BEGIN_OFFSET = 0
WRITER_END_OFFSET = 8
WRITER_PID_OFFSET = 16
WRITER_TAKEN_NS_OFFSET = 24

# The Spark sink's commit log (see the diagram above).
COMMIT_LOG_SUFFIX = ".commits"
COMMIT_LOG_FILE = "bus.commits"
COMMIT_LOG_MAGIC = int.from_bytes(b"MBCL", "little")
COMMIT_ENTRY_SIZE = 72
COMMIT_ENTRY_MAGIC_OFFSET = 0
COMMIT_ENTRY_KIND_OFFSET = 4
COMMIT_ENTRY_QUERY_HI_OFFSET = 8
COMMIT_ENTRY_QUERY_LO_OFFSET = 16
COMMIT_ENTRY_EPOCH_OFFSET = 24
COMMIT_ENTRY_PARTITION_OFFSET = 32
COMMIT_ENTRY_FIRST_OFFSET = 40
COMMIT_ENTRY_COUNT_OFFSET = 48
COMMIT_ENTRY_SOURCE_OFFSET = 56
COMMIT_ENTRY_CRC_OFFSET = 64
COMMIT_ENTRY_INTENT = 1
COMMIT_ENTRY_SEALED = 2
COMMIT_ENTRY_DONE = 3
COMMIT_ENTRY_VOID = 4

CONSTANTS = {
    name: globals()[name]
    for name in (
        "LIMIT_OFFSET", "FIRST_RECORD_OFFSET", "STATUS_OFFSET", "METADATA_OFFSET",
        "PAYLOAD_OFFSET", "HEADER_SIZE", "STATUS_NOT_SET", "STATUS_COMMITTED",
        "STATUS_ROLLED_BACK", "PAGE_SIZE", "DEFAULT_TIMEOUT_MS", "MIN_ROLLBACK_TIMEOUT_MS",
        "META_SUFFIX", "META_FILE", "META_MAGIC", "META_FORMAT", "META_MAX_BYTES",
        "SEGMENT_SUFFIX", "SEGMENT_DIGITS", "TMP_PREFIX", "SEGMENT_CLAIM_BASE",
        "SEGMENT_CLAIM_WAIT_MS",
        "WAKE_SUFFIX", "WAKE_FILE", "WAKE_FILE_SIZE", "WAKE_MAGIC", "WAKE_VERSION",
        "WAKE_MAGIC_OFFSET", "WAKE_VERSION_OFFSET", "WAKE_OPEN_LOCK_OFFSET", "WAKE_PARKED_OFFSET", "WAKE_ARMED_OFFSET",
        "WAKE_SEQ_OFFSET",
        "WAKE_SLOTS_OFFSET", "WAKE_SLOT_SIZE", "WAKE_SLOT_COUNT", "WAKE_SLOT_PID_OFFSET",
        "WAKE_SLOT_STATE_OFFSET", "WAKE_SLOT_START_OFFSET", "DEFAULT_PARK_NS",
        "DEFAULT_PARK_MAX_NS", "DEFAULT_SPIN_NS",
        "CONSUMERS_SUFFIX", "CONSUMERS_FILE", "CONSUMERS_FILE_SIZE", "CONSUMERS_MAGIC",
        "CONSUMERS_VERSION", "CONSUMERS_MAGIC_OFFSET", "CONSUMERS_VERSION_OFFSET",
        "CONSUMERS_OPEN_LOCK_OFFSET",
        "CONSUMERS_LOCK_OFFSET", "CONSUMERS_ENTRIES_OFFSET", "CONSUMER_ENTRY_SIZE",
        "CONSUMER_ENTRY_COUNT", "CONSUMER_GEN_OFFSET", "CONSUMER_FLAGS_OFFSET",
        "CONSUMER_PID_OFFSET", "CONSUMER_START_OFFSET", "CONSUMER_POSITION_OFFSET",
        "CONSUMER_COMMITTED_NS_OFFSET", "CONSUMER_CREATED_NS_OFFSET", "CONSUMER_BUS_ID_OFFSET",
        "CONSUMER_BUS_ID_SIZE", "CONSUMER_NAME_OFFSET", "CONSUMER_NAME_MAX",
        "CONSUMER_FLAG_EXPIRED", "DEFAULT_CONSUMER_BLOCK_MS",
        "WRITERS_SUFFIX", "WRITERS_FILE", "WRITERS_FILE_SIZE", "WRITERS_MAGIC", "WRITERS_VERSION",
        "WRITERS_MAGIC_OFFSET", "WRITERS_VERSION_OFFSET", "WRITERS_SLOTS_OFFSET",
        "WRITER_SLOT_SIZE", "WRITER_SLOT_COUNT", "WRITER_BEGIN_OFFSET", "WRITER_END_OFFSET",
        "WRITER_PID_OFFSET", "WRITER_TAKEN_NS_OFFSET",
        "COMMIT_LOG_SUFFIX", "COMMIT_LOG_FILE", "COMMIT_LOG_MAGIC", "COMMIT_ENTRY_SIZE",
        "COMMIT_ENTRY_MAGIC_OFFSET", "COMMIT_ENTRY_KIND_OFFSET", "COMMIT_ENTRY_QUERY_HI_OFFSET",
        "COMMIT_ENTRY_QUERY_LO_OFFSET", "COMMIT_ENTRY_EPOCH_OFFSET", "COMMIT_ENTRY_PARTITION_OFFSET",
        "COMMIT_ENTRY_FIRST_OFFSET", "COMMIT_ENTRY_COUNT_OFFSET", "COMMIT_ENTRY_SOURCE_OFFSET",
        "COMMIT_ENTRY_CRC_OFFSET", "COMMIT_ENTRY_INTENT", "COMMIT_ENTRY_SEALED", "COMMIT_ENTRY_DONE",
        "COMMIT_ENTRY_VOID",
    )
}


def slot_size(record_size):
    """Bytes one record takes in the file: header plus the fixed payload size."""
    return HEADER_SIZE + record_size


def writer_slot_offset(index):
    """Offset of slot ``index`` of the writers file, which is also its liveness byte."""
    return WRITERS_SLOTS_OFFSET + index * WRITER_SLOT_SIZE


def record_offset(index, record_size):
    """Offset of record ``index`` (0-based)."""
    return FIRST_RECORD_OFFSET + index * slot_size(record_size)


def record_index(offset, record_size):
    """Index of the record starting at ``offset`` (which must be a record boundary)."""
    return (offset - FIRST_RECORD_OFFSET) // slot_size(record_size)


def is_record_boundary(offset, record_size):
    """True when ``offset`` lies on the record grid: where a record starts, or a limit stops."""
    return offset >= FIRST_RECORD_OFFSET and (offset - FIRST_RECORD_OFFSET) % slot_size(record_size) == 0


def mapped_size(file_size):
    """The length of the file and of its mapping: ``file_size`` rounded up to a page."""
    return -(-file_size // PAGE_SIZE) * PAGE_SIZE


def segment_name(index):
    """The file name of rolling-bus segment ``index``: 20 decimal digits and ``.bus``."""
    if index < 0:
        raise ValueError(f"segment index must not be negative, got {index}")
    return f"{index:0{SEGMENT_DIGITS}d}{SEGMENT_SUFFIX}"


def segment_index(name):
    """The index of a segment file name, or None if ``name`` is not one."""
    stem = name[:-len(SEGMENT_SUFFIX)] if name.endswith(SEGMENT_SUFFIX) else ""
    if len(stem) != SEGMENT_DIGITS or not stem.isdigit() or not stem.isascii():
        return None
    return int(stem)


def split_position(position, segment_size):
    """``(segment_index, offset_in_segment)`` of a rolling-bus position."""
    return divmod(position, segment_size)


def join_position(index, offset, segment_size):
    """The rolling-bus position of ``offset`` in segment ``index``."""
    return index * segment_size + offset


# -- work groups (issue 35; docs/design/side-files.md, "Work groups"; docs/groups.md) --------
#
# A work group hands each record of a bus to one member of the group at a time. One file a
# group, beside the bus: PATH + GROUP_DIR_SUFFIX + "/" + NAME + GROUP_SUFFIX (single file),
# DIR/GROUP_DIR/NAME + GROUP_SUFFIX (rolling); its dead-letter bus beside it, a rolling bus
# in the directory ... NAME + GROUP_DEAD_SUFFIX. Little-endian; all zero where not written.
#
#   0            8             12           16              20                24
#   +------------+-------------+------------+---------------+-----------------+--------------+
#   | magic i64  | version i32 | window i32 | max_deliv i32 | max_in_flight   | lease_ns i64 |
#   +------------+-------------+------------+---------------+-----------------+--------------+
#   32 bus id (16 bytes)   48 created_ns i64 (Unix epoch)   56 start position i64 (``start=``)
#   64   start i64  (own line)  the oldest g not yet done (acked, dead-lettered or skipped)
#   128  end i64    (own line)  one past the last g acquired or skipped
#   192  counters i64: redelivered, dead_lettered, released, rejected, hint (moved by every
#        release: members look for redeliveries when it moved)
#   256  members: GROUP_MEMBER_COUNT slots of GROUP_MEMBER_SIZE bytes; a member's liveness
#        byte is its slot's first byte (an OFD lock, mappedbus_py/_core/_liveness.h):
#        0 pid i32 (for people) | 4 in_flight i32 | 8 acked i64 | 16 taken_ns i64 |
#        24 delivered i64 | 32 name (24 bytes, UTF-8, zero padded)
#   GROUP_ENTRIES_OFFSET: ``window`` entries (a power of two) of GROUP_ENTRY_SIZE bytes,
#        entry(g) = g mod window:
#        0 word i64 (CAS) = tag u32 (g / window) | state u8 << 32 | deliveries u8 << 40
#                           | owner u16 << 48 (a member slot)
#        8 lease deadline i64 (CLOCK_MONOTONIC ns; written before the CAS that publishes it)
#        16 position i64 (the record's bus position)
#        24 slots i64 (a framed bus only: tag u32 << 32 | the message's slot count, written
#           before the CAS that takes or skips its first slot; _group_frames.h)
#
# Records are named by their global slot index g: a single-file bus's record index, a
# rolling bus's segment * slots_per_segment + slot.

GROUP_DIR_SUFFIX = ".groups"
GROUP_DIR = "groups"
GROUP_SUFFIX = ".group"
GROUP_DEAD_SUFFIX = ".dead"
GROUP_NAME_MAX = 64
GROUP_MAGIC = int.from_bytes(b"MBUSGRP1", "little")
GROUP_VERSION = 1
GROUP_MAGIC_OFFSET = 0
GROUP_VERSION_OFFSET = 8
GROUP_WINDOW_OFFSET = 12
GROUP_MAX_DELIVERIES_OFFSET = 16
GROUP_MAX_IN_FLIGHT_OFFSET = 20
GROUP_LEASE_NS_OFFSET = 24
GROUP_BUS_ID_OFFSET = 32
GROUP_BUS_ID_SIZE = 16
GROUP_CREATED_NS_OFFSET = 48
GROUP_START_POSITION_OFFSET = 56
GROUP_START_OFFSET = 64
GROUP_END_OFFSET = 128
GROUP_REDELIVERED_OFFSET = 192
GROUP_DEAD_LETTERED_OFFSET = 200
GROUP_RELEASED_OFFSET = 208
GROUP_REJECTED_OFFSET = 216
GROUP_HINT_OFFSET = 224
GROUP_MEMBERS_OFFSET = 256
GROUP_MEMBER_SIZE = 64
GROUP_MEMBER_COUNT = 128
GROUP_MEMBER_PID_OFFSET = 0
GROUP_MEMBER_IN_FLIGHT_OFFSET = 4
GROUP_MEMBER_ACKED_OFFSET = 8
GROUP_MEMBER_TAKEN_NS_OFFSET = 16
GROUP_MEMBER_DELIVERED_OFFSET = 24
GROUP_MEMBER_NAME_OFFSET = 32
GROUP_MEMBER_NAME_MAX = 24
GROUP_ENTRIES_OFFSET = GROUP_MEMBERS_OFFSET + GROUP_MEMBER_COUNT * GROUP_MEMBER_SIZE   # 8448
GROUP_ENTRY_SIZE = 32
GROUP_ENTRY_WORD_OFFSET = 0
GROUP_ENTRY_LEASE_OFFSET = 8
GROUP_ENTRY_POSITION_OFFSET = 16
GROUP_ENTRY_SLOTS_OFFSET = 24
# entry states (the word's bits 32..39)
GROUP_EMPTY = 0
GROUP_ACQUIRED = 1
GROUP_RELEASED = 2
GROUP_ACKED = 3
GROUP_DEAD = 4
GROUP_SKIP = 5
GROUP_DEFAULT_WINDOW = 4096
GROUP_MAX_WINDOW = 1 << 20
GROUP_DEFAULT_MAX_DELIVERIES = 5
GROUP_DEFAULT_LEASE_NS = 30_000_000_000
# A dead-letter record: this header, then the record's payload (record_size bytes).
#   0 position i64 (in the group's bus) | 8 deliveries i32 | 12 meta i32 (the record's) |
#   16 group name (GROUP_NAME_MAX bytes, UTF-8, zero padded)
GROUP_DEAD_POSITION_OFFSET = 0
GROUP_DEAD_DELIVERIES_OFFSET = 8
GROUP_DEAD_META_OFFSET = 12
GROUP_DEAD_NAME_OFFSET = 16
GROUP_DEAD_HEADER_SIZE = GROUP_DEAD_NAME_OFFSET + GROUP_NAME_MAX


def group_file_size(window):
    """Bytes of a group file with ``window`` entries."""
    return GROUP_ENTRIES_OFFSET + window * GROUP_ENTRY_SIZE


def group_member_offset(index):
    """Offset of member slot ``index`` (its liveness byte)."""
    return GROUP_MEMBERS_OFFSET + index * GROUP_MEMBER_SIZE


def group_entry_offset(g, window):
    """Offset of the entry of record ``g``."""
    return GROUP_ENTRIES_OFFSET + (g & (window - 1)) * GROUP_ENTRY_SIZE


def group_word(tag, state, deliveries, owner):
    """An entry's word from its fields."""
    return (tag & 0xFFFFFFFF) | (state << 32) | (deliveries << 40) | (owner << 48)


CONSTANTS.update({name: value for name, value in globals().items()
                  if name.startswith("GROUP_") and isinstance(value, int | str)})


# -- the journal (issue 37; docs/design/journal.md; docs/journal.md) ------------------------
#
# A rolling bus's TIME INDEX: one file per segment, DIR/TIME_INDEX_DIR/<20 digits>.time
# (time_index_name), moved into the archive with its segment. Little-endian:
#
#   0             8             12            16                          32
#   +-------------+-------------+-------------+---------------------------+
#   | magic i64   | version i32 | entry size  | bus id (16 bytes: bus.meta |
#   | "MBUSTIX1"  | (1)         | i32 (16)    | id as bytes)               |
#   +-------------+-------------+-------------+---------------------------+
#   32              40                 48              52       64
#   +---------------+------------------+---------------+-- zeros-+
#   | segment i64   | segment_size i64 | record_size   |         |
#   |               |                  | i32           |         |
#   +---------------+------------------+---------------+---------+
#   TIME_INDEX_ENTRIES_OFFSET (64): entries of TIME_INDEX_ENTRY_SIZE (16) bytes, appended:
#   +------------------+-------------------+
#   | time_ns i64      | position i64      |
#   +------------------+-------------------+
#   TIME_ENTRY_TIME_OFFSET: CLOCK_REALTIME (Unix ns) read by the writer just BEFORE it
#     allocated the record's slot (so every slot allocated after the entry's position was
#     allocated at or after time_ns)
#   TIME_ENTRY_POSITION_OFFSET: that record's position (global: segment * segment_size +
#     offset; within this file's segment, on the record grid)
#
# Who appends what: each writer of this project appends an entry for the first record it
# writes in each millisecond (time_ns // TIME_INDEX_RESOLUTION_NS changed) and for its first
# record in each segment: at most one entry per writer per millisecond. Appends are single
# write(2) calls of 16 bytes on a descriptor opened O_APPEND: atomic for regular files, so
# concurrent writers never interleave bytes. Entries of several writers are not sorted by time
# or position; a reader sorts them. The header is made complete in a temporary file
# (TMP_PREFIX) and linked into place (one creator wins; the others open the winner's).
# A reader takes (size - 64) // 16 entries (a torn last entry, shorter, is ignored); an
# all-zero entry (a file extended but not written before a power loss) is ignored; any other
# entry outside the segment, off the record grid, or a header of another magic, version,
# bus id or segment is CorruptBusError naming the file.
#
# seek_time(t): the smallest position among the entries with time_ns >= floor_ms(t), in the
# first segment that has one: every record allocated at or after t is delivered, and none
# allocated before floor_ms(t) (resolution TIME_INDEX_RESOLUTION_NS, 1 ms). A segment's
# entries are its hot index file's and its archived one's together (a late append can make the
# hot one again after the move: docs/design/journal.md).
#
# The ARCHIVE directory (bus.meta key archive_dir: absolute path; mode 0700):
#
#   ARCHIVE/META_FILE                 a copy of the hot bus.meta (same id and sizes): how
#                                     tools reading the archive alone find the sizes
#   ARCHIVE/<20 digits>.bus           uncompressed: the exact bytes of the hot segment
#                                     (mapped_size(segment_size) long): the Java original and
#                                     `mappedbus dump` read it as a single-file bus
#   ARCHIVE/<20 digits>.bus.zst       or: those bytes as zstd frames in zstd's seekable
#                                     format (ZSTD SEEKABLE, below; `zstd -d` restores them)
#   ARCHIVE/<20 digits>.bus.lz4       or: those bytes as one LZ4 frame (lz4.frame, content
#                                     size in its header)
#   ARCHIVE/TIME_INDEX_DIR/<20>.time  the segment's time index, moved with it
#   ARCHIVE/TMP_PREFIX...             a file being written: never read; removed by the next
#                                     archiver (which holds ARCHIVER_LOCK_BYTE)
#
# bus.meta key time_index=1: the bus keeps a time index (TIME_INDEX_META_KEY; set when a writer
# first asks for it, time_index=True, and from then on every writer of this project appends;
# absent: no index, and seek_time is refused). Its cost: one clock read per record.
#
# bus.meta keys of a bus with an archive (absent otherwise): archive_dir, archive_after
# (full segments kept hot), archive_age_ms (0: none), archive_compress (none|zstd|lz4),
# archive_retain_segments, archive_retain_bytes, archive_retain_age_ms (0: no limit).
#
# THE MOVE of segment k (one archiver at a time: the holder of the OFD lock on byte
# ARCHIVER_LOCK_BYTE of ARCHIVE/bus.meta, _liveness.h; that file is written once and never
# replaced, unlike DIR/bus.meta, which gains keys when an archive or a time index is set):
#
#   MOVE_SETTLED   every slot of k committed or rolled back (k < the newest segment)
#   MOVE_INDEX     ARCHIVE/index/.tmp-* written, fsync, rename to <k>.time, fsync the dir
#   MOVE_COPIED    ARCHIVE/.tmp-* written (compressed or not), fsync
#   MOVE_RENAMED   rename to ARCHIVE/<k>.bus[.zst|.lz4], fsync ARCHIVE      (both tiers hold k)
#   MOVE_UNLINKED  unlink DIR/<k>.bus, then DIR/index/<k>.time, fsync DIR    (archive only)
#                  (the index read after its unlink: entries appended since MOVE_INDEX
#                  merged into ARCHIVE/index/<k>.time; docs/design/journal.md)
#
# WHEN a segment moves: each full hot segment beyond archive_after (oldest first), and each
# filled longer than archive_age_ms ago (0: no age). So that the hot directory never holds more
# than archive_after + 1 segments with records (archive_after full ones and the current one),
# not even at a roll: when archive_after >= 1 full segments are hot and the current segment's
# limit is past ARCHIVER_EARLY_FILL_PERCENT % of the segment, the oldest full one is due too
# (it moves while the current one fills; at the roll the segment that filled takes its place).
# With archive_after = 0 the segment that filled is hot beside the current one until it moves.
# While nothing is due (archive_after >= 1) the archiver copies each full hot segment not due
# yet (settled; oldest first, one a look) ahead: its copy in a TMP_PREFIX file of the archive,
# fsynced; its move (MOVE_INDEX read then, MOVE_COPIED already true) renames it. A kill leaves
# only those files.
# An archiver looks at every roll its writer makes and, while the bus moves, every
# ARCHIVER_ACTIVE_POLL_MS (a writer in another process or language does not wake it); after
# ARCHIVER_IDLE_AFTER_MS without a change it looks every ARCHIVER_IDLE_POLL_MS.
#
# ZSTD SEEKABLE: an archived .zst segment is its bytes cut into pieces of
# ARCHIVE_ZSTD_FRAME_BYTES (the last one the rest), each compressed as one zstd frame with its
# content size in its header and its content checksum (zstd's, XXH64: a flipped byte on disk
# is an error, not other records), followed by a seek table: one skippable frame of zstd's
# seekable format (zstd's contrib/seekable_format/zstd_seekable_compression_format.md), with
# no checksums of its own (descriptor 0):
#
#   frame 0 | frame 1 | ... | frame n-1 | seek table
#   seek table (little-endian):
#     +0                     u32  ARCHIVE_ZSTD_SKIPPABLE_MAGIC (0x184D2A5E)
#     +4                     u32  n * ARCHIVE_ZSTD_SEEK_ENTRY_SIZE + ARCHIVE_ZSTD_SEEK_FOOTER_SIZE
#     +8 + 8 i               u32  frame i's compressed size; u32 its decompressed size
#     +8 + 8 n               u32  n (frames)
#     +12 + 8 n              u8   descriptor: ARCHIVE_ZSTD_SEEK_DESCRIPTOR (0: no checksums)
#     +13 + 8 n              u32  ARCHIVE_ZSTD_SEEKABLE_MAGIC (0x8F92EAB1): the file's last bytes
#
# Frame i starts at the sum of the compressed sizes before it and decompresses to exactly its
# size at the sum of the decompressed sizes before it, so readers decompress the frames in
# parallel (Java: the reader's thread and a small daemon pool). A reader takes a file ending in
# ARCHIVE_ZSTD_SEEKABLE_MAGIC as seekable and refuses (CorruptBusError) a table whose
# skippable magic or size is not as above, whose descriptor is not 0, with n = 0 or more than
# ARCHIVE_ZSTD_MAX_FRAMES, a size 0, compressed sizes not summing to the table's start, or
# decompressed sizes not summing to mapped_size(segment_size). Any other .zst file is read as
# one frame: what the archivers of sessions 17-18 wrote.
#
# A kill leaves one of these states; a segment present in both tiers holds the same records
# in both, and readers take the HOT one (HOT_WINS); the next archiver resumes at
# MOVE_UNLINKED for it and removes the temporary files. Never both forms of one segment
# in the archive (a reader finding two is CorruptBusError).

TIME_INDEX_DIR = "index"
TIME_INDEX_SUFFIX = ".time"
TIME_INDEX_MAGIC = int.from_bytes(b"MBUSTIX1", "little")
TIME_INDEX_VERSION = 1
TIME_INDEX_MAGIC_OFFSET = 0
TIME_INDEX_VERSION_OFFSET = 8
TIME_INDEX_ENTRY_SIZE_OFFSET = 12
TIME_INDEX_BUS_ID_OFFSET = 16
TIME_INDEX_BUS_ID_SIZE = 16
TIME_INDEX_SEGMENT_OFFSET = 32
TIME_INDEX_SEGMENT_SIZE_OFFSET = 40
TIME_INDEX_RECORD_SIZE_OFFSET = 48
TIME_INDEX_ENTRIES_OFFSET = 64
TIME_INDEX_ENTRY_SIZE = 16
TIME_ENTRY_TIME_OFFSET = 0
TIME_ENTRY_POSITION_OFFSET = 8
TIME_INDEX_RESOLUTION_NS = 1_000_000

ARCHIVE_SUFFIX_NONE = ""            # ARCHIVE/<20 digits>.bus
ARCHIVE_SUFFIX_ZSTD = ".zst"        # ARCHIVE/<20 digits>.bus.zst
ARCHIVE_SUFFIX_LZ4 = ".lz4"         # ARCHIVE/<20 digits>.bus.lz4
ARCHIVE_COMPRESS = ("none", "zstd", "lz4")
#: zstd's level for archived segments. 1, not zstd's default 3: on this project's bench machine
#: level 1 compresses a 16 MiB segment in 20 ms against 35 (the same ratio on a writer's
#: benchmark stream, 2-3 % larger files on a price stream), and an archiver behind a writer at
#: 250 MB/s kept archive_after + 1 in 25 rounds of 25 with it, 21 of 25 with 3
#: (perf/results/history.md, session 17). Any level reads the same: readers never need it.
ARCHIVE_ZSTD_LEVEL = 1
#: The piece of a segment each zstd frame of an archived segment holds (ZSTD SEEKABLE, above):
#: 128 KiB: eight frames of a 1 MiB segment, which a Java reader and the pool decompressing it
#: ahead share as they come (the reader takes the frames the pool has not claimed when it gets
#: there: fine pieces leave it little to wait for). Against one frame, on a PriceUpdate stream's
#: 1 MiB segment: ratio 19.5x instead of 19.6x (256 KiB: 19.55x), and the same decompression
#: time with a reused context (perf/results/history.md, session 19).
ARCHIVE_ZSTD_FRAME_BYTES = 128 * 1024
ARCHIVE_ZSTD_SKIPPABLE_MAGIC = 0x184D2A5E
ARCHIVE_ZSTD_SEEKABLE_MAGIC = 0x8F92EAB1
ARCHIVE_ZSTD_SEEK_ENTRY_SIZE = 8
ARCHIVE_ZSTD_SEEK_FOOTER_SIZE = 9
ARCHIVE_ZSTD_SEEK_DESCRIPTOR = 0
#: The most frames a seek table may list (a 2 GiB segment in ARCHIVE_ZSTD_FRAME_BYTES pieces,
#: and more): a larger count is corrupt, not a reason to allocate.
ARCHIVE_ZSTD_MAX_FRAMES = 1 << 16
#: The archiver's lock: an OFD lock (_liveness.h) on this byte of ARCHIVE/bus.meta (the
#: archive's copy, never replaced), far past its end.
ARCHIVER_LOCK_BYTE = SEGMENT_CLAIM_BASE - 1
#: The oldest full hot segment is due once the current one is this full (WHEN, above).
ARCHIVER_EARLY_FILL_PERCENT = 50
#: How often an archiver looks while the bus moves, and while it is idle (WHEN, above).
ARCHIVER_ACTIVE_POLL_MS = 1
ARCHIVER_IDLE_POLL_MS = 50
#: An archiver is idle after this long without a change of the current segment's limit.
ARCHIVER_IDLE_AFTER_MS = 200
#: The move's states (above), in order.
MOVE_STATES = ("MOVE_SETTLED", "MOVE_INDEX", "MOVE_COPIED", "MOVE_RENAMED", "MOVE_UNLINKED")
#: A segment in both tiers: the hot one is read.
HOT_WINS = True
#: bus.meta keys of the journal (written only when an archive is set).
ARCHIVE_META_KEYS = ("archive_dir", "archive_after", "archive_age_ms", "archive_compress",
                     "archive_retain_segments", "archive_retain_bytes", "archive_retain_age_ms")
SYNC_POLICIES = ("none", "segment", "interval")
TIME_INDEX_META_KEY = "time_index"


def time_index_name(index):
    """The time index file name of segment ``index``: 20 decimal digits and ``.time``."""
    if index < 0:
        raise ValueError(f"segment index must not be negative, got {index}")
    return f"{index:0{SEGMENT_DIGITS}d}{TIME_INDEX_SUFFIX}"


def archive_name(index, compress):
    """The archive file name of segment ``index`` for ``compress`` ("none", "zstd", "lz4")."""
    suffix = {"none": ARCHIVE_SUFFIX_NONE, "zstd": ARCHIVE_SUFFIX_ZSTD,
              "lz4": ARCHIVE_SUFFIX_LZ4}[compress]
    return segment_name(index) + suffix


def archive_index(name):
    """(segment index, compress) of an archive file name, or None if ``name`` is not one."""
    for compress, suffix in (("zstd", ARCHIVE_SUFFIX_ZSTD), ("lz4", ARCHIVE_SUFFIX_LZ4),
                             ("none", ARCHIVE_SUFFIX_NONE)):
        if suffix and not name.endswith(suffix):
            continue
        i = segment_index(name[:len(name) - len(suffix)] if suffix else name)
        if i is not None:
            return i, compress
    return None


CONSTANTS.update({name: value for name, value in globals().items()
                  if name.startswith(("TIME_INDEX_", "TIME_ENTRY_", "ARCHIVE_SUFFIX_",
                                      "ARCHIVER_", "ARCHIVE_ZSTD_"))
                  and isinstance(value, int | str)})

# -- frames and topics (issue 36; docs/design/frames.md; docs/messages.md) -----------------
#
# A *framed* bus (metadata ``frames=1``) carries messages of any size, 0 bytes up to what
# one file (a rolling bus: one segment) holds. It keeps the 0.5.1 file: the limit, slots of
# HEADER_SIZE + record_size bytes, the status int32 of each message's first slot. What
# changes is what lies in the slots. A message of ``length`` bytes takes
# n = frame_slots(length, record_size) consecutive slots, reserved by ONE fetch-and-add of
# n * slot_size(record_size) on the limit (so no other message interleaves with it):
#
#   pos (first slot)                                                    pos + n * slot
#   +--------+--------+-----------+----------+----------+--------------------~~-----+
#   | status | meta   | length    | topic    | flags    | payload: `length` bytes,  |
#   |  i32   |  i32   |  i64      |  i32     |  i32     | then unused to the end   |
#   +--------+--------+-----------+----------+----------+--------------------~~-----+
#   0        4        8           16         20         24 = FRAME_PAYLOAD_OFFSET
#   ^ STATUS_OFFSET   ^ PAYLOAD_OFFSET + FRAME_LENGTH_OFFSET (the frame header starts
#            ^ METADATA_OFFSET     where the first slot's payload does)
#
#   The payload runs on contiguously through the following n - 1 slots, over their
#   8-byte headers: slots 2..n have NO header of their own (*continuation slots*), so a
#   message is one span of bytes [pos + 24, pos + 24 + length) in the mapping, read into
#   one buffer (or written from one) with a single copy. Nobody reads a continuation
#   slot's "status": readers move from a message's first slot to the next message's
#   first slot, pos + n * slot.
#
#   meta (int32 at METADATA_OFFSET of the first slot):
#     bit 31           FRAME_META_FLAG: this slot begins a frame (a message or a padding)
#     bits 0..30       FRAME_META_COUNT_MASK: n, its slot count (1 <= n <= FRAME_MAX_SLOTS)
#     0                not written yet (the writer's first store has not landed)
#     Written FIRST, before the frame header and the payload, by compare-and-swap
#     0 -> FRAME_META_FLAG | n: readers learn how far to skip a message whose writer died.
#     A reader that gives up on a first slot whose meta is still 0 sets it by the same
#     CAS to FRAME_META_FLAG | 1 before it rolls the status back; a writer whose meta CAS
#     fails was rolled back and writes nothing more (docs/design/frames.md).
#   status (int32, 0.5.1's): 0 not committed, 1 committed (the whole message, one CAS
#     0 -> 1 of the first slot's status), 2 rolled back or padding: skip n slots.
#   length (int64, FRAME_LENGTH_OFFSET from the first slot's payload): payload bytes,
#     0 <= length <= n * slot - FRAME_PAYLOAD_OFFSET.
#   topic (int32, FRAME_TOPIC_OFFSET): FRAME_TOPIC_NONE (0), or a topic id 1..TOPICS_MAX
#     from the bus's topics file.
#   flags (int32, FRAME_FLAGS_OFFSET): bits 0..7 the payload's encoding,
#     FRAME_ENCODING_BYTES (0) raw bytes, FRAME_ENCODING_PICKLE (1) a Python object as
#     below, FRAME_ENCODING_SERIALIZED (2) bytes of an application's serializer (msgpack,
#     ...); bits 8..31 zero (readers ignore them).
#
# Sizes: record_size of a framed bus is a multiple of FRAME_RECORD_ALIGN (8: every frame
# header's int64 is aligned) and at least FRAME_MIN_RECORD_SIZE (16: an empty message fits
# one slot). frame_slots(length) = ceil((FRAME_PAYLOAD_OFFSET + length) / slot). A message
# never spans files: the largest is frame_max_length(file_size, record_size) (a rolling
# bus: segment_size); a larger one is refused before anything is reserved.
#
# The end of a file: a writer whose reservation [pos, pos + n * slot) ends past file_size
# (another message took the room first) turns the part inside the file into a *padding*:
# meta CAS 0 -> FRAME_META_FLAG | m (m = the slots of the file from pos on), then status
# CAS 0 -> 2; then a single-file writer raises BusFullError, a rolling writer rolls to the
# next segment and writes its message there. Readers skip a padding as a rolled-back frame
# of m slots. (Slots past the last one that fits are never looked at, as in 0.5.1.)
#
# An object (FRAME_ENCODING_PICKLE): pickle protocol 5 with its out-of-band buffers laid
# out after it, so numpy arrays are copied once, straight into the mapping:
#
#   0             4          8                 16                  16 + 8 * k
#   +-------------+----------+-----------------+--- k x u64 -------+---------+--~~--+
#   | k: buffers  | zero u32 | pickle len u64  | buffer lengths    | pickle  | bufs |
#   +-------------+----------+-----------------+-------------------+---------+--~~--+
#   each buffer starts at the next multiple of OBJECT_BUFFER_ALIGN (8) from the payload's
#   start (zero bytes between); loads(pickle, buffers=[those spans in order]).
#
# The topics file, beside the bus: PATH + TOPICS_SUFFIX (single file), DIR/TOPICS_FILE
# (rolling). TOPICS_FILE_SIZE bytes, all zero when new, little-endian, append-only:
#
#   0            8             12        16          20                      64
#   +------------+-------------+---------+-----------+-- zeros --------------+
#   | magic i64  | version i32 | zero    | count i32 |                       |
#   +------------+-------------+---------+-----------+-----------------------+
#   ^ TOPICS_MAGIC_OFFSET ("MBUSTOP1", TOPICS_VERSION; set by CAS from zero by the
#     first opener)                      ^ TOPICS_COUNT_OFFSET: entries claimed, moved
#                                          only by CAS count c -> c + 1 (c < TOPICS_MAX)
#   64 (TOPICS_ENTRIES_OFFSET): TOPICS_MAX entries of TOPIC_ENTRY_SIZE bytes; the topic
#   id of entry i is i + 1:
#   0             4          8                                         64
#   +-------------+----------+-----------------------------------------+
#   | length i32  | zero     | name: 1..TOPIC_NAME_MAX bytes UTF-8,    |
#   |             |          | NUL padded                              |
#   +-------------+----------+-----------------------------------------+
#   TOPIC_LENGTH_OFFSET: the name's byte length, stored with release AFTER the name:
#     0 = claimed, not yet published (its claimer may have died: then no message ever
#     carries its id); > 0: the entry is final. A writer publishes its entry before it
#     writes any message with the id (and the commit's release orders it), so a reader
#     that reads a committed message with topic t finds entry t - 1 published.
#   TOPIC_NAME_OFFSET: the name (no NUL, no control characters).
#   To name a topic: scan the published entries for it; absent, CAS count c -> c + 1 and
#   fill entry c. Racing writers may publish one name twice: a name's topic is the set of
#   its ids (readers filter by name, writers use the lowest published id), so a duplicate
#   changes nothing a reader sees. count = TOPICS_MAX: TopicsFullError.

FRAME_META_FLAG = -2**31            # bit 31 of the int32 meta (0x80000000 unsigned)
FRAME_META_COUNT_MASK = 2**31 - 1
FRAME_MAX_SLOTS = 2**31 - 1
FRAME_LENGTH_OFFSET = 0             # from the first slot's payload (PAYLOAD_OFFSET)
FRAME_TOPIC_OFFSET = 8
FRAME_FLAGS_OFFSET = 12
FRAME_HEADER_SIZE = 16
FRAME_PAYLOAD_OFFSET = HEADER_SIZE + FRAME_HEADER_SIZE   # 24, from the first slot's start
FRAME_RECORD_ALIGN = 8
FRAME_MIN_RECORD_SIZE = FRAME_HEADER_SIZE
FRAME_TOPIC_NONE = 0
FRAME_ENCODING_MASK = 0xFF
FRAME_ENCODING_BYTES = 0
FRAME_ENCODING_PICKLE = 1
FRAME_ENCODING_SERIALIZED = 2
OBJECT_BUFFERS_OFFSET = 0
OBJECT_PICKLE_LENGTH_OFFSET = 8
OBJECT_LENGTHS_OFFSET = 16
OBJECT_BUFFER_ALIGN = 8
#: The metadata key of a framed bus (``frames=1``; absent on a bus without frames).
META_FRAMES_KEY = "frames"

TOPICS_SUFFIX = ".topics"
TOPICS_FILE = "bus.topics"
TOPICS_FILE_SIZE = 16384
TOPICS_MAGIC = int.from_bytes(b"MBUSTOP1", "little")
TOPICS_VERSION = 1
TOPICS_MAGIC_OFFSET = 0
TOPICS_VERSION_OFFSET = 8
TOPICS_COUNT_OFFSET = 16
TOPICS_ENTRIES_OFFSET = 64
TOPIC_ENTRY_SIZE = 64
TOPICS_MAX = (TOPICS_FILE_SIZE - TOPICS_ENTRIES_OFFSET) // TOPIC_ENTRY_SIZE   # 255
TOPIC_LENGTH_OFFSET = 0
TOPIC_NAME_OFFSET = 8
TOPIC_NAME_MAX = TOPIC_ENTRY_SIZE - TOPIC_NAME_OFFSET                        # 56


def frame_meta(slots):
    """The first slot's metadata int32 of a frame of ``slots`` slots (a negative int)."""
    if not 1 <= slots <= FRAME_MAX_SLOTS:
        raise ValueError(f"a frame takes 1 to {FRAME_MAX_SLOTS} slots, not {slots}")
    return FRAME_META_FLAG | slots


def frame_meta_slots(meta):
    """The slot count in a first slot's metadata int32; 0 when it is not a frame's (0: not
    written yet; no flag: not this format)."""
    if meta >= 0 or meta & FRAME_META_COUNT_MASK == 0:
        return 0
    return meta & FRAME_META_COUNT_MASK


def frame_slots(length, record_size):
    """Slots a message of ``length`` payload bytes takes."""
    return -(-(FRAME_PAYLOAD_OFFSET + length) // slot_size(record_size))


def frame_max_length(file_size, record_size):
    """The largest message a framed file (a rolling bus: segment) of ``file_size`` holds."""
    slots = min((file_size - FIRST_RECORD_OFFSET) // slot_size(record_size), FRAME_MAX_SLOTS)
    return max(slots * slot_size(record_size) - FRAME_PAYLOAD_OFFSET, -1)


def topic_entry_offset(topic_id):
    """Offset of the topics file's entry of ``topic_id`` (1..TOPICS_MAX)."""
    return TOPICS_ENTRIES_OFFSET + (topic_id - 1) * TOPIC_ENTRY_SIZE


CONSTANTS.update({name: value for name, value in globals().items()
                  if name.startswith(("FRAME_", "OBJECT_", "TOPICS_", "TOPIC_", "META_FRAMES"))
                  and isinstance(value, int | str)})


# -- the side files ---------------------------------------------------------------------------
# Every file (or directory) written beside a bus, named once here: a single-file bus at PATH has
# PATH + suffix for each of SIDE_SUFFIXES, a rolling bus at DIR has DIR/name for each of
# SIDE_FILES. A new side file is added to both. formats.files.side_files(path) lists them for a
# bus; the Spark connector's BusOptions.isSidecar names the same suffixes (a test checks).
SIDE_SUFFIXES = (META_SUFFIX, WAKE_SUFFIX, CONSUMERS_SUFFIX, WRITERS_SUFFIX, COMMIT_LOG_SUFFIX,
                 GROUP_DIR_SUFFIX, TOPICS_SUFFIX)
SIDE_FILES = (META_FILE, WAKE_FILE, CONSUMERS_FILE, WRITERS_FILE, COMMIT_LOG_FILE, GROUP_DIR,
              TIME_INDEX_DIR, TOPICS_FILE)
