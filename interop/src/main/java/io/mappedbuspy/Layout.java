package io.mappedbuspy;

import io.mappedbuspy.internal.ConsumerRegistry;
import io.mappedbuspy.internal.Liveness;
import io.mappedbuspy.internal.WakeFile;
import io.mappedbuspy.internal.WritersFile;

/**
 * The Mappedbus 0.5.1 wire layout, written once for the JVM side.
 *
 * <p>All integers are little-endian (the byte order the original wrote through {@code sun.misc.Unsafe}
 * on x86-64 and aarch64). Offsets are bytes from the start of the file.
 *
 * <pre>
 *  0               8
 *  +---------------+--------------------------+--------------------------+----
 *  | limit (int64) | record 0                 | record 1                 | ...
 *  +---------------+--------------------------+--------------------------+----
 *  LIMIT_OFFSET    FIRST_RECORD_OFFSET        recordOffset(1, recordSize)
 *
 *  one record = HEADER_SIZE bytes of header + recordSize bytes of payload:
 *  +0               +4                +8
 *  +----------------+-----------------+--------------------------------------+
 *  | status (int32) | metadata (int32)| payload: recordSize bytes            |
 *  +----------------+-----------------+--------------------------------------+
 *  STATUS_OFFSET    METADATA_OFFSET   PAYLOAD_OFFSET
 *
 *  status:   STATUS_NOT_SET (0) -> STATUS_COMMITTED (1)   by the writer, CAS
 *            STATUS_NOT_SET (0) -> STATUS_ROLLED_BACK (2) by a reader after its timeout, CAS
 *  metadata: the message type (object messages) or the used byte length (byte arrays)
 * </pre>
 *
 * <p>{@code limit} is the offset just past the last allocated record (0 in a new file; the first writer
 * sets it to 8 with a CAS). Neither the record size nor the file size is stored in the file. The mapping
 * (and the file on disk) is the logical file size rounded up to {@link #PAGE_SIZE}; end-of-file checks use
 * the unrounded logical size.
 *
 * <p>Readers of this project park on a <em>wake file</em> beside the bus ({@code PATH + WAKE_SUFFIX}, or
 * {@code DIR/WAKE_FILE} for a rolling bus), never inside the bus file, which writers of this project look at
 * after each commit ({@link WakeFile}; the protocol is {@code mappedbus_py/_core/_wake.h}):
 *
 * <pre>
 *  0            8             12     16         64            68            72
 *  +------------+-------------+------+- zeros --+-------------+-------------+-- zeros --
 *  | magic i64  | version i32 |      |          | parked i32  | armed i32   |
 *  +------------+-------------+------+----------+-------------+-------------+-----------
 *  WAKE_MAGIC_OFFSET, WAKE_VERSION_OFFSET        WAKE_PARKED_OFFSET: readers parked now
 *                                    WAKE_OPEN_LOCK_OFFSET: the byte openers lock
 *                                                WAKE_ARMED_OFFSET: 1 once a reader parked since the last
 *                                                wake; writers load it after each commit
 *  128          132                   256
 *  +------------+-- zeros ------------+--------+--------+-----+------------------------------+
 *  | seq u32    |                     | slot 0 | slot 1 | ... | slot WAKE_SLOT_COUNT-1       |
 *  +------------+---------------------+--------+--------+-----+------------------------------+
 *  WAKE_SEQ_OFFSET: the futex word     WAKE_SLOTS_OFFSET
 *
 *  one slot (WAKE_SLOT_SIZE bytes) per parking reader:
 *  +0            +4              +8
 *  +-------------+---------------+--------------------------------+
 *  | pid i32     | state i32     | taken_ns i64                   |
 *  +-------------+---------------+--------------------------------+
 *  the first byte: the parker's liveness (an OFD lock; unlocked = free); pid and taken_ns for people only
 *                0 idle, 1 parked
 * </pre>
 *
 * <p>Named consumers keep their positions in a <em>consumer registry</em> beside the bus ({@code PATH +
 * CONSUMERS_SUFFIX}, or {@code DIR/CONSUMERS_FILE} for a rolling bus), {@link #CONSUMERS_FILE_SIZE} bytes, all zero
 * when new ({@link ConsumerRegistry}; the protocol is {@code mappedbus_py/_core/_consumers.h}):
 *
 * <pre>
 *  0            8             12     16        64                     72
 *  +------------+-------------+------+- zeros -+----------------------+-- zeros --
 *  | magic i64  | version i32 |      |         | lock i64             |
 *  +------------+-------------+------+---------+----------------------+-----------
 *  CONSUMERS_MAGIC_OFFSET, CONSUMERS_VERSION_OFFSET
 *                                    CONSUMERS_OPEN_LOCK_OFFSET: the byte openers lock
 *                                              CONSUMERS_LOCK_OFFSET: an OFD lock on its first byte
 *                                              (structural changes only); the word shows its pid
 *  128            256            384
 *  +--------------+--------------+-----+-----------------------------------------+
 *  | entry 0      | entry 1      | ... | entry CONSUMER_ENTRY_COUNT - 1          |
 *  +--------------+--------------+-----+-----------------------------------------+
 *  CONSUMERS_ENTRIES_OFFSET, CONSUMER_ENTRY_SIZE bytes each
 *
 *  one entry:
 *  +0         +4         +8         +12        +16           +24             +32
 *  +----------+----------+----------+----------+-------------+---------------+
 *  | gen i32  | flags i32| pid i32  | zero     | start i64   | position i64  |
 *  +----------+----------+----------+----------+-------------+---------------+
 *  +32                 +40                 +48                      +64                 +128
 *  +-------------------+-------------------+------------------------+-------------------+
 *  | committed_ns i64  | created_ns i64    | bus id: 16 bytes       | name: 64 bytes    |
 *  +-------------------+-------------------+------------------------+-------------------+
 *  gen: even = free, odd = in use (+1 at make and at remove, under the lock)
 *  flags: CONSUMER_FLAG_EXPIRED once a writer's retention expired it (cleared by its next commit)
 *  the first byte (gen's): the holder's liveness, an OFD lock held by the reader holding the name
 *  pid, start: the holder's pid and when it took the name (Unix ns), for people only
 *  position: the committed position (one atomic 8-byte store)
 *  name: 1 to CONSUMER_NAME_MAX bytes of UTF-8, NUL padded
 * </pre>
 *
 * <p>Writers of this project say which slots they hold in a <em>writers file</em> beside the bus ({@code PATH +
 * WRITERS_SUFFIX}, or {@code DIR/WRITERS_FILE} for a rolling bus), {@link #WRITERS_FILE_SIZE} bytes, all zero when
 * new ({@link WritersFile}; the protocol is {@code mappedbus_py/_core/_writers.h}, design in docs/design/side-files.md):
 *
 * <pre>
 *  0            8             12                         64
 *  +------------+-------------+-- zeros -----------------+--------+--------+-----+
 *  | magic i64  | version i32 |                          | slot 0 | slot 1 | ... | slot 254
 *  +------------+-------------+--------------------------+--------+--------+-----+
 *  WRITERS_MAGIC_OFFSET, WRITERS_VERSION_OFFSET          WRITERS_SLOTS_OFFSET, WRITER_SLOT_SIZE bytes each,
 *  (set by CAS from 0 by the first opener)               WRITER_SLOT_COUNT slots
 *
 *  one slot:
 *  +0             +8             +16         +20        +24              +32       +64
 *  +--------------+--------------+-----------+----------+----------------+--- zeros -+
 *  | begin i64    | end i64      | pid i32   | zero     | taken_ns i64   |           |
 *  +--------------+--------------+-----------+----------+----------------+-----------+
 *  begin, end: the writer's current claim [begin, end) in bus positions, stored begin then end (release)
 *    after each fetch-and-add; begin &gt;= end: none. pid, taken_ns: for people only.
 *  liveness byte: the slot's first byte, OFD-locked by its live holder ({@link Liveness})
 * </pre>
 *
 * <p>The Spark connector's exactly-once sink keeps a <em>commit log</em> beside the bus ({@code PATH +
 * COMMIT_LOG_SUFFIX}, or {@code DIR/COMMIT_LOG_FILE} for a rolling bus): an append-only file of
 * {@link #COMMIT_ENTRY_SIZE}-byte entries appended under an exclusive file lock (docs/files-and-rolling.md, "Spark
 * sink commit log"; {@code mappedbus_py/formats/commitlog.py} reads it):
 *
 * <pre>
 *  +0          +4         +8             +16            +24          +32           +36    +40
 *  +-----------+----------+--------------+--------------+------------+-------------+------+
 *  | magic i32 | kind i32 | query hi i64 | query lo i64 | epoch i64  | partition   | zero |
 *  +-----------+----------+--------------+--------------+------------+-------------+------+
 *  +40            +48            +56             +64                +72
 *  +--------------+--------------+---------------+------------------+
 *  | first i64    | count i64    | source i64    | crc i64          |
 *  +--------------+--------------+---------------+------------------+
 *  magic: COMMIT_LOG_MAGIC ("MBCL"); kind: COMMIT_ENTRY_INTENT, _SEALED, _DONE, _VOID
 *  query hi/lo (a UUID), epoch (-1: a batch write), partition: the key of the task that wrote it
 *  first, count: INTENT/VOID a range's first position and slots; SEALED the group's first position and records
 *  source: -1, or the group (its first position) a repair copies
 *  crc: CRC-32 of bytes [0, COMMIT_ENTRY_CRC_OFFSET), zero-extended; another magic or crc (a torn entry): no entry
 * </pre>
 */
