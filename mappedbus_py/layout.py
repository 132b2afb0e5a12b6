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

      0            8            12                 64           68           72
      +------------+------------+-- zeros ---------+------------+------------+-- zeros --
      | magic i64  | version i32|                  | parked i32 | armed i32  |
      +------------+------------+------------------+------------+------------+----------
      ^ WAKE_MAGIC_OFFSET       ^ WAKE_VERSION_OFFSET
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
      | pid i32   | state i32   | start i64                       |
      +-----------+-------------+---------------------------------+
      ^ WAKE_SLOT_PID_OFFSET: 0 = free
                  ^ WAKE_SLOT_STATE_OFFSET: 0 idle, 1 parked (counted in parked)
                                ^ WAKE_SLOT_START_OFFSET: the holder's start time, clock
                                  ticks since boot (/proc/PID/stat field 22): a slot whose
                                  pid is gone or reused is reclaimed by the others

The magic (WAKE_MAGIC, "MBUSWAK1") and version are set by compare-and-swap from zero by
whoever opens the file first. The protocol is in ``_wake.h``.

Named consumers keep their positions in a *consumer registry* beside the bus (``PATH +
CONSUMERS_SUFFIX``, or ``DIR/CONSUMERS_FILE`` for a rolling bus), CONSUMERS_FILE_SIZE
bytes, all zero when new, little-endian. The protocol is in ``_consumers.h``::

      0            8             12               64                     72
      +------------+-------------+-- zeros -------+----------------------+-- zeros --
      | magic i64  | version i32 |                | lock i64             |
      +------------+-------------+----------------+----------------------+-----------
      ^ CONSUMERS_MAGIC_OFFSET   ^ CONSUMERS_VERSION_OFFSET
                                                  ^ CONSUMERS_LOCK_OFFSET: 0 free, else the
        holder: pid | (start & 0xFFFFFFFF) << 32 (start as in the wake file). Held for
        structural changes only (an entry made, claimed, released, expired, removed), never
        for a commit; a holder that is gone (no such pid, or another start) is replaced by
        compare-and-swap

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
      CONSUMER_PID_OFFSET, CONSUMER_START_OFFSET: the live holder (0: none); a second
        live holder is refused, a holder that is gone is replaced
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
(docs/files-and-rolling.md, "Spark sink commit log"; ``mappedbus_py.commitlog`` reads it)::

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
WAKE_VERSION = 1
WAKE_MAGIC_OFFSET = 0
WAKE_VERSION_OFFSET = 8
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
CONSUMERS_VERSION = 1
CONSUMERS_MAGIC_OFFSET = 0
CONSUMERS_VERSION_OFFSET = 8
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
        "WAKE_MAGIC_OFFSET", "WAKE_VERSION_OFFSET", "WAKE_PARKED_OFFSET", "WAKE_ARMED_OFFSET",
        "WAKE_SEQ_OFFSET",
        "WAKE_SLOTS_OFFSET", "WAKE_SLOT_SIZE", "WAKE_SLOT_COUNT", "WAKE_SLOT_PID_OFFSET",
        "WAKE_SLOT_STATE_OFFSET", "WAKE_SLOT_START_OFFSET", "DEFAULT_PARK_NS",
        "DEFAULT_PARK_MAX_NS", "DEFAULT_SPIN_NS",
        "CONSUMERS_SUFFIX", "CONSUMERS_FILE", "CONSUMERS_FILE_SIZE", "CONSUMERS_MAGIC",
        "CONSUMERS_VERSION", "CONSUMERS_MAGIC_OFFSET", "CONSUMERS_VERSION_OFFSET",
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
