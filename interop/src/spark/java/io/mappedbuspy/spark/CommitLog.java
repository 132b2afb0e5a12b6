package io.mappedbuspy.spark;

import io.mappedbuspy.Layout;
import io.mappedbuspy.MemoryMappedFile;

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
 * The exactly-once sink's commit log, {@code PATH.commits} beside a single-file bus: an append-only file
 * of fixed-size entries, written under an exclusive lock (a file lock between processes, a JVM lock
 * between the tasks of one executor), so every writer of the bus sees the same history.
 *
 * <p>A task of a write is a key (query id, epoch or -1 for a batch write, partition id). It holds its rows
 * until Spark commits it, then, under the lock:
 * <ol>
 * <li>if the log has {@code DONE} for the key, it writes nothing (a replayed or retried task);</li>
 * <li>if it has a range of an earlier attempt that crashed, it finishes that attempt instead of writing
 *     its own rows (below);</li>
 * <li>otherwise it allocates one contiguous range of slots (one atomic add to the limit), logs
 *     {@code INTENT(first, count)}, writes every record's metadata and payload without committing, logs
 *     {@code SEALED}, commits the slots from last to first (a reader that stops at the first slot sees
 *     the whole range appear at once), and logs {@code DONE}.</li>
 * </ol>
 * A reader may roll back a slot of the range before it is committed (a writer slower than its
 * timeout): the record's bytes are still in the slot, so they are copied to a new range, a "repair" of
 * the first one ({@code INTENT} with its source), until every record is committed once.
 *
 * <p>Recovery of a crashed attempt: a range never sealed has no committed slot (commits come after
 * {@code SEALED}): its uncommitted slots are rolled back ({@code VOID}) and the new attempt writes its
 * own rows. A sealed range holds all its records' bytes: its uncommitted slots are committed, its
 * rolled-back ones repaired. So each record of a key is committed exactly once, whichever attempt wrote
 * it, and a replay never adds records to a key that has any.
 */
final class CommitLog {
    static final String SUFFIX = ".commits";
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
    private final long fileSize;
    private final int recordSize;
    private final long slot;

