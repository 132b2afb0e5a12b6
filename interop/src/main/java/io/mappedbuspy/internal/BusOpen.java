package io.mappedbuspy.internal;

import io.mappedbuspy.*;

import java.io.IOException;
import java.nio.file.Path;
import io.mappedbuspy.BusKind;
import io.mappedbuspy.Layout;
import io.mappedbuspy.MappedBusWriter;

/**
 * Opening a single-file bus (or a rolling bus's segment) for a reader or a writer, as
 * {@code docs/files-and-rolling.md} says: the file opened safely ({@link SafeOpen}); under its open lock, before
 * anything is written, the sizes its metadata file ({@code PATH.meta}) records checked against those given; once
 * mapped, the limit checked to lie on the record grid, and a writer's first open of a bus nobody wrote to yet
 * describing it in a new metadata file and setting the limit to the first record.
 * <p>Internal: not a supported API. Public only for the library's own packages (io.mappedbuspy and the
 * Spark connector); it may change in any release.
 */
public final class BusOpen {
    /** The mapped file. */
    public final MemoryMappedFile mem;
    /** The bus's id from its metadata file, or null (a file of the Java original, or a segment). */
    public final String busId;
    /** The limit when it was opened (a writer: after setting it to the first record). */
    public final long limit;

    private BusOpen(MemoryMappedFile mem, String busId, long limit) {
        this.mem = mem;
        this.busId = busId;
        this.limit = limit;
    }

    /**
     * Opens a bus for a reader: the file must exist and be a complete bus; a reader never creates, grows or writes
     * a file that is not one.
     */
    public static BusOpen forReader(String path, long fileSize, int recordSize, boolean readOnly, boolean allowForeign,
                             long lockTimeoutMs, boolean segment, boolean frames) throws IOException {
        MemoryMappedFile.OpenOptions o = options(allowForeign, lockTimeoutMs);
        o.readOnly = readOnly;
        BusMeta[] matching = new BusMeta[1];
        long[] limit = new long[1];
        if (!segment) {
            o.beforeGrow = f -> matching[0] = checkedMeta(f, path, fileSize, recordSize, allowForeign, frames);
        }
        o.afterMap = f -> {
            limit[0] = f.getLongAcquire(Layout.LIMIT_OFFSET);
            MappedBusWriter.checkLimit(limit[0], recordSize, path);
            if (!segment && !frames && matching[0] == null) { // a framed bus: continuation slots hold payload
                checkSlots(f, recordSize, fileSize, path); // no metadata: nothing misaligned read
            }
        };
        MemoryMappedFile mem = MemoryMappedFile.open(path, fileSize, o);
        return new BusOpen(mem, matching[0] == null ? null : matching[0].id(), limit[0]);
    }

    /**
     * Opens a bus for a writer: a single-file bus is created if absent and grown to its mapping; a segment must
     * exist (the rolling writer made it whole).
     */
    public static BusOpen forWriter(String path, long fileSize, int recordSize, boolean allowForeign, long lockTimeoutMs,
                             boolean segment, boolean frames) throws IOException {
        MemoryMappedFile.OpenOptions o = options(allowForeign, lockTimeoutMs);
        o.create = !segment;
        o.grow = !segment;
        o.exclusive = true;
        Path metaPath = BusMeta.metaPath(path);
        BusMeta[] matching = new BusMeta[1];
        long[] limit = new long[1];
        if (!segment) {
            // Before anything is written: other sizes (or framing) than the bus was created with are refused.
            o.beforeGrow = f -> matching[0] = checkedMeta(f, path, fileSize, recordSize, allowForeign, frames);
        }
        o.afterMap = f -> {
            long seen = f.getLongAcquire(Layout.LIMIT_OFFSET);
            if (!segment && matching[0] == null && seen == 0) {
                // Nothing was ever written: this bus is ours to describe (a stale file is renamed over).
                BusMeta meta = BusMeta.single(recordSize, fileSize, f.inode()).withFrames(frames);
                meta.write(metaPath, "rw-------", false);
                matching[0] = meta;
            }
            f.compareAndSetLong(Layout.LIMIT_OFFSET, 0, Layout.FIRST_RECORD_OFFSET);
            limit[0] = f.getLongAcquire(Layout.LIMIT_OFFSET);
            MappedBusWriter.checkLimit(limit[0], recordSize, path);
            if (!segment && !frames && matching[0] == null) { // a framed bus: continuation slots hold payload
                checkSlots(f, recordSize, fileSize, path); // no metadata: nothing misaligned written
            }
        };
        MemoryMappedFile mem = MemoryMappedFile.open(path, fileSize, o);
        return new BusOpen(mem, matching[0] == null ? null : matching[0].id(), limit[0]);
    }

    /** Slots whose statuses {@link #checkSlots} looks at (as {@code CHECKED_SLOTS} of mappedbus_py/_core/_mapping). */
    static final int CHECKED_SLOTS = 4096;

    /**
     * A file without metadata (the Java original's) does not say its record size: the one given is checked against
     * what the file shows, before anything is read or written. Every slot on its grid below the limit (the first
     * {@link #CHECKED_SLOTS} of them) must hold a status of 0, 1 or 2: with another record size those words fall
     * inside other records' payloads, which rarely look like statuses. What cannot be told (as the Python side's
     * {@code MappedFile.check_slots} says): a slot size that is a multiple of the true one, and payload bytes that
     * read 0, 1 or 2 where a status would be.
     *
     * @throws CorruptBusException naming the record and its status when a slot holds another status
     */
    static void checkSlots(MemoryMappedFile f, int recordSize, long fileSize, String path) throws CorruptBusException {
        long slot = Layout.slotSize(recordSize);
        long limit = f.getLongAcquire(Layout.LIMIT_OFFSET);
        long end = Math.min(Math.min(limit, Layout.FIRST_RECORD_OFFSET + CHECKED_SLOTS * slot),
                Math.min(fileSize, f.size()) - slot + 1);
        for (long pos = Layout.FIRST_RECORD_OFFSET; pos < end; pos += slot) {
            int status = f.getStatus(pos);
            if (status < Layout.STATUS_NOT_SET || status > Layout.STATUS_ROLLED_BACK) {
                throw new CorruptBusException(path + ": with recordSize " + recordSize + " the record at " + pos
                        + " has status " + status + " (valid: 0, 1, 2): the file was written with another "
                        + "recordSize (it has no metadata file to say which), or it is corrupt");
            }
        }
    }

    private static MemoryMappedFile.OpenOptions options(boolean allowForeign, long lockTimeoutMs) {
        MemoryMappedFile.OpenOptions o = new MemoryMappedFile.OpenOptions();
        o.allowForeign = allowForeign;
        o.lockTimeoutMs = lockTimeoutMs;
        return o;
    }

    // The metadata describing this very file (same inode), its sizes checked against those given; null when there
    // is none (a file of the Java original) or it describes another file (a stale one, replaced by a writer).
    private static BusMeta checkedMeta(MemoryMappedFile f, String path, long fileSize, int recordSize,
                                       boolean allowForeign, boolean frames) throws IOException {
        BusMeta meta = BusMeta.read(BusMeta.metaPath(path), allowForeign);
        if (meta != null && meta.kind() == BusKind.SINGLE && meta.inode() == f.inode()) {
            meta.check(recordSize, fileSize, path);
            meta.checkFrames(frames, path);
            return meta;
        }
        return null;
    }
}