public final class Layout {
    /** Offset of the int64 limit field (offset just past the last allocated record). */
    public static final int LIMIT_OFFSET = 0;
    /** Offset of record 0. */
    public static final int FIRST_RECORD_OFFSET = 8;
    /** Offset of the int32 status within a record. */
    public static final int STATUS_OFFSET = 0;
    /** Offset of the int32 metadata (type or byte length) within a record. */
    public static final int METADATA_OFFSET = 4;
    /** Offset of the payload within a record. */
    public static final int PAYLOAD_OFFSET = 8;
    /** Size of a record header (status + metadata). */
    public static final int HEADER_SIZE = 8;
    /** Status of an allocated record whose writer has not committed yet. */
    public static final int STATUS_NOT_SET = 0;
    /** Status of a committed record. */
    public static final int STATUS_COMMITTED = 1;
    /** Status of a record a reader rolled back after its timeout. */
    public static final int STATUS_ROLLED_BACK = 2;
    /** Granularity the mapping size (and the file length) is rounded up to. */
    public static final int PAGE_SIZE = 4096;
    /** Default reader timeout before an uncommitted record is rolled back, in milliseconds. */
    public static final int DEFAULT_TIMEOUT_MS = 2000;
    /**
     * Smallest rollback timeout a reader accepts, in milliseconds: a slot is rolled back only after it has
     * stayed allocated but uncommitted this long, so a live writer between its fetch-and-add and its commit
     * (a descheduled thread, a page fault) is never taken for a crashed one.
     */
    public static final int MIN_ROLLBACK_TIMEOUT_MS = 10;

    // ---- files around the wire format (layout.py's docstring has the diagram and the keys) ----

    /** Suffix of a single-file bus's metadata file: {@code PATH + META_SUFFIX}. */
    public static final String META_SUFFIX = ".meta";
    /** Name of a rolling bus's metadata file inside its directory. */
    public static final String META_FILE = "bus.meta";
    /** First line of every metadata file. */
    public static final String META_MAGIC = "# mappedbus bus metadata";
    /** The metadata format this version writes and reads ({@code format=} key). */
    public static final int META_FORMAT = 1;
    /** Largest metadata file accepted, in bytes. */
    public static final int META_MAX_BYTES = 4096;
    /** Suffix of a rolling-bus segment file; its name is {@link #segmentName(long)}. */
    public static final String SEGMENT_SUFFIX = ".bus";
    /** Decimal digits of a segment's index in its file name. */
    public static final int SEGMENT_DIGITS = 20;
    /** Prefix of a file being written (a segment or metadata) before it is linked into place. */
    public static final String TMP_PREFIX = ".tmp-";
    /**
     * A segment's claim: a POSIX write lock (never waited for) on the byte at {@code SEGMENT_CLAIM_BASE + index} of
     * {@link #META_FILE}, held by the writer making that segment.
     */
    public static final long SEGMENT_CLAIM_BASE = 1L << 40;
    /** How long a writer that must roll waits for a segment another writer claimed before making it itself. */
    public static final long SEGMENT_CLAIM_WAIT_MS = 2_000;

    // ---- the wake file beside a bus (layout.py's docstring has the diagram; _wake.h the protocol) ----

