package io.mappedbuspy.spark;

import io.mappedbuspy.Layout;
import io.mappedbuspy.MemoryMappedFile;
import io.mappedbuspy.RollingBusWriter;
import io.mappedbuspy.WakeFile;

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
 */
final class CommitLog {
    static final String SUFFIX = ".commits";
    /** A rolling bus's log, in its directory beside {@code bus.meta}. */
    static final String ROLLING_FILE = "bus.commits";
    static final int ENTRY = 72;
    private static final int MAGIC = 0x4C43424D; // "MBCL"
    static final int INTENT = 1;
    static final int SEALED = 2;
    static final int DONE = 3;
    static final int VOID = 4;

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
    }

    /** A task's identity: (query, epoch, partition). */
    static final class Key {
        final long hi;
        final long lo;
        final long epoch;
        final int partition;

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

    /** What a task did: records it committed, and whether it found its key already done. */
    static final class Outcome {
        final long committed;
        final long repaired;
        final boolean alreadyDone;
        final boolean recovered;

        Outcome(long committed, long repaired, boolean alreadyDone, boolean recovered) {
            this.committed = committed;
            this.repaired = repaired;
            this.alreadyDone = alreadyDone;
            this.recovered = recovered;
        }
    }

    private final String busPath;
    private final Path logPath;
    /** Single file: its size; rolling bus: the segment size. */
    private final long fileSize;
    private final int recordSize;
    private final long slot;
    private final boolean rolling;

    CommitLog(String busPath, long fileSize, int recordSize) {
        this(busPath, fileSize, recordSize, false);
    }

    private CommitLog(String busPath, long fileSize, int recordSize, boolean rolling) {
        this.busPath = busPath;
        this.logPath = rolling ? Path.of(busPath, ROLLING_FILE) : Path.of(busPath + SUFFIX);
        this.fileSize = fileSize;
        this.recordSize = recordSize;
        this.slot = Layout.slotSize(recordSize);
        this.rolling = rolling;
    }

    /** The log of the rolling bus in directory {@code dir}, {@code dir/bus.commits}; positions are global. */
    static CommitLog rolling(String dir, long segmentSize, int recordSize) {
        return new CommitLog(dir, segmentSize, recordSize, true);
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
        ReentrantLock jvm = JVM_LOCKS.computeIfAbsent(logPath.toAbsolutePath().toString(), p -> new ReentrantLock());
        jvm.lock();
        try (Slots slots = rolling ? new SegmentSlots() : new FileSlots();
             FileChannel ch = openLog(); FileLock held = ch.lock()) {
            assert held.isValid();
            Session s = new Session(ch, slots, key, onEntry);
            return s.run(records, n);
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
        /** Reserves up to {@code n} contiguous slots in one file: {first position, count}. */
        long[] reserve(long n, Key key) throws IOException;

        /** The mapping holding position {@code pos}; NoSuchFileException if retention removed its segment. */
        MemoryMappedFile map(long pos) throws IOException;

        /** The offset of {@code pos} in its mapping. */
        long offset(long pos);

        /** Wakes the bus's parked readers, if any (after slots were committed or rolled back here). */
        void wake();

        @Override
        void close();
    }

    /** A single-file bus: positions are offsets in the file; a task's rows go to one range. */
    private final class FileSlots implements Slots {
        private final MemoryMappedFile m;
        private final WakeFile wakeFile;

        FileSlots() throws IOException {
            synchronized (BusWriterFactory.class) { // opens are serialised per JVM, as the writers' are
                m = new MemoryMappedFile(busPath, fileSize);
            }
            wakeFile = WakeFile.forBus(busPath, false);
        }

        /** All {@code n} slots; on a full bus rolls back those that fit and fails. */
        @Override
        public long[] reserve(long n, Key key) throws IOException {
            long first = m.getAndAddLong(Layout.LIMIT_OFFSET, n * slot);
            if (first < Layout.FIRST_RECORD_OFFSET || first + n * slot > fileSize) {
                for (long pos = first; pos >= Layout.FIRST_RECORD_OFFSET && pos + slot <= fileSize; pos += slot) {
                    m.casStatus(pos, Layout.STATUS_NOT_SET, Layout.STATUS_ROLLED_BACK);
                }
                throw new EOFException("mappedbus: bus " + busPath + " is full: " + n + " records of task " + key
                        + " do not fit at offset " + first + " in fileSize " + fileSize);
            }
            return new long[] {first, n};
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
        public void wake() {
            if (wakeFile.wakeNeeded()) {
                wakeFile.wake();
            }
        }

        @Override
        public void close() {
            wakeFile.close();
            m.close();
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
            w = new RollingBusWriter(busPath, fileSize, recordSize).open(); // retention: the bus's own
        }

        @Override
        public long[] reserve(long n, Key key) throws IOException {
            return w.reserve(n);
        }

        @Override
        public MemoryMappedFile map(long pos) throws IOException {
            long index = pos / fileSize;
            MemoryMappedFile m = maps.get(index);
            if (m == null) {
                m = w.mapSegment(index);
                maps.put(index, m);
            }
            return m;
        }

        @Override
        public long offset(long pos) {
            return pos % fileSize;
        }

        @Override
        public void wake() {
            w.wakeReaders();
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

    private static Entry decode(ByteBuffer b, int at) {
        if (b.getInt(at) != MAGIC) {
            return null;
        }
        CRC32 crc = new CRC32();
        crc.update(b.array(), at, ENTRY - 8);
        if (crc.getValue() != b.getLong(at + ENTRY - 8)) {
            return null;
        }
        return new Entry(b.getInt(at + 4), b.getLong(at + 8), b.getLong(at + 16), b.getLong(at + 24),
                b.getInt(at + 32), b.getLong(at + 40), b.getLong(at + 48), b.getLong(at + 56));
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
            List<Range> ranges = new ArrayList<>();
            List<Group> groups = new ArrayList<>();
            boolean done = false;
            for (Entry e : readAll(ch)) {
                if (!e.sameKey(key)) {
                    continue;
                }
                if (e.kind == DONE) {
                    done = true;
                } else if (e.kind == INTENT) {
                    ranges.add(new Range(e.first, e.count, e.source));
                } else if (e.kind == SEALED) {
                    groups.add(seal(ranges, e));
                } else if (e.kind == VOID) {
                    for (Range r : ranges) {
                        if (r.first == e.first) {
                            r.voided = true;
                        }
                    }
                }
            }
            if (done) {
                return new Outcome(0, 0, true, false);
            }
            for (Range r : ranges) {
                if (!r.voided && !r.sealed) {
                    voidRange(r); // crashed while writing its bytes: none of it was committed
                }
            }
            // The original group of the attempt that sealed one, if any (later attempts only recover it).
            Group original = null;
            for (Group g : groups) {
                if (g.source < 0) {
                    original = g;
                }
            }
            boolean recovered = original != null;
            if (original == null) {
                if (n == 0) {
                    append(DONE, 0, 0, -1);
                    return new Outcome(0, 0, false, false);
                }
                original = writeGroup(records, n, -1);
            }
            // Settle the chain: each group is committed, then its rolled-back slots repaired, and so on.
            Group current = original;
            while (true) {
                Group repair = null;
                for (Group g : groups) {
                    if (g.source == current.first) {
                        repair = g;
                    }
                }
                if (repair != null) {
                    current = repair; // current was settled before its repair was started
                    continue;
                }
                List<Long> lost = commitGroup(current);
                if (lost.isEmpty()) {
                    break;
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
            return new Outcome(committed, repaired, false, recovered);
        }

        /** The group a SEALED entry seals: the key's consecutive INTENTs from its first, {@code count} records in all. */
        private Group seal(List<Range> ranges, Entry e) throws IOException {
            int at = ranges.size() - 1;
            while (at >= 0 && ranges.get(at).first != e.first) {
                at--;
            }
            if (at < 0) {
                throw corrupt(e);
            }
            Group g = new Group(e.first, e.source);
            long left = e.count;
            for (int i = at; i < ranges.size() && left > 0 && ranges.get(i).source == e.source; i++) {
                Range r = ranges.get(i);
                r.sealed = true;
                g.parts.add(r);
                left -= r.count;
            }
            if (left != 0) {
                throw corrupt(e);
            }
            return g;
        }

        private IOException corrupt(Entry e) {
            return new IOException("mappedbus: commit log " + logPath + " seals " + e.count + " records of task "
                    + key + " from position " + e.first + " that its INTENT entries do not hold (a corrupt log)");
        }

        /**
         * Reserves slots for {@code n} records (as many ranges as segments they take), logging an INTENT
         * for each, writes the records' bytes without committing them, then logs one SEALED for them all.
         */
        private Group writeGroup(byte[] src, int n, long source) throws IOException {
            List<Range> parts = new ArrayList<>();
            int written = 0;
            try {
                while (written < n) {
                    long[] got = slots.reserve(n - written, key);
                    Range r = new Range(got[0], got[1], source);
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
                // This attempt cannot seal them: readers get its slots rolled back now, not after their timeout.
                for (Range r : parts) {
                    try {
                        voidRange(r);
                    } catch (IOException | RuntimeException x) {
                        e.addSuppressed(x);
                    }
                }
                throw e;
            }
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
                    throw new IOException("mappedbus: task " + key + " sealed records at positions [" + r.first + ", "
                            + (r.first + r.count * slot) + ") of rolling bus " + busPath + " but retention removed "
                            + "their segment before they were all committed: some may have been read, the others are "
                            + "lost, so neither writing nor dropping them again is exactly-once; the write stops "
                            + "(rewind the query or use exactlyOnce=false; see \"Exactly-once writes\")", e);
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

        private void voidRange(Range r) throws IOException {
            MemoryMappedFile m = null;
            try {
                m = slots.map(r.first);
            } catch (java.nio.file.NoSuchFileException e) {
                // retention removed the segment: no reader can wait on these slots any more
            }
            if (m != null) {
                long base = slots.offset(r.first);
                for (long i = 0; i < r.count; i++) {
                    m.casStatus(base + i * slot, Layout.STATUS_NOT_SET, Layout.STATUS_ROLLED_BACK);
                }
                slots.wake(); // readers parked on these slots skip them now
            }
            append(VOID, r.first, r.count, r.source);
            r.voided = true;
        }

        private void append(int kind, long first, long count, long source) throws IOException {
            ByteBuffer b = ByteBuffer.allocate(ENTRY).order(ByteOrder.LITTLE_ENDIAN);
            b.putInt(0, MAGIC).putInt(4, kind).putLong(8, key.hi).putLong(16, key.lo).putLong(24, key.epoch)
                    .putInt(32, key.partition).putLong(40, first).putLong(48, count).putLong(56, source);
            CRC32 crc = new CRC32();
            crc.update(b.array(), 0, ENTRY - 8);
            b.putLong(ENTRY - 8, crc.getValue());
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