    CommitLog(String busPath, long fileSize, int recordSize) {
        this.busPath = busPath;
        this.logPath = Path.of(busPath + SUFFIX);
        this.fileSize = fileSize;
        this.recordSize = recordSize;
        this.slot = Layout.slotSize(recordSize);
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
        try (FileChannel ch = openLog(); FileLock held = ch.lock();
             MemoryMappedFile m = openBus()) {
            assert held.isValid();
            Session s = new Session(ch, m, key, onEntry);
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

    private MemoryMappedFile openBus() throws IOException {
        synchronized (BusWriterFactory.class) { // opens are serialised per JVM, as the writers' are
            return new MemoryMappedFile(busPath, fileSize);
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
        private final MemoryMappedFile m;
        private final Key key;
        private final java.util.function.IntConsumer onEntry;
        private long committed;
        private long repaired;

        Session(FileChannel ch, MemoryMappedFile m, Key key, java.util.function.IntConsumer onEntry) {
            this.ch = ch;
            this.m = m;
            this.key = key;
            this.onEntry = onEntry;
        }

        Outcome run(byte[] records, int n) throws IOException {
            List<Range> ranges = new ArrayList<>();
            boolean done = false;
            for (Entry e : readAll(ch)) {
                if (!e.sameKey(key)) {
                    continue;
                }
                if (e.kind == DONE) {
                    done = true;
                } else if (e.kind == INTENT) {
                    ranges.add(new Range(e.first, e.count, e.source));
                } else {
                    for (Range r : ranges) {
                        if (r.first == e.first) {
                            if (e.kind == SEALED) {
                                r.sealed = true;
                            } else if (e.kind == VOID) {
                                r.voided = true;
                            }
                        }
                    }
                }
            }
            if (done) {
                return new Outcome(0, 0, true, false);
            }
            // The original range of the latest attempt that sealed one, if any.
            Range original = null;
            for (Range r : ranges) {
                if (!r.voided && !r.sealed && r.source < 0) {
                    voidRange(r); // crashed while writing its bytes: none of it was committed
                } else if (!r.voided && r.sealed && r.source < 0) {
                    original = r;
                }
            }
            boolean recovered = original != null;
            if (original == null) {
                if (n == 0) {
                    append(DONE, 0, 0, -1);
                    return new Outcome(0, 0, false, false);
                }
                long first = allocate(n);
                Range r = new Range(first, n, -1);
                append(INTENT, first, n, -1);
                for (int i = 0; i < n; i++) {
                    long pos = first + i * slot;
                    m.putBytes(pos + Layout.METADATA_OFFSET, records, (int) (i * slot) + Layout.METADATA_OFFSET,
                            (int) slot - Layout.METADATA_OFFSET);
                }
                append(SEALED, first, n, -1);
                r.sealed = true;
                original = r;
            }
            // Settle the chain: each range is committed, then its rolled-back slots repaired, and so on.
            Range current = original;
            while (true) {
                Range repair = null;
                for (Range r : ranges) {
                    if (r.source == current.first && !r.voided) {
                        if (r.sealed) {
                            repair = r;
                        } else {
                            voidRange(r);
                        }
                    }
                }
                if (repair != null) {
                    current = repair; // current was settled before its repair was started
                    continue;
                }
                List<Long> lost = commitRange(current);
                if (lost.isEmpty()) {
                    break;
                }
                long first = allocate(lost.size());
                Range r = new Range(first, lost.size(), current.first);
                append(INTENT, first, lost.size(), current.first);
                byte[] one = new byte[(int) slot - Layout.METADATA_OFFSET];
                for (int i = 0; i < lost.size(); i++) {
                    m.getBytes(lost.get(i) + Layout.METADATA_OFFSET, one, 0, one.length);
                    m.putBytes(first + i * slot + Layout.METADATA_OFFSET, one, 0, one.length);
                }
                append(SEALED, first, lost.size(), current.first);
                r.sealed = true;
                repaired += lost.size();
                current = r;
            }
            append(DONE, 0, 0, -1);
            return new Outcome(committed, repaired, false, recovered);
        }

        /** Commits a sealed range's uncommitted slots, last first; returns the rolled-back ones, in order. */
        private List<Long> commitRange(Range r) throws IOException {
            List<Long> lost = new ArrayList<>();
            for (long i = r.count - 1; i >= 0; i--) {
                long pos = r.first + i * slot;
                if (m.casStatus(pos, Layout.STATUS_NOT_SET, Layout.STATUS_COMMITTED)) {
                    committed++;
                }
            }
            for (long i = 0; i < r.count; i++) {
                long pos = r.first + i * slot;
                int st = m.getStatus(pos);
                if (st == Layout.STATUS_ROLLED_BACK) {
                    lost.add(pos);
                } else if (st != Layout.STATUS_COMMITTED) {
                    throw new IOException("mappedbus: slot " + pos + " of " + busPath + " has status " + st
                            + " after its commit (a corrupt bus?)");
                }
            }
            return lost;
        }

        private void voidRange(Range r) throws IOException {
            for (long i = 0; i < r.count; i++) {
                long pos = r.first + i * slot;
                m.casStatus(pos, Layout.STATUS_NOT_SET, Layout.STATUS_ROLLED_BACK);
            }
            append(VOID, r.first, r.count, r.source);
            r.voided = true;
        }

        /** Allocates {@code n} contiguous slots; on a full bus rolls back those that fit and fails. */
        private long allocate(long n) throws IOException {
            long first = m.getAndAddLong(Layout.LIMIT_OFFSET, n * slot);
            if (first < Layout.FIRST_RECORD_OFFSET || first + n * slot > fileSize) {
                for (long pos = first; pos >= Layout.FIRST_RECORD_OFFSET && pos + slot <= fileSize; pos += slot) {
                    m.casStatus(pos, Layout.STATUS_NOT_SET, Layout.STATUS_ROLLED_BACK);
                }
                throw new EOFException("mappedbus: bus " + busPath + " is full: " + n + " records of task " + key
                        + " do not fit at offset " + first + " in fileSize " + fileSize);
            }
            return first;
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