    /** Suffix of a single-file bus's wake file: {@code PATH + WAKE_SUFFIX}. */
    public static final String WAKE_SUFFIX = ".wake";
    /** Name of a rolling bus's wake file inside its directory. */
    public static final String WAKE_FILE = "bus.wake";
    /** Size of a wake file; all zero when new (a valid empty state). */
    public static final int WAKE_FILE_SIZE = 4096;
    /** int64 at {@link #WAKE_MAGIC_OFFSET}: "MBUSWAK1" little-endian, set by CAS from 0 by the first opener. */
    public static final long WAKE_MAGIC = 0x314B41575355424DL;
    /**
     * int32 at {@link #WAKE_VERSION_OFFSET}, set by CAS from 0 by the first opener. 2: parkers are known by OFD locks
     * on their slots' first bytes ({@link Liveness}); a file of version 1 (parkers known by pid) is refused.
     */
    public static final int WAKE_VERSION = 2;
    /** Offset of the int64 magic. */
    public static final int WAKE_MAGIC_OFFSET = 0;
    /** Offset of the int32 version. */
    public static final int WAKE_VERSION_OFFSET = 8;
    /**
     * The one byte openers lock (the POSIX open lock) while they create and size the file: a whole-file lock would
     * wait on the slots' liveness locks.
     */
    public static final int WAKE_OPEN_LOCK_OFFSET = 16;
    /** Offset of the int32 count of readers parked now. */
    public static final int WAKE_PARKED_OFFSET = 64;
    /**
     * Offset of the int32 armed flag (beside the count): 1 once a reader parked since the last wake. A writer
     * loads it after each commit, and wakes only if it exchanges it from 1 to 0.
     */
    public static final int WAKE_ARMED_OFFSET = 68;
    /**
     * Offset of the uint32 futex word (its own cache line): a writer that finds readers parked adds 1 and
     * wakes them; a parker sleeps while it holds the value it read.
     */
    public static final int WAKE_SEQ_OFFSET = 128;
    /** Offset of the first parking slot. */
    public static final int WAKE_SLOTS_OFFSET = 256;
    /** Size of a parking slot: pid, state, taken time. */
    public static final int WAKE_SLOT_SIZE = 16;
    /** Number of parking slots: {@code (WAKE_FILE_SIZE - WAKE_SLOTS_OFFSET) / WAKE_SLOT_SIZE}. */
    public static final int WAKE_SLOT_COUNT = (WAKE_FILE_SIZE - WAKE_SLOTS_OFFSET) / WAKE_SLOT_SIZE;
    /**
     * Offset in a slot of the int32 pid of its holder, for people only. The slot's first byte is its liveness byte:
     * locked (an OFD lock) while its parker lives; unlocked, the slot is free whatever the words say.
     */
    public static final int WAKE_SLOT_PID_OFFSET = 0;
    /** Offset in a slot of the int32 state: 0 idle, 1 parked (counted at {@link #WAKE_PARKED_OFFSET}). */
    public static final int WAKE_SLOT_STATE_OFFSET = 4;
    /** Offset in a slot of the int64 time it was taken (Unix ns), for people only. */
    public static final int WAKE_SLOT_START_OFFSET = 8;
    /**
     * How long a parked reader sleeps before it looks by itself, in nanoseconds, at first: the bound on the delay of
     * a record from a writer that wakes nobody (the Java original, one killed between its commit and its wake). It
     * doubles up to {@link #DEFAULT_PARK_MAX_NS} while such looks find nothing, and returns to this once one finds
     * a record that came without a wake ({@code wake_backoff} in {@code _wake.h}).
     */
    public static final long DEFAULT_PARK_NS = 1_000_000;
    /** The most a parked reader's own bound grows to while its looks find nothing, in nanoseconds. */
    public static final long DEFAULT_PARK_MAX_NS = 16_000_000;
    /**
     * How long a SPIN_PARK reader spins before it parks (perf/bench_wake.py --spin-sweep: shorter spins park
     * both sides of a round trip; longer ones cost CPU on a sporadic stream for no measurable gain).
     */
    public static final long DEFAULT_SPIN_NS = 10_000;

    // ---- the consumer registry beside a bus (the diagram above; _consumers.h the protocol) ----

    /** Suffix of a single-file bus's consumer registry: {@code PATH + CONSUMERS_SUFFIX}. */
    public static final String CONSUMERS_SUFFIX = ".consumers";
    /** Name of a rolling bus's consumer registry inside its directory. */
    public static final String CONSUMERS_FILE = "bus.consumers";
    /** Size of a consumer registry; all zero when new (a valid empty registry). */
    public static final int CONSUMERS_FILE_SIZE = 32768;
    /** int64 at {@link #CONSUMERS_MAGIC_OFFSET}: "MBUSCON1" little-endian, set by CAS from 0 by the first opener. */
    public static final long CONSUMERS_MAGIC = 0x314E4F435355424DL;
    /**
     * int32 at {@link #CONSUMERS_VERSION_OFFSET}, set by CAS from 0 by the first opener. 2: holders and the lock are
     * OFD locks ({@link Liveness}); a registry of version 1 (holders known by pid) is refused.
     */
    public static final int CONSUMERS_VERSION = 2;
    /** Offset of the registry's int64 magic. */
    public static final int CONSUMERS_MAGIC_OFFSET = 0;
    /** Offset of the registry's int32 version. */
    public static final int CONSUMERS_VERSION_OFFSET = 8;
    /** The one byte openers lock while they create and size the registry (as {@link #WAKE_OPEN_LOCK_OFFSET}). */
    public static final int CONSUMERS_OPEN_LOCK_OFFSET = 16;
    /**
     * Offset of the lock of structural changes: an OFD lock on this word's first byte, taken without blocking and
     * retried for a bounded time; the word shows the holder's pid, for people only.
     */
    public static final int CONSUMERS_LOCK_OFFSET = 64;
    /** Offset of entry 0. */
    public static final int CONSUMERS_ENTRIES_OFFSET = 128;
    /** Size of one consumer entry. */
    public static final int CONSUMER_ENTRY_SIZE = 128;
    /** Number of entries: {@code (CONSUMERS_FILE_SIZE - CONSUMERS_ENTRIES_OFFSET) / CONSUMER_ENTRY_SIZE}. */
    public static final int CONSUMER_ENTRY_COUNT = (CONSUMERS_FILE_SIZE - CONSUMERS_ENTRIES_OFFSET) / CONSUMER_ENTRY_SIZE;
    /** Offset in an entry of the int32 generation: odd while in use. */
    public static final int CONSUMER_GEN_OFFSET = 0;
    /** Offset in an entry of the int32 flags ({@link #CONSUMER_FLAG_EXPIRED}). */
    public static final int CONSUMER_FLAGS_OFFSET = 4;
    /**
     * Offset in an entry of the int32 pid of its holder, for people only; the entry's first byte is its liveness
     * byte, locked (an OFD lock) by the reader holding the name.
     */
    public static final int CONSUMER_PID_OFFSET = 8;
    /** Offset in an entry of the int64 time its holder took it (Unix ns), for people only. */
    public static final int CONSUMER_START_OFFSET = 16;
    /** Offset in an entry of the int64 committed position. */
    public static final int CONSUMER_POSITION_OFFSET = 24;
    /** Offset in an entry of the int64 time of the last commit, Unix epoch nanoseconds (a coarse clock). */
    public static final int CONSUMER_COMMITTED_NS_OFFSET = 32;
    /** Offset in an entry of the int64 time the entry was made, Unix epoch nanoseconds. */
    public static final int CONSUMER_CREATED_NS_OFFSET = 40;
    /** Offset in an entry of the bus's id (16 bytes; zeros for a bus file without metadata). */
    public static final int CONSUMER_BUS_ID_OFFSET = 48;
    /** Size of the bus id in an entry. */
    public static final int CONSUMER_BUS_ID_SIZE = 16;
    /** Offset in an entry of the name: UTF-8, NUL padded. */
    public static final int CONSUMER_NAME_OFFSET = 64;
    /** Longest consumer name, in UTF-8 bytes. */
    public static final int CONSUMER_NAME_MAX = 64;
    /** Bit of the flags set once a writer's retention expired the consumer. */
    public static final int CONSUMER_FLAG_EXPIRED = 1;
    /** How long a writer waits for a lagging consumer (on_consumer_lag=block) by default, in milliseconds. */
    public static final long DEFAULT_CONSUMER_BLOCK_MS = 10_000;

