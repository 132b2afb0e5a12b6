package io.mappedbuspy.spark.write;

import io.mappedbuspy.Layout;
import io.mappedbuspy.MappedBusWriter;
import io.mappedbuspy.internal.MemoryMappedFile;
import io.mappedbuspy.Reservation;
import io.mappedbuspy.RollingBusWriter;
import io.mappedbuspy.internal.RollingLayout;

import java.io.EOFException;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.channels.FileLock;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.LongPredicate;
import java.util.zip.CRC32;

/**
 * The exactly-once sink's commit log, {@code PATH.commits} beside a single-file bus or {@code DIR/bus.commits}
 * in a rolling bus's directory: an append-only file of fixed-size entries, written under an exclusive lock
 * (a file lock between processes, a JVM lock between the tasks of one executor), so every writer of the
 * bus sees the same history. Positions are file offsets, or a rolling bus's global positions.
 *
 * <p>A task of a write is a key (query id, epoch or -1 for a batch write, partition id). It holds its rows
 * until Spark commits it, then, under the lock:
 * <ol>
 * <li>if the log has {@code DONE} for the key, it writes nothing (a replayed or retried task);</li>
 * <li>if it has a group of an earlier attempt that crashed, it finishes that attempt instead of writing
 *     its own rows (below);</li>
 * <li>otherwise it reserves its rows' slots as a group of contiguous ranges (one range on a single file;
 *     on a rolling bus one per segment the rows take, a range never spanning two), logging
 *     {@code INTENT(first, count)} for each range and writing its records' metadata and payload without
 *     committing, then logs one {@code SEALED(first of the group, records)}, commits the slots from last
 *     to first (a reader that stops at the first slot sees the whole group appear at once), and logs
 *     {@code DONE}.</li>
 * </ol>
 * A group's INTENTs are consecutive entries (the lock is held throughout), so SEALED names them by the
 * first one's position and the records they hold. A reader may roll back a slot of the group before it is
 * committed (a writer slower than its timeout): the record's bytes are still in the slot, so they are
 * copied to a new group, a "repair" of the first one ({@code INTENT}s and {@code SEALED} with its source),
 * until every record is committed once.
 *
 * <p>Recovery of a crashed attempt: a range never sealed has no committed slot (commits come after
 * {@code SEALED}): its uncommitted slots are rolled back ({@code VOID}) and the new attempt writes its
 * own rows. A sealed group holds all its records' bytes: its uncommitted slots are committed, its
 * rolled-back ones repaired. So each record of a key is committed exactly once, whichever attempt wrote
 * it, and a replay never adds records to a key that has any. A sealed group with a range in a segment
 * that retention removed cannot be finished (some of its records may have been committed and read, the
 * rest are gone): the write fails, naming the task, the range and the bus.
 *
 * <p>A framed bus (docs/design/frames.md): the log's unit stays the slot (INTENT and SEALED count slots), and a task's
 * records are its messages, each the whole slots it takes. A range holds whole messages only (a rolling bus's segment
 * end cuts none: the slots after the last message that fits are a padding, a rolled-back frame outside the group),
 * and every message's slot count is set (meta CAS 0 -> count) and its header and payload written before SEALED, so
 * what a reader gives up of a sealed group it skips by that count, and a repair copies the message from its slots.
 * A reader that gives a message up before its count is set (its writer was slower than the readers' timeout) has
 * cut it: the attempt voids its ranges and fails, and the task's next attempt writes it again (nothing was sealed).
 * Commits are of each message's first slot, last message first; recovery, voids and repairs walk the ranges by the
 * messages' counts, never looking at a continuation slot.
 */
public final class CommitLog {
    // The layout of the log is Layout's (COMMIT_LOG_*, COMMIT_ENTRY_*: the diagram is there).
    public static final String SUFFIX = Layout.COMMIT_LOG_SUFFIX;
    /** A rolling bus's log, in its directory beside {@code bus.meta}. */
    static final String ROLLING_FILE = Layout.COMMIT_LOG_FILE;
    static final int ENTRY = Layout.COMMIT_ENTRY_SIZE;
    static final int INTENT = Layout.COMMIT_ENTRY_INTENT;
    static final int SEALED = Layout.COMMIT_ENTRY_SEALED;
    static final int DONE = Layout.COMMIT_ENTRY_DONE;
    static final int VOID = Layout.COMMIT_ENTRY_VOID;

    private static final Map<String, ReentrantLock> JVM_LOCKS = new ConcurrentHashMap<>();

    /** One entry of the log. */
    static final class Entry {
        final int kind;
        final long queryHi;
        final long queryLo;
        final long epoch;
        final int partition;
        final long first;
        final long count;
        final long source;

        Entry(int kind, long queryHi, long queryLo, long epoch, int partition, long first, long count, long source) {
            this.kind = kind;
            this.queryHi = queryHi;
            this.queryLo = queryLo;
            this.epoch = epoch;
            this.partition = partition;
            this.first = first;
            this.count = count;
            this.source = source;
        }

        boolean sameKey(Key k) {
            return queryHi == k.hi && queryLo == k.lo && epoch == k.epoch && partition == k.partition;
        }