    /** Suffix of a single-file bus's writers file: {@code PATH + WRITERS_SUFFIX}. */
    public static final String WRITERS_SUFFIX = ".writers";
    /** A rolling bus's writers file in its directory. */
    public static final String WRITERS_FILE = "bus.writers";
    /** Size in bytes of a writers file. */
    public static final int WRITERS_FILE_SIZE = 16384;
    /** int64 at {@link #WRITERS_MAGIC_OFFSET}: "MBUSWRT1" little-endian, set by CAS from 0 by the first opener. */
    public static final long WRITERS_MAGIC = 0x315452575355424DL;
    /** int32 at {@link #WRITERS_VERSION_OFFSET}, set by CAS from 0 by the first opener. */
    public static final int WRITERS_VERSION = 1;
    /** Offset of the int64 magic. */
    public static final int WRITERS_MAGIC_OFFSET = 0;
    /** Offset of the int32 version. */
    public static final int WRITERS_VERSION_OFFSET = 8;
    /** Offset of slot 0. */
    public static final int WRITERS_SLOTS_OFFSET = 64;
    /** Size of one writer's slot: a cache line its writer owns. */
    public static final int WRITER_SLOT_SIZE = 64;
    /** Number of writer slots: {@code (WRITERS_FILE_SIZE - WRITERS_SLOTS_OFFSET) / WRITER_SLOT_SIZE}. */
    public static final int WRITER_SLOT_COUNT = (WRITERS_FILE_SIZE - WRITERS_SLOTS_OFFSET) / WRITER_SLOT_SIZE;
    /** Offset in a slot of the int64 first position of the writer's claim. */
    public static final int WRITER_BEGIN_OFFSET = 0;
    /** Offset in a slot of the int64 end of the claim (one past its last slot); begin &gt;= end: none. */
    public static final int WRITER_END_OFFSET = 8;
    /** Offset in a slot of the int32 pid of its holder (for people only). */
    public static final int WRITER_PID_OFFSET = 16;
    /** Offset in a slot of the int64 Unix ns its holder took it (for people only). */
    public static final int WRITER_TAKEN_NS_OFFSET = 24;

    /** Suffix of a single-file bus's Spark sink commit log: {@code PATH + COMMIT_LOG_SUFFIX}. */
    public static final String COMMIT_LOG_SUFFIX = ".commits";
    /** A rolling bus's Spark sink commit log, in its directory. */
    public static final String COMMIT_LOG_FILE = "bus.commits";
    /** int32 at {@link #COMMIT_ENTRY_MAGIC_OFFSET} of every entry: "MBCL" little-endian. */
    public static final int COMMIT_LOG_MAGIC = 0x4C43424D;
    /** Size of one commit log entry. */
    public static final int COMMIT_ENTRY_SIZE = 72;
    /** Offset in an entry of the int32 magic. */
    public static final int COMMIT_ENTRY_MAGIC_OFFSET = 0;
    /** Offset in an entry of the int32 kind ({@link #COMMIT_ENTRY_INTENT} ...). */
    public static final int COMMIT_ENTRY_KIND_OFFSET = 4;
    /** Offset in an entry of the int64 high half of the query id. */
    public static final int COMMIT_ENTRY_QUERY_HI_OFFSET = 8;
    /** Offset in an entry of the int64 low half of the query id. */
    public static final int COMMIT_ENTRY_QUERY_LO_OFFSET = 16;
    /** Offset in an entry of the int64 epoch (-1 for a batch write). */
    public static final int COMMIT_ENTRY_EPOCH_OFFSET = 24;
    /** Offset in an entry of the int32 partition id (4 zero bytes follow). */
    public static final int COMMIT_ENTRY_PARTITION_OFFSET = 32;
    /** Offset in an entry of the int64 first position (of a range, or of a group). */
    public static final int COMMIT_ENTRY_FIRST_OFFSET = 40;
    /** Offset in an entry of the int64 count (a range's slots, or a group's records). */
    public static final int COMMIT_ENTRY_COUNT_OFFSET = 48;
    /** Offset in an entry of the int64 source: -1, or the group a repair copies. */
    public static final int COMMIT_ENTRY_SOURCE_OFFSET = 56;
    /** Offset in an entry of the int64 CRC-32 of the bytes before it. */
    public static final int COMMIT_ENTRY_CRC_OFFSET = 64;
    /** Kind of an entry reserving a range of slots whose bytes are being written. */
    public static final int COMMIT_ENTRY_INTENT = 1;
    /** Kind of an entry sealing a group of ranges: all its records' bytes are written. */
    public static final int COMMIT_ENTRY_SEALED = 2;
    /** Kind of an entry ending a task: each of its records is committed once. */
    public static final int COMMIT_ENTRY_DONE = 3;
    /** Kind of an entry giving up an unsealed range (its uncommitted slots rolled back). */
    public static final int COMMIT_ENTRY_VOID = 4;

    // -- work groups (issue 35): layout.py GROUP_*, mappedbus_py/groups/_group.h --------------

    /** Suffix of a single-file bus's groups directory: {@code PATH.groups}. */
    public static final String GROUP_DIR_SUFFIX = ".groups";
    /** A rolling bus's groups directory, in its directory. */
    public static final String GROUP_DIR = "groups";
    /** Suffix of a group file: {@code NAME.group}. */
    public static final String GROUP_SUFFIX = ".group";
    /** Suffix of a group's dead-letter bus (a rolling bus): {@code NAME.dead}. */
    public static final String GROUP_DEAD_SUFFIX = ".dead";
    /** Longest group name, in UTF-8 bytes. */
    public static final int GROUP_NAME_MAX = 64;
    /** int64 at {@link #GROUP_MAGIC_OFFSET}: "MBUSGRP1" little-endian. */
    public static final long GROUP_MAGIC = 3553430572289573453L;
    /** int32 at {@link #GROUP_VERSION_OFFSET}. */
    public static final int GROUP_VERSION = 1;
    /** Offset in a group file of its magic. */
    public static final int GROUP_MAGIC_OFFSET = 0;
    /** Offset in a group file of its version. */
    public static final int GROUP_VERSION_OFFSET = 8;
    /** Offset in a group file of its window. */
    public static final int GROUP_WINDOW_OFFSET = 12;
    /** Offset in a group file of its max deliveries. */
    public static final int GROUP_MAX_DELIVERIES_OFFSET = 16;
    /** Offset in a group file of its max in flight. */
    public static final int GROUP_MAX_IN_FLIGHT_OFFSET = 20;
    /** Offset in a group file of its lease ns. */
    public static final int GROUP_LEASE_NS_OFFSET = 24;
    /** Offset in a group file of its bus id. */
    public static final int GROUP_BUS_ID_OFFSET = 32;
    /** Bytes of the bus id in the header. */
    public static final int GROUP_BUS_ID_SIZE = 16;
    /** Offset in a group file of its created ns. */
    public static final int GROUP_CREATED_NS_OFFSET = 48;
    /** Offset in a group file of its start position. */
    public static final int GROUP_START_POSITION_OFFSET = 56;
    /** Offset in a group file of its start. */
    public static final int GROUP_START_OFFSET = 64;
    /** Offset in a group file of its end. */
    public static final int GROUP_END_OFFSET = 128;
    /** Offset in a group file of its redelivered. */
    public static final int GROUP_REDELIVERED_OFFSET = 192;
    /** Offset in a dead letter of its lettered. */
    public static final int GROUP_DEAD_LETTERED_OFFSET = 200;
    /** Offset in a group file of its released. */
    public static final int GROUP_RELEASED_OFFSET = 208;
    /** Offset in a group file of its rejected. */
    public static final int GROUP_REJECTED_OFFSET = 216;
    /** Offset in a group file of its hint. */
    public static final int GROUP_HINT_OFFSET = 224;
    /** Offset in a group file of its members. */
    public static final int GROUP_MEMBERS_OFFSET = 256;
    /** Bytes of a member slot (its first byte is the member's liveness byte). */
    public static final int GROUP_MEMBER_SIZE = 64;
    /** Member slots of a group file. */
    public static final int GROUP_MEMBER_COUNT = 128;
    /** Offset in a member slot of its pid. */
    public static final int GROUP_MEMBER_PID_OFFSET = 0;
    /** Offset in a member slot of its in flight. */
    public static final int GROUP_MEMBER_IN_FLIGHT_OFFSET = 4;
    /** Offset in a member slot of its acked. */
    public static final int GROUP_MEMBER_ACKED_OFFSET = 8;
    /** Offset in a member slot of its taken ns. */
    public static final int GROUP_MEMBER_TAKEN_NS_OFFSET = 16;
    /** Offset in a member slot of its delivered. */
    public static final int GROUP_MEMBER_DELIVERED_OFFSET = 24;
    /** Offset in a member slot of its name. */
    public static final int GROUP_MEMBER_NAME_OFFSET = 32;
    /** Bytes of a member's name. */
    public static final int GROUP_MEMBER_NAME_MAX = 24;
    /** Offset in a group file of its entries. */
    public static final int GROUP_ENTRIES_OFFSET = 8448;
    /** Bytes of an entry. */
    public static final int GROUP_ENTRY_SIZE = 32;
    /** Offset in an entry of its word. */
    public static final int GROUP_ENTRY_WORD_OFFSET = 0;
    /** Offset in an entry of its lease. */
    public static final int GROUP_ENTRY_LEASE_OFFSET = 8;
    /** Offset in an entry of its position. */
    public static final int GROUP_ENTRY_POSITION_OFFSET = 16;
    /** Offset in an entry of a framed bus's message slot count (tag &lt;&lt; 32 | slots). */
    public static final int GROUP_ENTRY_SLOTS_OFFSET = 24;
    /** Entry state: no record acquired in this lap. */
    public static final int GROUP_EMPTY = 0;
    /** Entry state: delivered to its owner, not settled. */
    public static final int GROUP_ACQUIRED = 1;
    /** Entry state: given back, to be delivered again. */
    public static final int GROUP_RELEASED = 2;
    /** Entry state: done. */
    public static final int GROUP_ACKED = 3;
    /** Entry state: dead-lettered (rejected or out of deliveries). */
    public static final int GROUP_DEAD = 4;
    /** Entry state: its bus slot was rolled back; nobody gets it. */
    public static final int GROUP_SKIP = 5;
    /** Entries of a group made without {@code window}. */
    public static final int GROUP_DEFAULT_WINDOW = 4096;
    /** Most entries a group may have. */
    public static final int GROUP_MAX_WINDOW = 1048576;
    /** Deliveries before a record is dead-lettered, by default. */
    public static final int GROUP_DEFAULT_MAX_DELIVERIES = 5;
    /** A delivery's lease, by default (nanoseconds). */
    public static final long GROUP_DEFAULT_LEASE_NS = 30000000000L;
    /** Offset in a dead letter of its position. */
    public static final int GROUP_DEAD_POSITION_OFFSET = 0;
    /** Offset in a dead letter of its deliveries. */
    public static final int GROUP_DEAD_DELIVERIES_OFFSET = 8;
    /** Offset in a dead letter of its meta. */
    public static final int GROUP_DEAD_META_OFFSET = 12;
    /** Offset in a dead letter of its name. */
    public static final int GROUP_DEAD_NAME_OFFSET = 16;
    /** Bytes of a dead letter's header, before the record's payload. */
    public static final int GROUP_DEAD_HEADER_SIZE = 80;

    // ---- the journal (issue 37; docs/design/journal.md) ----
    //
    // A rolling bus's TIME INDEX: one file per segment, DIR/TIME_INDEX_DIR/<20 digits>.time, moved into the archive
    // with its segment (TimeIndex). Little-endian:
    //
    //   0             8             12            16                           32
    //   +-------------+-------------+-------------+----------------------------+
    //   | magic i64   | version i32 | entry size  | bus id (16 bytes: bus.meta |
    //   | "MBUSTIX1"  | (1)         | i32 (16)    | id as bytes)               |
    //   +-------------+-------------+-------------+----------------------------+
    //   32              40                 48              52       64
    //   +---------------+------------------+---------------+-- zeros-+
    //   | segment i64   | segment_size i64 | record_size   |         |
    //   |               |                  | i32           |         |
    //   +---------------+------------------+---------------+---------+
    //   TIME_INDEX_ENTRIES_OFFSET (64): entries of TIME_INDEX_ENTRY_SIZE (16) bytes, appended (one write(2) each,
    //   O_APPEND), at most one per writer per millisecond:
    //   +------------------+-------------------+
    //   | time_ns i64      | position i64      |   the time read just before the record's slot was allocated,
    //   +------------------+-------------------+   and that record's global position
    //   TIME_ENTRY_TIME_OFFSET, TIME_ENTRY_POSITION_OFFSET
    //
    // The ARCHIVE directory (bus.meta key archive_dir; ArchiveFiles): ARCHIVE/<20 digits>.bus (the segment's bytes),
    // .bus.zst (one zstd frame of them) or .bus.lz4 (one LZ4 frame), ARCHIVE/TIME_INDEX_DIR/<20 digits>.time.