        /** The entry's bytes, its CRC computed. */
        byte[] encode() {
            ByteBuffer b = ByteBuffer.allocate(ENTRY).order(ByteOrder.LITTLE_ENDIAN);
            b.putInt(Layout.COMMIT_ENTRY_MAGIC_OFFSET, Layout.COMMIT_LOG_MAGIC)
                    .putInt(Layout.COMMIT_ENTRY_KIND_OFFSET, kind)
                    .putLong(Layout.COMMIT_ENTRY_QUERY_HI_OFFSET, queryHi)
                    .putLong(Layout.COMMIT_ENTRY_QUERY_LO_OFFSET, queryLo)
                    .putLong(Layout.COMMIT_ENTRY_EPOCH_OFFSET, epoch)
                    .putInt(Layout.COMMIT_ENTRY_PARTITION_OFFSET, partition)
                    .putLong(Layout.COMMIT_ENTRY_FIRST_OFFSET, first)
                    .putLong(Layout.COMMIT_ENTRY_COUNT_OFFSET, count)
                    .putLong(Layout.COMMIT_ENTRY_SOURCE_OFFSET, source);
            CRC32 crc = new CRC32();
            crc.update(b.array(), 0, Layout.COMMIT_ENTRY_CRC_OFFSET);
            b.putLong(Layout.COMMIT_ENTRY_CRC_OFFSET, crc.getValue());
            return b.array();
        }
    }

    /** A task's identity: (query, epoch, partition). */
    static final class Key {
        final long hi;
        final long lo;
        final long epoch;
        final int partition;

        Key(long hi, long lo, long epoch, int partition) {
            this.hi = hi;
            this.lo = lo;
            this.epoch = epoch;
            this.partition = partition;
        }

        Key(String queryId, long epoch, int partition) {
            long h;
            long l;
            try {
                UUID u = UUID.fromString(queryId);
                h = u.getMostSignificantBits();
                l = u.getLeastSignificantBits();
            } catch (IllegalArgumentException e) {
                UUID u = UUID.nameUUIDFromBytes(queryId.getBytes(java.nio.charset.StandardCharsets.UTF_8));
                h = u.getMostSignificantBits();
                l = u.getLeastSignificantBits();
            }
            this.hi = h;
            this.lo = l;
            this.epoch = epoch;
            this.partition = partition;
        }

        @Override
        public String toString() {
            return "(query " + new UUID(hi, lo) + ", epoch " + epoch + ", partition " + partition + ")";
        }
    }

    /** A range of slots of one attempt, as the log describes it. */
    static final class Range {
        final long first;
        final long count;
        final long source;
        boolean sealed;
        boolean voided;

        Range(long first, long count, long source) {
            this.first = first;
            this.count = count;
            this.source = source;
        }
    }

    /**
     * The ranges one SEALED entry seals: one attempt's (or one repair's) records, in order. Its id is its
     * first range's position; a repair's source is the id of the group it repairs.
     */
    static final class Group {
        final long first;
        final long source;
        final List<Range> parts = new ArrayList<>();

        Group(long first, long source) {
            this.first = first;
            this.source = source;
        }
    }

    /** Which way a task's write went. */
    enum Course {
        /** The log had no sealed group of the key: the task wrote its own rows. */
        WROTE,
        /** An earlier attempt of the key had sealed a group: the task finished it instead of writing its rows. */
        RECOVERED,
        /** The log had DONE for the key: nothing was written. */
        ALREADY_DONE
    }

    /**
     * What a task did.
     *
     * @param committed slots it committed
     * @param repaired  rolled-back slots it wrote again (repairs)
     * @param course    which way it went
     */
    record Outcome(long committed, long repaired, Course course) {
        /** @return whether the key was already done (a replayed or retried task) */
        boolean alreadyDone() {
            return course == Course.ALREADY_DONE;
        }

        /** @return whether the task finished an earlier attempt's sealed group */
        boolean recovered() {
            return course == Course.RECOVERED;
        }
    }

    private final String busPath;
    private final Path logPath;
    /** Single file: its size; rolling bus: the segment size. */
    private final long fileSize;
    private final int recordSize;
    private final long slot;
    private final boolean rolling;
    /** A framed bus: records are messages of whole slots (the class comment). */
    private final boolean framed;

    public CommitLog(String busPath, long fileSize, int recordSize) {
        this(busPath, fileSize, recordSize, false, false);
    }

    /** The log of a single-file bus; {@code framed}: a framed bus. */
    public CommitLog(String busPath, long fileSize, int recordSize, boolean framed) {
        this(busPath, fileSize, recordSize, false, framed);
    }

    private CommitLog(String busPath, long fileSize, int recordSize, boolean rolling, boolean framed) {
        this.busPath = busPath;
        this.framed = framed;
        this.logPath = rolling ? Path.of(busPath, ROLLING_FILE) : Path.of(busPath + SUFFIX);
        this.fileSize = fileSize;
        this.recordSize = recordSize;
        this.slot = Layout.slotSize(recordSize);
        this.rolling = rolling;
    }

    /** The log of the rolling bus in directory {@code dir}, {@code dir/bus.commits}; positions are global. */
    public static CommitLog rolling(String dir, long segmentSize, int recordSize) {
        return new CommitLog(dir, segmentSize, recordSize, true, false);
    }