    /** Directory of a bus's (or its archive's) time index files. */
    public static final String TIME_INDEX_DIR = "index";
    /** Suffix of a time index file; its name is the segment's 20 digits and this. */
    public static final String TIME_INDEX_SUFFIX = ".time";
    /** "MBUSTIX1", little-endian. */
    public static final long TIME_INDEX_MAGIC = 0x315849545355424DL;
    /** Version of the time index layout. */
    public static final int TIME_INDEX_VERSION = 1;
    /** Offset of the time index's magic. */
    public static final int TIME_INDEX_MAGIC_OFFSET = 0;
    /** Offset of the time index's version. */
    public static final int TIME_INDEX_VERSION_OFFSET = 8;
    /** Offset of the time index's entry size. */
    public static final int TIME_INDEX_ENTRY_SIZE_OFFSET = 12;
    /** Offset of the time index's bus id (the 16 bytes of bus.meta's 32 hex digits). */
    public static final int TIME_INDEX_BUS_ID_OFFSET = 16;
    /** Bytes of the bus id. */
    public static final int TIME_INDEX_BUS_ID_SIZE = 16;
    /** Offset of the time index's segment index. */
    public static final int TIME_INDEX_SEGMENT_OFFSET = 32;
    /** Offset of the time index's segment size. */
    public static final int TIME_INDEX_SEGMENT_SIZE_OFFSET = 40;
    /** Offset of the time index's record size. */
    public static final int TIME_INDEX_RECORD_SIZE_OFFSET = 48;
    /** Offset of the first entry: the header's size. */
    public static final int TIME_INDEX_ENTRIES_OFFSET = 64;
    /** Bytes of one entry. */
    public static final int TIME_INDEX_ENTRY_SIZE = 16;
    /** Offset in an entry of its time (Unix ns, CLOCK_REALTIME). */
    public static final int TIME_ENTRY_TIME_OFFSET = 0;
    /** Offset in an entry of its record's global position. */
    public static final int TIME_ENTRY_POSITION_OFFSET = 8;
    /** The index's resolution: at most one entry per writer per this many nanoseconds. */
    public static final long TIME_INDEX_RESOLUTION_NS = 1_000_000L;
    /** Suffix of an archived segment stored as it was (after .bus: none). */
    public static final String ARCHIVE_SUFFIX_NONE = "";
    /** Suffix of an archived segment stored as one zstd frame. */
    public static final String ARCHIVE_SUFFIX_ZSTD = ".zst";
    /** Suffix of an archived segment stored as one LZ4 frame. */
    public static final String ARCHIVE_SUFFIX_LZ4 = ".lz4";
    /** zstd's level for archived segments: 1, the fastest that keeps the ratio (layout.py says why). */
    public static final int ARCHIVE_ZSTD_LEVEL = 1;
    /**
     * The piece of a segment each zstd frame of an archived segment holds (layout.py, "ZSTD SEEKABLE"): 128 KiB, eight
     * frames of a 1 MiB segment that a reader and the pool decompressing ahead share as they come.
     */
    public static final int ARCHIVE_ZSTD_FRAME_BYTES = 128 * 1024;
    /** The seek table's skippable-frame magic (zstd's seekable format). */
    public static final int ARCHIVE_ZSTD_SKIPPABLE_MAGIC = 0x184D2A5E;
    /**
     * The seek table's last four bytes, the file's last: zstd's seekable format's magic, a u32 (a long: as an int it
     * would read negative, not layout.py's value).
     */
    public static final long ARCHIVE_ZSTD_SEEKABLE_MAGIC = 0x8F92EAB1L;
    /** A seek-table entry: u32 compressed size, u32 decompressed size (no checksums). */
    public static final int ARCHIVE_ZSTD_SEEK_ENTRY_SIZE = 8;
    /** The seek table's footer: u32 frames, u8 descriptor, u32 seekable magic. */
    public static final int ARCHIVE_ZSTD_SEEK_FOOTER_SIZE = 9;
    /** The only descriptor written and read: no checksums. */
    public static final int ARCHIVE_ZSTD_SEEK_DESCRIPTOR = 0;
    /** The most frames a seek table may list: a larger count is corrupt. */
    public static final int ARCHIVE_ZSTD_MAX_FRAMES = 1 << 16;
    /** The bus.meta key ({@code time_index=1}) of a bus that keeps a time index: every writer appends to it. */
    public static final String TIME_INDEX_META_KEY = "time_index";
    /** The archiver's lock: an OFD lock on this byte of DIR/bus.meta. */
    public static final long ARCHIVER_LOCK_BYTE = SEGMENT_CLAIM_BASE - 1;
    /**
     * The oldest full hot segment is due to move once the current one's limit is past this share (percent) of
     * the segment, when {@code archive_after >= 1} full segments are hot: the hot directory never holds more than
     * {@code archive_after + 1} segments with records, not even at a roll (layout.py, WHEN a segment moves).
     */
    public static final int ARCHIVER_EARLY_FILL_PERCENT = 50;
    /** How often an archiver looks at the current segment while the bus moves (ms). */
    public static final int ARCHIVER_ACTIVE_POLL_MS = 1;
    /** How often an idle archiver looks (ms); a roll of its own writer wakes it at once. */
    public static final int ARCHIVER_IDLE_POLL_MS = 50;
    /** An archiver is idle after this long (ms) without a change of the current segment's limit. */
    public static final int ARCHIVER_IDLE_AFTER_MS = 200;
    // -- frames and topics (issue 36): layout.py FRAME_*/TOPICS_*/TOPIC_*, docs/design/frames.md -----------
    //
    //   pos (first slot)                                                    pos + n * slot
    //   +--------+--------+-----------+----------+----------+--------------------~~-----+
    //   | status | meta   | length    | topic    | flags    | payload: `length` bytes,  |
    //   |  i32   |  i32   |  i64      |  i32     |  i32     | then unused to the end   |
    //   +--------+--------+-----------+----------+----------+--------------------~~-----+
    //   0        4        8           16         20         24 = FRAME_PAYLOAD_OFFSET
    //
    //   meta: FRAME_META_FLAG | n (n slots, reserved by one fetch-and-add); 0: not written yet. The payload runs on
    //   over the following n - 1 slots' headers (continuation slots: never read as slots).

    /** Bit 31 of a framed message's first-slot metadata: this slot begins a frame (a message or a padding). */
    public static final int FRAME_META_FLAG = Integer.MIN_VALUE;
    /** Bits 0..30 of that metadata: the frame's slot count. */
    public static final int FRAME_META_COUNT_MASK = Integer.MAX_VALUE;
    /** Most slots of one frame. */
    public static final int FRAME_MAX_SLOTS = Integer.MAX_VALUE;
    /** Offset of the int64 payload length, from the first slot's payload ({@link #PAYLOAD_OFFSET}). */
    public static final int FRAME_LENGTH_OFFSET = 0;
    /** Offset of the int32 topic id, from the first slot's payload. */
    public static final int FRAME_TOPIC_OFFSET = 8;
    /** Offset of the int32 flags (bits 0..7: the encoding), from the first slot's payload. */
    public static final int FRAME_FLAGS_OFFSET = 12;
    /** Bytes of the frame header. */
    public static final int FRAME_HEADER_SIZE = 16;
    /** Offset of a message's payload from its first slot's start. */
    public static final int FRAME_PAYLOAD_OFFSET = HEADER_SIZE + FRAME_HEADER_SIZE;
    /** A framed bus's record size is a multiple of this (the header's int64 aligned). */
    public static final int FRAME_RECORD_ALIGN = 8;
    /** Smallest record size of a framed bus (an empty message fits one slot). */
    public static final int FRAME_MIN_RECORD_SIZE = FRAME_HEADER_SIZE;
    /** Topic id of a message without a topic. */
    public static final int FRAME_TOPIC_NONE = 0;
    /** Bits of the flags holding the encoding. */
    public static final int FRAME_ENCODING_MASK = 0xFF;
    /** Encoding: raw bytes. */
    public static final int FRAME_ENCODING_BYTES = 0;
    /** Encoding: a Python object (pickle protocol 5 with its buffers). */
    public static final int FRAME_ENCODING_PICKLE = 1;
    /** Encoding: bytes of an application's serializer (msgpack, ...). */
    public static final int FRAME_ENCODING_SERIALIZED = 2;
    /** A pickled object's payload: offset of the u32 buffer count. */
    public static final int OBJECT_BUFFERS_OFFSET = 0;
    /** A pickled object's payload: offset of the u64 pickle length. */
    public static final int OBJECT_PICKLE_LENGTH_OFFSET = 8;
    /** A pickled object's payload: offset of the u64 buffer lengths. */
    public static final int OBJECT_LENGTHS_OFFSET = 16;
    /** A pickled object's buffers start at multiples of this from the payload's start. */
    public static final int OBJECT_BUFFER_ALIGN = 8;
    /** The metadata key of a framed bus ({@code frames=1}; absent on a bus without frames). */
    public static final String META_FRAMES_KEY = "frames";

    //   The topics file: PATH + TOPICS_SUFFIX, or DIR/TOPICS_FILE; append-only, all zero when new:
    //   0            8             12        16          20                      64
    //   +------------+-------------+---------+-----------+-- zeros --------------+
    //   | magic i64  | version i32 | zero    | count i32 |                       |
    //   +------------+-------------+---------+-----------+-----------------------+
    //   64: TOPICS_MAX entries of TOPIC_ENTRY_SIZE bytes, entry i = topic id i + 1:
    //   | length i32 (release, after the name; 0: claimed, unpublished) | zero | name: UTF-8, NUL padded |

    /** Suffix of a single-file bus's topics file: {@code PATH + TOPICS_SUFFIX}. */
    public static final String TOPICS_SUFFIX = ".topics";
    /** A rolling bus's topics file, in its directory. */
    public static final String TOPICS_FILE = "bus.topics";
    /** Size of the topics file. */
    public static final int TOPICS_FILE_SIZE = 16384;
    /** int64 at {@link #TOPICS_MAGIC_OFFSET}: "MBUSTOP1" little-endian, set by CAS from 0 by the first opener. */
    public static final long TOPICS_MAGIC = 0x31504F545355424DL;
    /** int32 at {@link #TOPICS_VERSION_OFFSET}. */
    public static final int TOPICS_VERSION = 1;
    /** Offset of the magic. */
    public static final int TOPICS_MAGIC_OFFSET = 0;
    /** Offset of the version. */
    public static final int TOPICS_VERSION_OFFSET = 8;
    /** Offset of the int32 count of entries claimed (CAS c -> c + 1). */
    public static final int TOPICS_COUNT_OFFSET = 16;
    /** Offset of the first entry. */
    public static final int TOPICS_ENTRIES_OFFSET = 64;
    /** Size of one entry. */
    public static final int TOPIC_ENTRY_SIZE = 64;
    /** Number of entries: the most topic ids a bus has. */
    public static final int TOPICS_MAX = (TOPICS_FILE_SIZE - TOPICS_ENTRIES_OFFSET) / TOPIC_ENTRY_SIZE;
    /** Offset in an entry of the int32 name length (0: not published). */
    public static final int TOPIC_LENGTH_OFFSET = 0;
    /** Offset in an entry of the name. */
    public static final int TOPIC_NAME_OFFSET = 8;
    /** Longest topic name, in UTF-8 bytes. */
    public static final int TOPIC_NAME_MAX = TOPIC_ENTRY_SIZE - TOPIC_NAME_OFFSET;

    private Layout() {
    }

    /**
     * The first-slot metadata of a frame of {@code slots} slots (python: frame_meta).
     *
     * @param slots 1..FRAME_MAX_SLOTS
     * @return {@code FRAME_META_FLAG | slots}, a negative int
     */
    public static int frameMeta(long slots) {
        if (slots < 1 || slots > FRAME_MAX_SLOTS) {
            throw new IllegalArgumentException("a frame takes 1 to " + FRAME_MAX_SLOTS + " slots, not " + slots);
        }
        return FRAME_META_FLAG | (int) slots;
    }

    /**
     * The slot count in a first slot's metadata (python: frame_meta_slots).
     *
     * @param meta the int32
     * @return its count, or 0 when it is not a frame's (0: not written yet; no flag: not this format)
     */
    public static int frameMetaSlots(int meta) {
        return meta >= 0 ? 0 : meta & FRAME_META_COUNT_MASK;
    }

    /**
     * Slots a message of {@code length} payload bytes takes (python: frame_slots).
     *
     * @param length     payload bytes
     * @param recordSize the bus's record size
     * @return ceil((FRAME_PAYLOAD_OFFSET + length) / slot)
     */
    public static long frameSlots(long length, int recordSize) {
        long slot = slotSize(recordSize);
        return (FRAME_PAYLOAD_OFFSET + length + slot - 1) / slot;
    }

    /**
     * The largest message a framed file (a rolling bus: segment) of {@code fileSize} bytes holds
     * (python: frame_max_length).
     *
     * @param fileSize   logical file size
     * @param recordSize the bus's record size
     * @return bytes (-1: not even an empty one)
     */
    public static long frameMaxLength(long fileSize, int recordSize) {
        long slots = Math.min((fileSize - FIRST_RECORD_OFFSET) / slotSize(recordSize), FRAME_MAX_SLOTS);
        return Math.max(slots * slotSize(recordSize) - FRAME_PAYLOAD_OFFSET, -1);
    }

    /**
     * Offset in the topics file of the entry of {@code topicId} (1..TOPICS_MAX).
     *
     * @param topicId the id
     * @return its entry's offset
     */
    public static int topicEntryOffset(int topicId) {
        return TOPICS_ENTRIES_OFFSET + (topicId - 1) * TOPIC_ENTRY_SIZE;
    }

    /**
     * Offset of slot {@code index} of the writers file, which is also its liveness byte (Python:
     * {@code layout.writer_slot_offset}).
     *
     * @param index slot index, from 0
     * @return {@code WRITERS_SLOTS_OFFSET + index * WRITER_SLOT_SIZE}
     */
    public static long writerSlotOffset(int index) {
        return WRITERS_SLOTS_OFFSET + (long) index * WRITER_SLOT_SIZE;
    }

    /**
     * Size of one record slot: header plus payload.
     *
     * @param recordSize payload size in bytes
     * @return {@code HEADER_SIZE + recordSize}
     */
    public static long slotSize(int recordSize) {
        return HEADER_SIZE + (long) recordSize;
    }

    /**
     * Offset of record {@code k}.
     *
     * @param k          record index, from 0
     * @param recordSize payload size in bytes
     * @return {@code FIRST_RECORD_OFFSET + k * slotSize(recordSize)}
     */
    public static long recordOffset(long k, int recordSize) {
        return FIRST_RECORD_OFFSET + k * slotSize(recordSize);
    }

    /**
     * Index of the record starting at {@code offset} (Python: {@code layout.record_index}).
     *
     * @param offset     a record boundary
     * @param recordSize payload size in bytes
     * @return {@code (offset - FIRST_RECORD_OFFSET) / slotSize(recordSize)}
     */
    public static long recordIndex(long offset, int recordSize) {
        return Math.floorDiv(offset - FIRST_RECORD_OFFSET, slotSize(recordSize));
    }

    /**
     * The rolling-bus position of {@code offset} in segment {@code index} (Python: {@code layout.join_position}).
     *
     * @param index       segment index
     * @param offset      offset in that segment
     * @param segmentSize logical size of every segment
     * @return {@code index * segmentSize + offset}
     */
    public static long joinPosition(long index, long offset, long segmentSize) {
        return index * segmentSize + offset;
    }

    /**
     * The mapping size (and minimum file length) for a logical file size.
     *
     * @param fileSize logical file size in bytes
     * @return {@code fileSize} rounded up to a multiple of {@link #PAGE_SIZE}
     */
    public static long mappedSize(long fileSize) {
        return (fileSize + PAGE_SIZE - 1) / PAGE_SIZE * PAGE_SIZE;
    }