    /** As {@link #rolling(String, long, int)}; {@code framed}: a framed bus. */
    public static CommitLog rolling(String dir, long segmentSize, int recordSize, boolean framed) {
        return new CommitLog(dir, segmentSize, recordSize, true, framed);
    }

    Path path() {
        return logPath;
    }

    /**
     * Writes one task's records exactly once (see the class comment).
     *
     * @param key     the task
     * @param records {@code n} records laid out as slots (status bytes ignored): metadata at +4, payload at +8
     * @param n       number of records
     * @param onEntry test hook run after each log entry (may be null)
     * @return what was done
     */
    Outcome write(Key key, byte[] records, int n, java.util.function.IntConsumer onEntry) throws IOException {
        if (framed) {
            throw new IllegalStateException("mappedbus: " + busPath + " is a framed bus: writeFrames");
        }
        return locked(key, onEntry, (s, slots) -> s.run(records, n));
    }

    /**
     * Writes one task's messages to a framed bus exactly once (the class comment).
     *
     * @param key      the task
     * @param payloads the messages' bytes, in order
     * @param topics   their topics (null: none), as many
     * @param onEntry  test hook run after each log entry (may be null)
     * @return what was done ({@code committed}: messages)
     */
    Outcome writeFrames(Key key, List<byte[]> payloads, List<String> topics, java.util.function.IntConsumer onEntry)
            throws IOException {
        if (!framed) {
            throw new IllegalStateException("mappedbus: " + busPath + " is not a framed bus: write");
        }
        return locked(key, onEntry, (s, slots) -> {
            long total = 0;
            for (byte[] p : payloads) {
                total += Layout.frameSlots(p.length, recordSize);
            }
            if (total * slot > Integer.MAX_VALUE - 16) {
                throw new IOException("mappedbus: a task's messages take " + total + " slots of " + busPath
                        + ", more than an exactly-once task can hold; use more partitions, or exactlyOnce=false");
            }
            byte[] buf = new byte[(int) (total * slot)];
            ByteBuffer b = ByteBuffer.wrap(buf).order(ByteOrder.LITTLE_ENDIAN);
            int at = 0;
            for (int i = 0; i < payloads.size(); i++) {
                byte[] p = payloads.get(i);
                long n = Layout.frameSlots(p.length, recordSize);
                b.putInt(at + Layout.METADATA_OFFSET, Layout.frameMeta(n));
                b.putLong(at + Layout.PAYLOAD_OFFSET + Layout.FRAME_LENGTH_OFFSET, p.length);
                b.putInt(at + Layout.PAYLOAD_OFFSET + Layout.FRAME_TOPIC_OFFSET, slots.topicId(topics.get(i)));
                b.putInt(at + Layout.PAYLOAD_OFFSET + Layout.FRAME_FLAGS_OFFSET, Layout.FRAME_ENCODING_BYTES);
                System.arraycopy(p, 0, buf, at + Layout.FRAME_PAYLOAD_OFFSET, p.length);
                at += (int) (n * slot);
            }
            return s.run(buf, (int) total);
        });
    }

    /** A task's work on an open log and bus. */
    private interface Work {
        Outcome run(Session s, Slots slots) throws IOException;
    }

    /** Runs {@code work} under the log's locks (this JVM's, then the file's). */
    private Outcome locked(Key key, java.util.function.IntConsumer onEntry, Work work) throws IOException {
        ReentrantLock jvm = JVM_LOCKS.computeIfAbsent(logPath.toAbsolutePath().toString(), p -> new ReentrantLock());
        jvm.lock();
        try (Slots slots = rolling ? new SegmentSlots() : new FileSlots();
             FileChannel ch = openLog(); FileLock held = ch.lock()) {
            assert held.isValid();
            Session s = new Session(ch, slots, key, onEntry);
            return work.run(s, slots);
        } finally {
            jvm.unlock();
        }
    }