    /**
     * Whether {@code offset} is the start of a record slot for this record size.
     *
     * @param offset     file offset
     * @param recordSize payload size in bytes
     * @return true when {@code offset >= FIRST_RECORD_OFFSET} and on a slot boundary
     */
    public static boolean isRecordBoundary(long offset, int recordSize) {
        return offset >= FIRST_RECORD_OFFSET && (offset - FIRST_RECORD_OFFSET) % slotSize(recordSize) == 0;
    }

    /**
     * The file name of rolling-bus segment {@code index}: 20 decimal digits and {@link #SEGMENT_SUFFIX}.
     *
     * @param index segment index, from 0
     * @return the file name
     */
    public static String segmentName(long index) {
        if (index < 0) {
            throw new IllegalArgumentException("segment index must not be negative, got " + index);
        }
        return String.format("%0" + SEGMENT_DIGITS + "d%s", index, SEGMENT_SUFFIX);
    }

    /**
     * The index of a segment file name.
     *
     * @param name a file name
     * @return its segment index, or -1 if it is not a segment name
     */
    public static long segmentIndex(String name) {
        if (name.length() != SEGMENT_DIGITS + SEGMENT_SUFFIX.length() || !name.endsWith(SEGMENT_SUFFIX)) {
            return -1;
        }
        for (int i = 0; i < SEGMENT_DIGITS; i++) {
            char c = name.charAt(i);
            if (c < '0' || c > '9') {
                return -1;
            }
        }
        try {
            return Long.parseLong(name.substring(0, SEGMENT_DIGITS));
        } catch (NumberFormatException e) {
            return -1;
        }
    }

    // ---- the side files: every file (or directory) written beside a bus, named once ----
    // Mirrors layout.py's SIDE_SUFFIXES and SIDE_FILES (tests/formats/test_side_files.py checks they are equal). Not
    // public fields: describe() prints those, and these are lists, not layout constants.
    private static final String[] SIDE_SUFFIXES = {META_SUFFIX, WAKE_SUFFIX, CONSUMERS_SUFFIX, WRITERS_SUFFIX,
        COMMIT_LOG_SUFFIX, GROUP_DIR_SUFFIX, TOPICS_SUFFIX};
    private static final String[] SIDE_FILES = {META_FILE, WAKE_FILE, CONSUMERS_FILE, WRITERS_FILE, COMMIT_LOG_FILE,
        GROUP_DIR, TIME_INDEX_DIR, TOPICS_FILE};

    /**
     * Every side file a bus at {@code path} may have, whether it exists or not (Python's
     * {@code formats.files.side_files}): {@code path + suffix} for each side suffix of a single-file bus (its
     * metadata, wake file, consumer registry, writers file, commit log, work groups' directory, topics file), or
     * {@code path/name} for each side file of a rolling bus (a directory).
     *
     * @param path the bus: a single-file bus's file or a rolling bus's directory
     * @return the side files' paths, in {@code layout.py}'s order
     */
    public static java.util.List<String> sideFiles(String path) {
        java.nio.file.Path p = java.nio.file.Paths.get(path);
        java.util.List<String> out = new java.util.ArrayList<>();
        if (java.nio.file.Files.isDirectory(p, java.nio.file.LinkOption.NOFOLLOW_LINKS)) {
            for (String name : SIDE_FILES) {
                out.add(p.resolve(name).toString());
            }
        } else {
            for (String suffix : SIDE_SUFFIXES) {
                out.add(path + suffix);
            }
        }
        return java.util.Collections.unmodifiableList(out);
    }

    /**
     * Removes a bus and every side file it has (Python's {@code formats.files.remove_bus}): a single-file bus's file
     * and its {@link #sideFiles side files} (a work groups' directory with its content), or a rolling bus's directory
     * with everything in it. Missing files are fine; symbolic links are removed, never followed. For tests, samples
     * and tools that make a bus and must leave nothing behind (a writer or reader leaves its side files, the writers
     * file among them, when it closes: other processes may still use them).
     *
     * @param path the bus: a single-file bus's file or a rolling bus's directory
     * @throws java.io.IOException if a file exists but cannot be removed
     */
    public static void removeBus(String path) throws java.io.IOException {
        java.nio.file.Path p = java.nio.file.Paths.get(path);
        if (java.nio.file.Files.isDirectory(p, java.nio.file.LinkOption.NOFOLLOW_LINKS)) {
            removeTree(p);
            return;
        }
        java.nio.file.Files.deleteIfExists(p);
        for (String side : sideFiles(path)) {
            removeTree(java.nio.file.Paths.get(side));
        }
    }

    /** Deletes a file, or a directory and its content, never following a symbolic link; missing is fine. */
    private static void removeTree(java.nio.file.Path p) throws java.io.IOException {
        if (!java.nio.file.Files.exists(p, java.nio.file.LinkOption.NOFOLLOW_LINKS)) {
            return;
        }
        // walkFileTree does not follow links by default: a link inside is deleted as a file.
        java.nio.file.Files.walkFileTree(p, new java.nio.file.SimpleFileVisitor<>() {
            @Override
            public java.nio.file.FileVisitResult visitFile(java.nio.file.Path f,
                    java.nio.file.attribute.BasicFileAttributes attrs) throws java.io.IOException {
                java.nio.file.Files.deleteIfExists(f);
                return java.nio.file.FileVisitResult.CONTINUE;
            }

            @Override
            public java.nio.file.FileVisitResult visitFileFailed(java.nio.file.Path f, java.io.IOException e)
                    throws java.io.IOException {
                if (e instanceof java.nio.file.NoSuchFileException) {
                    return java.nio.file.FileVisitResult.CONTINUE;
                }
                throw e;
            }

            @Override
            public java.nio.file.FileVisitResult postVisitDirectory(java.nio.file.Path d, java.io.IOException e)
                    throws java.io.IOException {
                if (e != null && !(e instanceof java.nio.file.NoSuchFileException)) {
                    throw e;
                }
                java.nio.file.Files.deleteIfExists(d);
                return java.nio.file.FileVisitResult.CONTINUE;
            }
        });
    }

    /**
     * Prints every constant as {@code NAME=value}, one per line (the Python side parses this).
     *
     * @param args ignored
     */
    public static void main(String[] args) {
        System.out.print(describe());
    }

    /**
     * The constants as {@code NAME=value} lines.
     *
     * @return one line per constant, each ending in a newline
     */
    public static String describe() {
        // Every public constant, in declaration order: written once, above, never listed again.
        StringBuilder out = new StringBuilder();
        for (java.lang.reflect.Field f : Layout.class.getDeclaredFields()) {
            int m = f.getModifiers();
            if (java.lang.reflect.Modifier.isPublic(m) && java.lang.reflect.Modifier.isStatic(m)
                    && java.lang.reflect.Modifier.isFinal(m)) {
                try {
                    out.append(f.getName()).append('=').append(f.get(null)).append('\n');
                } catch (IllegalAccessException e) {
                    throw new AssertionError(e);
                }
            }
        }
        return out.toString();
    }
}