    private FileChannel openLog() throws IOException {
        if (Files.isSymbolicLink(logPath)) {
            throw new IOException("mappedbus: commit log " + logPath + " is a symbolic link: refused");
        }
        try {
            Files.createFile(logPath, PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rw-------")));
        } catch (java.nio.file.FileAlreadyExistsException e) {
            // another writer made it
        }
        if (!Files.isRegularFile(logPath, LinkOption.NOFOLLOW_LINKS)) {
            throw new IOException("mappedbus: commit log " + logPath + " is not a regular file");
        }
        return FileChannel.open(logPath, StandardOpenOption.READ, StandardOpenOption.WRITE, LinkOption.NOFOLLOW_LINKS);
    }

    /** Where the log's positions are: the bus file, or the segments of a rolling bus. */
    private interface Slots extends AutoCloseable {
        /** Reserves up to {@code n} contiguous slots in one file (at least one). */
        Reservation reserve(long n, Key key) throws IOException;

        /** The mapping holding position {@code pos}; NoSuchFileException if retention removed its segment. */
        MemoryMappedFile map(long pos) throws IOException;

        /** The offset of {@code pos} in its mapping. */
        long offset(long pos);

        /** The file holding {@code pos}. */
        Path file(long pos);

        /** Whether the file holding {@code pos} exists (retention has not removed its segment). */
        boolean present(long pos);

        /** Wakes the bus's parked readers, if any (after slots were committed or rolled back here). */
        void wake();

        /** A framed bus: the id of {@code topic} (null: none) in its topics file, published if new. */
        int topicId(String topic) throws IOException;

        @Override
        void close();
    }

    /**
     * A single-file bus: positions are offsets in the file; a task's rows go to one range, reserved by the bus's
     * writer ({@link MappedBusWriter#reserve}) and filled through a mapping of the file.
     */
    private final class FileSlots implements Slots {
        private final MappedBusWriter w;
        private final MemoryMappedFile m;

        FileSlots() throws IOException {
            w = BusWriterFactory.open(busPath, fileSize, recordSize, framed); // serialised per JVM, as the writers'
            try {
                synchronized (BusWriterFactory.class) {
                    m = new MemoryMappedFile(busPath, fileSize);
                }
            } catch (IOException | RuntimeException e) {
                w.close();
                throw e;
            }
        }

        /** All {@code n} slots; on a full bus rolls back those that fit and fails. */
        @Override
        public Reservation reserve(long n, Key key) throws IOException {
            Reservation r = w.reserve(n);
            if (r.count() < n) {
                for (long i = 0; i < r.count(); i++) {
                    m.casStatus(r.first() + i * slot, Layout.STATUS_NOT_SET, Layout.STATUS_ROLLED_BACK);
                }
                throw new EOFException("mappedbus: bus " + busPath + " is full: " + n + " records of task " + key
                        + " do not fit at offset " + r.first() + " in fileSize " + fileSize);
            }
            return r;
        }

        @Override
        public MemoryMappedFile map(long pos) {
            return m;
        }

        @Override
        public long offset(long pos) {
            return pos;
        }

        @Override
        public Path file(long pos) {
            return Path.of(busPath);
        }

        @Override
        public boolean present(long pos) {
            return true;
        }

        @Override
        public void wake() {
            w.wakeReaders();
        }

        @Override
        public int topicId(String topic) throws IOException {
            return w.topicIdOf(topic);
        }

        @Override
        public void close() {
            m.close();
            w.close();
        }
    }

    /**
     * A rolling bus: positions are global ({@code segment * segmentSize + offset}); a range never spans
     * segments, so a task's rows may take several ranges.
     */
    private final class SegmentSlots implements Slots {
        private final RollingBusWriter w;
        private final Map<Long, MemoryMappedFile> maps = new java.util.HashMap<>();

        SegmentSlots() throws IOException {
            w = new RollingBusWriter(busPath, fileSize, recordSize).setFrames(framed).open(); // retention: its own
        }

        @Override
        public Reservation reserve(long n, Key key) throws IOException {
            return w.reserve(n);
        }

        @Override
        public MemoryMappedFile map(long pos) throws IOException {
            long index = RollingLayout.locate(pos, fileSize, recordSize).segment();
            MemoryMappedFile m = maps.get(index);
            if (m == null) {
                m = mapSegment(index);
                maps.put(index, m);
            }
            return m;
        }

        // Segment `index` mapped for reading and writing, never created, as the writer maps its own (exclusive,
        // with the writer's file checks: it does not allow a foreign file).
        private MemoryMappedFile mapSegment(long index) throws IOException {
            MemoryMappedFile.OpenOptions o = new MemoryMappedFile.OpenOptions();
            o.exclusive = true;
            return MemoryMappedFile.open(Path.of(busPath, Layout.segmentName(index)).toString(), w.segmentSize(), o);
        }

        @Override
        public long offset(long pos) {
            return RollingLayout.locate(pos, fileSize, recordSize).offset();
        }

        @Override
        public Path file(long pos) {
            return Path.of(busPath, Layout.segmentName(RollingLayout.locate(pos, fileSize, recordSize).segment()));
        }

        @Override
        public boolean present(long pos) {
            return maps.containsKey(RollingLayout.locate(pos, fileSize, recordSize).segment())
                    || Files.exists(file(pos), LinkOption.NOFOLLOW_LINKS);
        }

        @Override
        public void wake() {
            w.wakeReaders();
        }

        @Override
        public int topicId(String topic) throws IOException {
            return w.topicIdOf(topic);
        }

        @Override
        public void close() {
            for (MemoryMappedFile m : maps.values()) {
                m.close();
            }
            w.close();
        }
    }

    /** Every valid entry of the log, in order (a torn last entry of a killed writer is ignored). */
    static List<Entry> readAll(FileChannel ch) throws IOException {
        long size = ch.size();
        long n = size / ENTRY;
        List<Entry> out = new ArrayList<>();
        ByteBuffer b = ByteBuffer.allocate(ENTRY * 1024).order(ByteOrder.LITTLE_ENDIAN);
        long pos = 0;
        while (pos < n * ENTRY) {
            b.clear();
            b.limit((int) Math.min(b.capacity(), n * ENTRY - pos));
            while (b.hasRemaining()) {
                if (ch.read(b, pos + b.position()) < 0) {
                    break;
                }
            }
            b.flip();
            for (int i = 0; i + ENTRY <= b.limit(); i += ENTRY) {
                Entry e = decode(b, i);
                if (e != null) {
                    out.add(e);
                }
            }
            pos += b.limit();
        }
        return out;
    }

    /** The entry at {@code at} of a little-endian buffer backed by an array; null if its magic or CRC is wrong. */
    static Entry decode(ByteBuffer b, int at) {
        if (b.getInt(at + Layout.COMMIT_ENTRY_MAGIC_OFFSET) != Layout.COMMIT_LOG_MAGIC) {
            return null;
        }
        CRC32 crc = new CRC32();
        crc.update(b.array(), b.arrayOffset() + at, Layout.COMMIT_ENTRY_CRC_OFFSET);
        if (crc.getValue() != b.getLong(at + Layout.COMMIT_ENTRY_CRC_OFFSET)) {
            return null;
        }
        return new Entry(b.getInt(at + Layout.COMMIT_ENTRY_KIND_OFFSET),
                b.getLong(at + Layout.COMMIT_ENTRY_QUERY_HI_OFFSET), b.getLong(at + Layout.COMMIT_ENTRY_QUERY_LO_OFFSET),
                b.getLong(at + Layout.COMMIT_ENTRY_EPOCH_OFFSET), b.getInt(at + Layout.COMMIT_ENTRY_PARTITION_OFFSET),
                b.getLong(at + Layout.COMMIT_ENTRY_FIRST_OFFSET), b.getLong(at + Layout.COMMIT_ENTRY_COUNT_OFFSET),
                b.getLong(at + Layout.COMMIT_ENTRY_SOURCE_OFFSET));
    }

    /**
     * What recovery does for a key, decided from the log alone (docs/files-and-rolling.md, "Spark sink commit
     * log"): the I/O of {@link #write} carries it out. Each decision but {@link Nothing} and {@link Corrupt} first
     * voids its {@link #voids()}: ranges never sealed nor voided, of an attempt that crashed writing them.
     */
    sealed interface Recovery {
        /** @return the ranges to void first (none for {@link Nothing} and {@link Corrupt}) */
        List<Range> voids();

        /** The key has DONE: nothing is written. */
        record Nothing() implements Recovery {
            @Override
            public List<Range> voids() {
                return List.of();
            }
        }

        /** No sealed group: the attempt writes its own rows. */
        record Write(List<Range> voids) implements Recovery { }

        /**
         * An earlier attempt sealed a group: {@code group}, the last of the key's repair chain, is committed and its
         * rolled-back slots repaired.
         */
        record Finish(List<Range> voids, Group group) implements Recovery { }

        /** The range {@code removed} of {@code group} (as for {@link Finish}) is in a segment retention removed. */
        record Fail(List<Range> voids, Group group, Range removed) implements Recovery { }

        /** The SEALED entry {@code sealed} names records its INTENTs do not hold: a corrupt log. */
        record Corrupt(Entry sealed) implements Recovery {
            @Override
            public List<Range> voids() {
                return List.of();
            }
        }
    }

    /**
     * The recovery decision for {@code key}, a pure function of the log: the key's INTENTs, SEALEDs, VOIDs and
     * DONE, in order. Ranges neither sealed nor voided are to be voided; a DONE means nothing to do; else the
     * original group (source -1) of an attempt that sealed one, followed along its repairs (a group whose source
     * is the current one's first position) to the last, is to be finished, unless one of its ranges is in a
     * segment that is not {@code present} (then the write fails); with no sealed group the attempt writes.
     *
     * @param log     every valid entry of the log, in order
     * @param key     the task
     * @param present whether the file holding a position exists (a single file: always)
     * @return the decision
     */
    static Recovery recover(List<Entry> log, Key key, LongPredicate present) {
        List<Range> ranges = new ArrayList<>();
        List<Group> groups = new ArrayList<>();
        boolean done = false;
        for (Entry e : log) {
            if (!e.sameKey(key)) {
                continue;
            }
            if (e.kind == DONE) {
                done = true;
            } else if (e.kind == INTENT) {
                ranges.add(new Range(e.first, e.count, e.source));
            } else if (e.kind == SEALED) {
                Group g = seal(ranges, e);
                if (g == null) {
                    return new Recovery.Corrupt(e);
                }
                groups.add(g);
            } else if (e.kind == VOID) {
                for (Range r : ranges) {
                    if (r.first == e.first) {
                        r.voided = true;
                    }
                }
            }
        }
        if (done) {
            return new Recovery.Nothing();
        }
        List<Range> voids = new ArrayList<>();
        for (Range r : ranges) {
            if (!r.voided && !r.sealed) {
                voids.add(r); // crashed while writing its bytes: none of it was committed
            }
        }
        // The original group of the attempt that sealed one, if any (later attempts only recover it).
        Group current = null;
        for (Group g : groups) {
            if (g.source < 0) {
                current = g;
            }
        }
        if (current == null) {
            return new Recovery.Write(voids);
        }
        // Each group of the chain was settled before its repair was started: the last one is settled now.
        for (Group repair = current; repair != null; ) {
            current = repair;
            repair = null;
            for (Group g : groups) {
                if (g.source == current.first) {
                    repair = g;
                }
            }
        }
        for (Range r : current.parts) {
            if (!present.test(r.first)) {
                return new Recovery.Fail(voids, current, r);
            }
        }
        return new Recovery.Finish(voids, current);
    }

    /** The group a SEALED entry seals: the key's consecutive INTENTs from its first, {@code count} records in all. */
    private static Group seal(List<Range> ranges, Entry e) {
        int at = ranges.size() - 1;
        while (at >= 0 && ranges.get(at).first != e.first) {
            at--;
        }
        if (at < 0) {
            return null;
        }
        Group g = new Group(e.first, e.source);
        long left = e.count;
        for (int i = at; i < ranges.size() && left > 0 && ranges.get(i).source == e.source; i++) {
            Range r = ranges.get(i);
            r.sealed = true;
            g.parts.add(r);
            left -= r.count;
        }
        return left == 0 ? g : null;
    }

    /** One task's work under the lock. */
    private final class Session {
        private final FileChannel ch;
        private final Slots slots;
        private final Key key;
        private final java.util.function.IntConsumer onEntry;
        private long committed;
        private long repaired;

        Session(FileChannel ch, Slots slots, Key key, java.util.function.IntConsumer onEntry) {
            this.ch = ch;
            this.slots = slots;
            this.key = key;
            this.onEntry = onEntry;
        }

        Outcome run(byte[] records, int n) throws IOException {
            Recovery plan = recover(readAll(ch), key, slots::present);
            if (plan instanceof Recovery.Corrupt c) {
                Entry e = c.sealed();
                throw new IOException("mappedbus: commit log " + logPath + " seals " + e.count + " records of task "
                        + key + " from position " + e.first + " that its INTENT entries do not hold (a corrupt log)");
            }
            if (plan instanceof Recovery.Nothing) {
                return new Outcome(0, 0, Course.ALREADY_DONE);
            }
            for (Range r : plan.voids()) {
                voidRange(r);
            }
            if (plan instanceof Recovery.Fail f) {
                throw removed(f.removed(), new java.nio.file.NoSuchFileException(
                        slots.file(f.removed().first).toString(), null, "removed by retention"));
            }
            Group current;
            if (plan instanceof Recovery.Finish f) {
                current = f.group();
            } else {
                if (n == 0) {
                    append(DONE, 0, 0, -1);
                    return new Outcome(0, 0, Course.WROTE);
                }
                current = writeGroup(records, n, -1);
            }
            // Settle the chain: the group is committed, then its rolled-back slots repaired, and so on.
            while (true) {
                List<Long> lost = framed ? commitFrames(current) : commitGroup(current);
                if (lost.isEmpty()) {
                    break;
                }
                if (framed) {
                    current = repairFrames(lost, current.first);
                    continue;
                }
                byte[] copy = new byte[(int) (lost.size() * slot)];
                for (int i = 0; i < lost.size(); i++) {
                    long pos = lost.get(i);
                    slots.map(pos).getBytes(slots.offset(pos) + Layout.METADATA_OFFSET, copy,
                            (int) (i * slot) + Layout.METADATA_OFFSET, (int) slot - Layout.METADATA_OFFSET);
                }
                current = writeGroup(copy, lost.size(), current.first);
                repaired += lost.size();
            }
            append(DONE, 0, 0, -1);
            return new Outcome(committed, repaired,
                    plan instanceof Recovery.Finish ? Course.RECOVERED : Course.WROTE);
        }

        /** The failure of a sealed range whose segment retention removed before all its records were committed. */
        private IOException removed(Range r, Exception cause) {
            return new IOException("mappedbus: task " + key + " sealed records at positions [" + r.first + ", "
                    + (r.first + r.count * slot) + ") of rolling bus " + busPath + " but retention removed "
                    + "their segment before they were all committed: some may have been read, the others are "
                    + "lost, so neither writing nor dropping them again is exactly-once; the write stops "
                    + "(rewind the query or use exactlyOnce=false; see \"Exactly-once writes\")", cause);
        }

        /**
         * Reserves slots for {@code n} records (as many ranges as segments they take), logging an INTENT
         * for each, writes the records' bytes without committing them, then logs one SEALED for them all.
         */
        private Group writeGroup(byte[] src, int n, long source) throws IOException {
            if (framed) {
                return writeFrames(src, n, source);
            }
            List<Range> parts = new ArrayList<>();
            int written = 0;
            try {
                while (written < n) {
                    Reservation got = slots.reserve(n - written, key);
                    Range r = new Range(got.first(), got.count(), source);
                    append(INTENT, r.first, r.count, source);
                    parts.add(r);
                    MemoryMappedFile m = slots.map(r.first);
                    long base = slots.offset(r.first);
                    for (int i = 0; i < r.count; i++) {
                        m.putBytes(base + i * slot + Layout.METADATA_OFFSET, src,
                                (int) ((written + i) * slot) + Layout.METADATA_OFFSET, (int) slot - Layout.METADATA_OFFSET);
                    }
                    written += (int) r.count;
                }
            } catch (IOException e) {
                throw voidUnsealed(parts, e);
            }
            return seal(parts, n, source);
        }

        // This attempt cannot seal `parts`: readers get their slots rolled back now, not after their timeout.
        // Returns `e`, with what voiding them met suppressed in it, for the caller to throw.
        private IOException voidUnsealed(List<Range> parts, IOException e) {
            for (Range r : parts) {
                try {
                    voidRange(r);
                } catch (IOException | RuntimeException x) {
                    e.addSuppressed(x);
                }
            }
            return e;
        }

        // One SEALED for the `n` records written in `parts` (the group's ranges, in order).
        private Group seal(List<Range> parts, long n, long source) throws IOException {
            Group g = new Group(parts.get(0).first, source);
            append(SEALED, g.first, n, source);
            for (Range r : parts) {
                r.sealed = true;
                g.parts.add(r);
            }
            return g;
        }

        /** Commits a sealed group's uncommitted slots, last first; returns the rolled-back ones, in order. */
        private List<Long> commitGroup(Group g) throws IOException {
            MemoryMappedFile[] maps = new MemoryMappedFile[g.parts.size()];
            for (int p = 0; p < maps.length; p++) {
                Range r = g.parts.get(p);
                try {
                    maps[p] = slots.map(r.first);
                } catch (java.nio.file.NoSuchFileException e) {
                    throw removed(r, e); // removed since the decision
                }
            }
            for (int p = maps.length - 1; p >= 0; p--) {
                Range r = g.parts.get(p);
                long base = slots.offset(r.first);
                for (long i = r.count - 1; i >= 0; i--) {
                    if (maps[p].casStatus(base + i * slot, Layout.STATUS_NOT_SET, Layout.STATUS_COMMITTED)) {
                        committed++;
                    }
                }
            }
            slots.wake(); // once for the group: readers parked on its first slot read it all now
            List<Long> lost = new ArrayList<>();
            for (int p = 0; p < maps.length; p++) {
                Range r = g.parts.get(p);
                long base = slots.offset(r.first);
                for (long i = 0; i < r.count; i++) {
                    int st = maps[p].getStatus(base + i * slot);
                    if (st == Layout.STATUS_ROLLED_BACK) {
                        lost.add(r.first + i * slot);
                    } else if (st != Layout.STATUS_COMMITTED) {
                        throw new IOException("mappedbus: slot " + (r.first + i * slot) + " of " + busPath
                                + " has status " + st + " after its commit (a corrupt bus?)");
                    }
                }
            }
            return lost;
        }

        // -- a framed bus: records are messages of whole slots (the class comment) -----------------------------

        /** The slots of the message laid out at slot {@code at} of {@code src} (its meta, as writeFrames set it). */
        private long slotsAt(byte[] src, long at) {
            return Layout.frameMetaSlots(ByteBuffer.wrap(src).order(ByteOrder.LITTLE_ENDIAN)
                    .getInt((int) (at * slot) + Layout.METADATA_OFFSET));
        }

        /**
         * As {@link #writeGroup} for messages laid out as in the bus ({@code n} slots of them): each range holds whole
         * messages, the slots after the last that fits in a segment are padded outside the group; each message's
         * count is set by CAS (a reader that gave it up first cut it: the ranges are voided and the attempt fails).
         */
        private Group writeFrames(byte[] src, int n, long source) throws IOException {
            List<Range> parts = new ArrayList<>();
            long written = 0; // slots of src written
            try {
                while (written < n) {
                    Reservation got = slots.reserve(n - written, key);
                    long fit = 0; // slots of the whole messages that fit in got
                    while (written + fit < n && fit + slotsAt(src, written + fit) <= got.count()) {
                        fit += slotsAt(src, written + fit);
                    }
                    MemoryMappedFile m = slots.map(got.first());
                    long base = slots.offset(got.first());
                    if (fit < got.count()) {
                        // A segment's end: the rest is a padding (these slots are ours alone, never in the log).
                        pad(m, base + fit * slot, got.count() - fit);
                    }
                    if (fit == 0) {
                        if (base == Layout.FIRST_RECORD_OFFSET) {
                            throw new IOException("mappedbus: a message of " + slotsAt(src, written) + " slots of task "
                                    + key + " does not fit in a segment of " + busPath + " (" + got.count()
                                    + " slots): a message never spans files");
                        }
                        continue; // the next reservation is in the next segment
                    }
                    Range r = new Range(got.first(), fit, source);
                    append(INTENT, r.first, r.count, source);
                    parts.add(r);
                    for (long i = 0; i < fit; ) {
                        long k = slotsAt(src, written + i);
                        long pos = base + i * slot;
                        if (!m.compareAndSetInt(pos + Layout.METADATA_OFFSET, 0, Layout.frameMeta(k))) {
                            throw new IOException("mappedbus: a reader gave up the message at position "
                                    + (r.first + i * slot) + " of " + busPath + " before task " + key + " wrote it "
                                    + "(this task was slower than the readers' timeout); the task's next attempt "
                                    + "writes its rows again");
                        }
                        m.putBytes(pos + Layout.PAYLOAD_OFFSET, src, (int) ((written + i) * slot)
                                + Layout.PAYLOAD_OFFSET, (int) (k * slot) - Layout.PAYLOAD_OFFSET);
                        i += k;
                    }
                    written += fit;
                }
            } catch (IOException e) {
                throw voidUnsealed(parts, e);
            }
            return seal(parts, n, source);
        }

        /** {@code count} slots at {@code pos} (offsets in {@code m}) become rolled-back frames, as a writer pads. */
        private void pad(MemoryMappedFile m, long pos, long count) {
            for (long left = count; left > 0; ) {
                m.compareAndSetInt(pos + Layout.METADATA_OFFSET, 0,
                        Layout.frameMeta(Math.min(left, Layout.FRAME_MAX_SLOTS)));
                m.casStatus(pos, Layout.STATUS_NOT_SET, Layout.STATUS_ROLLED_BACK);
                int meta = m.getIntAcquire(pos + Layout.METADATA_OFFSET);
                long k = Math.max(1, Layout.frameMetaSlots(meta));
                left -= k;
                pos += k * slot;
            }
        }

        /** The first slots (positions) of a sealed range's messages, walked by their counts. */
        private List<Long> messages(MemoryMappedFile m, Range r) throws IOException {
            List<Long> out = new ArrayList<>();
            long base = slots.offset(r.first);
            for (long i = 0; i < r.count; ) {
                int meta = m.getIntAcquire(base + i * slot + Layout.METADATA_OFFSET);
                int k = Layout.frameMetaSlots(meta);
                if (k < 1 || i + k > r.count) {
                    throw new IOException("mappedbus: the message at position " + (r.first + i * slot) + " of "
                            + busPath + " sealed by task " + key + " has meta " + meta + ": not a frame within its "
                            + "range of " + r.count + " slots (a corrupt bus or commit log)");
                }
                out.add(r.first + i * slot);
                i += k;
            }
            return out;
        }

        /** As {@link #commitGroup}: commits each message's first slot, last first; returns those rolled back. */
        private List<Long> commitFrames(Group g) throws IOException {
            List<MemoryMappedFile> maps = new ArrayList<>();
            List<List<Long>> firsts = new ArrayList<>();
            for (Range r : g.parts) {
                try {
                    maps.add(slots.map(r.first));
                } catch (java.nio.file.NoSuchFileException e) {
                    throw removed(r, e);
                }
                firsts.add(messages(maps.get(maps.size() - 1), r));
            }
            for (int p = maps.size() - 1; p >= 0; p--) {
                List<Long> f = firsts.get(p);
                for (int i = f.size() - 1; i >= 0; i--) {
                    if (maps.get(p).casStatus(slots.offset(f.get(i)), Layout.STATUS_NOT_SET, Layout.STATUS_COMMITTED)) {
                        committed++;
                    }
                }
            }
            slots.wake();
            List<Long> lost = new ArrayList<>();
            for (int p = 0; p < maps.size(); p++) {
                for (long pos : firsts.get(p)) {
                    int st = maps.get(p).getStatus(slots.offset(pos));
                    if (st == Layout.STATUS_ROLLED_BACK) {
                        lost.add(pos);
                    } else if (st != Layout.STATUS_COMMITTED) {
                        throw new IOException("mappedbus: message " + pos + " of " + busPath + " has status " + st
                                + " after its commit (a corrupt bus?)");
                    }
                }
            }
            return lost;
        }

        /** The messages a reader gave up after they were sealed, copied from their slots into a repair group. */
        private Group repairFrames(List<Long> lost, long source) throws IOException {
            long total = 0;
            List<Long> sizes = new ArrayList<>();
            for (long pos : lost) {
                long k = Layout.frameMetaSlots(slots.map(pos).getIntAcquire(slots.offset(pos) + Layout.METADATA_OFFSET));
                sizes.add(k);
                total += k;
            }
            byte[] copy = new byte[(int) (total * slot)];
            long at = 0;
            for (int i = 0; i < lost.size(); i++) {
                long pos = lost.get(i);
                slots.map(pos).getBytes(slots.offset(pos) + Layout.METADATA_OFFSET, copy,
                        (int) (at * slot) + Layout.METADATA_OFFSET, (int) (sizes.get(i) * slot) - Layout.METADATA_OFFSET);
                at += sizes.get(i);
            }
            repaired += lost.size();
            return writeFrames(copy, (int) total, source);
        }

        private void voidRange(Range r) throws IOException {
            MemoryMappedFile m = null;
            try {
                m = slots.map(r.first);
            } catch (java.nio.file.NoSuchFileException e) {
                // retention removed the segment: no reader can wait on these slots any more
            }
            if (m != null) {
                long base = slots.offset(r.first);
                if (framed) {
                    pad(m, base, r.count); // by the messages' counts, those set; one frame of the rest
                } else {
                    for (long i = 0; i < r.count; i++) {
                        m.casStatus(base + i * slot, Layout.STATUS_NOT_SET, Layout.STATUS_ROLLED_BACK);
                    }
                }
                slots.wake(); // readers parked on these slots skip them now
            }
            append(VOID, r.first, r.count, r.source);
            r.voided = true;
        }

        private void append(int kind, long first, long count, long source) throws IOException {
            ByteBuffer b = ByteBuffer.wrap(new Entry(kind, key.hi, key.lo, key.epoch, key.partition, first, count,
                    source).encode());
            // At a whole entry's boundary: a torn entry of a killed writer is overwritten, not followed.
            long at = ch.size() / ENTRY * ENTRY;
            while (b.hasRemaining()) {
                at += ch.write(b, at);
            }
            if (onEntry != null) {
                onEntry.accept(kind);
            }
        }
    }
}
