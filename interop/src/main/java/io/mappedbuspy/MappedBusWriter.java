package io.mappedbuspy;

import java.io.EOFException;
import java.io.IOException;
import java.util.Objects;
import java.util.function.BooleanSupplier;
import io.mappedbuspy.internal.BusMeta;
import io.mappedbuspy.internal.BusOpen;
import io.mappedbuspy.internal.DiskSpace;
import io.mappedbuspy.internal.FileWatch;
import io.mappedbuspy.internal.Frames;
import io.mappedbuspy.internal.MemoryMappedFile;
import io.mappedbuspy.internal.TopicsFile;
import io.mappedbuspy.internal.WakeFile;
import io.mappedbuspy.internal.WritersFile;

/**
 * Appends records to a bus file. Any number of writers (in any processes) may share a file; each record
 * is allocated with a fetch-and-add on the limit, filled, then committed with a CAS of its status 0 -> 1.
 * After each commit the writer loads one int of the bus's wake file ({@code PATH.wake}, {@link WakeFile}) and, only
 * if readers are parked there, wakes them.
 *
 * <p>Not thread-safe: use one writer per thread.
 */
public final class MappedBusWriter implements AutoCloseable {
    private final String path;
    private final long fileSize;
    private final int recordSize;
    private final long slot;
    private MemoryMappedFile mem;
    // Accept a file of another owner, or writable by group/others (see setAllowForeign).
    private boolean allowForeign;
    // A rolling bus's segment: exists already, no sidecar metadata, may be unlinked by retention while mapped.
    boolean segment;
    private boolean closed;
    private long lockTimeoutMs = MemoryMappedFile.DEFAULT_LOCK_TIMEOUT_MS;
    private String busId;
    // Set once a fault showed the file truncated: every later call throws.
    private BusTruncatedException dead;
    // The writers' watch's entry for the open file: removed, replaced or shrunk makes every write throw.
    private FileWatch.Entry watch = FileWatch.NONE;
    private long writes;
    // The offset of this writer's last allocation (-1: none yet): a rolling writer asks whether it was its
    // segment's spare trigger (RollingLayout.spareTrigger).
    long lastOffset = -1;
    private long populated = Long.MAX_VALUE; // pages up to here were mapped ahead (populate); MAX: never
    private long touched; // the sum of the bytes populate loaded: kept, so the compiler keeps the loads
    // The bus's wake file, looked at after every commit; a rolling bus's segment gets its bus's before open().
    WakeFile wake = WakeFile.NONE;
    private boolean ownsWake;
    // The bus's writers file, where this writer holds a slot and publishes each reservation's claim (readers ask it
    // whether a stalled slot's writer is alive); a rolling bus's segment gets its bus's before open(), with the
    // bus position of the segment's offset 0.
    WritersFile writers = WritersFile.NONE;
    long positionBase;
    private boolean ownsWriters;
    // A framed bus (setFrames): messages of any size with topics; its topics file, opened at the first topic (a rolling
    // bus's segment: its bus's, given before the first write); the end of the last message's slots.
    private boolean frames;
    // The largest message the file holds (Layout.frameMaxLength), computed once.
    private final long maxLength;
    TopicsFile topicsFile;
    private String topicsPath;
    private boolean ownsTopics;
    long lastEnd = -1;
    // The file's length is checked once per LENGTH_CHECK_MASK + 1 writes.
    private static final int LENGTH_CHECK_MASK = 4095;

    /**
     * Creates a writer of an existing bus with the sizes its metadata file {@code PATH.meta} records (read now;
     * {@link #open()} checks them again, and the files' owner and mode); call {@link #open()} before writing.
     *
     * @param path bus file path: a bus of this project, whose {@code PATH.meta} describes this file
     * @throws IllegalArgumentException if the file or {@code PATH.meta} is missing, or it describes another file
     *                                  or a rolling bus: a file of the Java original, or a bus not made yet,
     *                                  needs both sizes ({@link #MappedBusWriter(String, long, int)})
     * @throws UnsafeBusFileException   if the path is a link or not a regular file
     * @throws IOException              if {@code PATH.meta} cannot be read or is not a metadata file
     */
    public MappedBusWriter(String path) throws IOException {
        this(path, BusMeta.ofFile(path, "MappedBusWriter"));
    }

    private MappedBusWriter(String path, BusMeta meta) {
        this(path, meta.fileSize(), meta.recordSize());
    }

    /**
     * Creates a writer; call {@link #open()} before writing.
     *
     * @param path       bus file path (created by {@link #open()} if absent)
     * @param fileSize   logical file size in bytes, at least {@code 16 + recordSize}
     * @param recordSize payload size of every record, in bytes
     * @throws IllegalArgumentException if a size is out of range
     */
    public MappedBusWriter(String path, long fileSize, int recordSize) {
        this.path = Objects.requireNonNull(path, "path");
        checkSizes(fileSize, recordSize);
        this.fileSize = fileSize;
        this.recordSize = recordSize;
        this.slot = Layout.slotSize(recordSize);
        this.maxLength = Layout.frameMaxLength(fileSize, recordSize);
    }

    /** Refuses sizes no bus can have. Internal: not a supported API (public for io.mappedbuspy.internal). */
    public static void checkSizes(long fileSize, int recordSize) {
        if (recordSize <= 0 || recordSize > Integer.MAX_VALUE - Layout.HEADER_SIZE) {
            throw new IllegalArgumentException("recordSize must be in 1.."
                    + (Integer.MAX_VALUE - Layout.HEADER_SIZE) + ", got " + recordSize);
        }
        long min = Layout.FIRST_RECORD_OFFSET + Layout.slotSize(recordSize);
        if (fileSize < min) {
            throw new IllegalArgumentException("fileSize " + fileSize + " cannot hold one record of size "
                    + recordSize + " (needs at least " + min + ")");
        }
    }

    /** Refuses a limit off a record boundary. Internal: not a supported API (public for io.mappedbuspy.internal). */
    public static void checkLimit(long limit, int recordSize, String path) throws CorruptBusException {
        if (limit != 0 && !Layout.isRecordBoundary(limit, recordSize)) {
            throw new CorruptBusException("limit " + limit + " in " + path
                    + " is not on a record boundary for recordSize " + recordSize
                    + " (wrong recordSize, or a corrupt file)");
        }
    }

    /**
     * Opens the file as {@code docs/files-and-rolling.md} says (creating it exclusively, rw-------, if absent;
     * never through a link; owner and mode checked), checks or writes its metadata {@code PATH.meta}, and
     * initialises its limit to the first record if it is new. A failed open removes what it created.
     *
     * @return this writer
     * @throws IOException             if the file cannot be opened or mapped
     * @throws UnsafeBusFileException  if the path is a link, not a regular file, or foreign (see
     *                                 {@link #setAllowForeign})
     * @throws BusMismatchException    if the bus was created with other sizes (nothing is written)
     * @throws BusLockTimeoutException if another process holds the open lock longer than the lock timeout
     * @throws CorruptBusException     if the limit is not on a record boundary for this record size
     * @throws IllegalStateException   if already open or closed
     */
    public MappedBusWriter open() throws IOException {
        if (closed || mem != null) {
            throw new IllegalStateException("writer for " + path + " is " + (closed ? "closed" : "already open"));
        }
        BusOpen b = BusOpen.forWriter(path, fileSize, recordSize, allowForeign, lockTimeoutMs, segment, frames);
        mem = b.mem;
        // Removed or replaced while open: throw, never write into the orphaned file (FileWatch).
        watch = FileWatch.watch(path, mem, segment ? fileSize - slot : -1);
        if (!segment) {
            wake = WakeFile.forBus(path, allowForeign); // never fails: without it, readers find records by polling
            ownsWake = true;
            writers = WritersFile.forWriter(java.nio.file.Paths.get(path + Layout.WRITERS_SUFFIX), allowForeign);
            ownsWriters = true;
            takeOver(writers);
        }
        busId = b.busId;
        populated = DiskSpace.onTmpfs(path) ? 0 : Long.MAX_VALUE;
        return this;
    }

    /**
     * The bus's id from its metadata file: new for every bus created, so a bus deleted and recreated under
     * the same path has another one.
     *
     * @return 32 hex digits, or null for a file without metadata (made by the Java original) or a segment
     */
    public String busId() {
        return busId;
    }

    /**
     * Bounds how long {@link #open()} waits for another process's open lock. Call before {@code open()}.
     *
     * @param timeoutMs milliseconds, at least 0 (default 10 000)
     * @return this
     */
    public MappedBusWriter setLockTimeout(long timeoutMs) {
        if (timeoutMs < 0) {
            throw new IllegalArgumentException("lock timeout must be >= 0 ms, got " + timeoutMs);
        }
        this.lockTimeoutMs = timeoutMs;
        return this;
    }

    // A fault in the mapping: the file was truncated under it. The writer is dead from then on.
    private BusTruncatedException fault(MemoryMappedFile m, BusTruncatedException e) {
        dead = e;
        return e;
    }

    private BusTruncatedException fault(MemoryMappedFile m, InternalError e) {
        if (!MemoryMappedFile.isMappingFault(e)) {
            throw e;
        }
        dead = m.truncated(e);
        return dead;
    }

    // Whether a fault report raised in a write is another file's: the JVM raises the report of a fault late (JDK 17:
    // at the thread's next entry into the VM), so one raised here may be of an earlier access elsewhere, above all
    // this writer's look at the bus's wake file after a commit (WakeFile.wakeIfNeeded), whose file may have been
    // truncated under it. A fault of this bus's is a file shorter than the mapping.
    private boolean faultElsewhere(MemoryMappedFile m, InternalError e) {
        if (!MemoryMappedFile.isMappingFault(e)) {
            return false;
        }
        try {
            m.checkLength();
        } catch (BusTruncatedException t) {
            return false;
        }
        wake.check(); // a wake file cut under the writer is no longer used
        return true;
    }

    // The rest of a write that another file's fault report (faultElsewhere) interrupted after allocate() returned
    // its record at pos: the record's status says what is left (nothing once committed; the stores again, which
    // change nothing, and the commit if not). A write the report came before allocate() returned is made again by
    // the caller (a slot its fetch-and-add had just taken is left to the readers' rollback). metadata: the message's
    // type, or the length of src's bytes from offset.
    private boolean finish(MemoryMappedFile m, long pos, int metadata, MappedBusMessage message, byte[] src,
                           int offset) {
        try {
            int status = m.getStatus(pos);
            if (status == Layout.STATUS_NOT_SET) {
                m.putIntInRecord(pos + Layout.METADATA_OFFSET, metadata);
                if (message != null) {
                    message.write(m, pos + Layout.PAYLOAD_OFFSET);
                } else {
                    m.putBytes(pos + Layout.PAYLOAD_OFFSET, src, offset, metadata);
                }
                status = m.commitInRecord(pos) ? Layout.STATUS_COMMITTED : Layout.STATUS_ROLLED_BACK;
            }
            wake.wakeIfNeeded();
            return status == Layout.STATUS_COMMITTED;
        } catch (InternalError e) {
            throw fault(m, e);
        } catch (BusTruncatedException e) {
            throw fault(m, e);
        }
    }

    /**
     * Writes an object message as one record.
     *
     * @param message the message; its fields go to the payload, its type to the metadata
     * @return true if committed; false if a reader had already rolled the record back (too slow)
     * @throws EOFException          if the bus is full
     * @throws BusTruncatedException if the file was truncated under the mapping (this or an earlier write
     *                               touched a page past its new end, or the writers' watch saw it shorter)
     * @throws java.io.UncheckedIOException with a {@link BusReplacedException} if the path was removed or names
     *                               another file since about {@link FileWatch#INTERVAL_NS} ago (docs/safety.md)
     */
    public boolean write(MappedBusMessage message) throws EOFException {
        if (frames) {
            throw notAFrame();
        }
        MemoryMappedFile m = mem();
        long offset = -1;
        try {
            offset = allocate(m);
            // allocate() checked the record's bounds: the header and the status need no check of their
            // own (MemoryMappedFile.putIntInRecord); the message's stores, its code, are checked.
            m.putIntInRecord(offset + Layout.METADATA_OFFSET, message.type());
            message.write(m, offset + Layout.PAYLOAD_OFFSET);
            boolean ok = m.commitInRecord(offset);
            wake.wakeIfNeeded();
            return ok;
        } catch (InternalError e) {
            if (faultElsewhere(m, e)) {
                return offset < 0 ? write(message) : finish(m, offset, message.type(), message, null, 0);
            }
            throw fault(m, e);
        } catch (BusTruncatedException e) {
            throw fault(m, e);
        }
    }

    /**
     * Writes bytes as one record; the metadata holds {@code length}.
     *
     * @param src    source array
     * @param offset index of the first byte
     * @param length number of bytes, at most the record size
     * @return true if committed; false if a reader had already rolled the record back (too slow)
     * @throws EOFException             if the bus is full
     * @throws IllegalArgumentException if {@code length} exceeds the record size or the range is outside
     *                                  {@code src} (checked before anything is allocated)
     */
    public boolean write(byte[] src, int offset, int length) throws EOFException {
        if (frames) {
            throw notAFrame();
        }
        if (length < 0 || length > recordSize) {
            throw new IllegalArgumentException("length " + length + " must be in 0.." + recordSize);
        }
        if (offset < 0 || offset > src.length - length) {
            throw new IllegalArgumentException("range offset=" + offset + " length=" + length
                    + " is outside the source array of length " + src.length);
        }
        MemoryMappedFile m = mem();
        long pos = -1;
        try {
            pos = allocate(m);
            m.putIntInRecord(pos + Layout.METADATA_OFFSET, length);
            m.putBytes(pos + Layout.PAYLOAD_OFFSET, src, offset, length);
            boolean ok = m.commitInRecord(pos);
            wake.wakeIfNeeded();
            return ok;
        } catch (InternalError e) {
            if (faultElsewhere(m, e)) {
                return pos < 0 ? write(src, offset, length) : finish(m, pos, length, null, src, offset);
            }
            throw fault(m, e);
        } catch (BusTruncatedException e) {
            throw fault(m, e);
        }
    }

    /**
     * Makes (or opens) the bus as a framed bus (docs/design/frames.md): messages of any size, 0 bytes up to
     * {@link Layout#frameMaxLength} of the file, each with an optional topic, written by {@link #write(byte[], String)}.
     * Recorded in the metadata ({@code frames=1}) of a bus this writer makes; an existing bus must have been made so
     * ({@link BusMismatchException} otherwise, and for an unframed one opened framed). Call before {@link #open()}.
     *
     * @param frames true for a framed bus
     * @return this
     * @throws IllegalArgumentException if the record size cannot be a framed bus's (a multiple of 8, at least 16)
     */
    public MappedBusWriter setFrames(boolean frames) {
        if (closed || mem != null) {
            throw new IllegalStateException("setFrames before open(): writer for " + path + " is "
                    + (closed ? "closed" : "open"));
        }
        if (frames) {
            Frames.checkRecordSize(recordSize);
        }
        this.frames = frames;
        return this;
    }

    /** @return whether this writer writes a framed bus */
    public boolean frames() {
        return frames;
    }

    /** @return the largest message this framed bus holds, in bytes */
    public long maxMessageLength() {
        return Math.min(Layout.frameMaxLength(fileSize, recordSize), Integer.MAX_VALUE);
    }

    /**
     * Writes a message of any size to a framed bus: its slots reserved with one fetch-and-add, the count, the frame
     * header and the payload written, then the whole message committed by its first slot's status.
     *
     * @param payload the message's bytes, 0 up to {@link #maxMessageLength()}
     * @param topic   its topic's name, or null for none
     * @return true if committed; false if a reader had rolled it back (this writer was too slow)
     * @throws EOFException             if the bus is full (a reservation past its end is left as a padding)
     * @throws IllegalArgumentException if the payload is longer than the file holds, or the topic name is not one
     *                                  (checked before anything is reserved)
     */
    public boolean write(byte[] payload, String topic) throws IOException {
        return write(payload, 0, payload.length, topic, Layout.FRAME_ENCODING_BYTES);
    }

    /**
     * As {@link #write(byte[], String)}, for {@code length} bytes of {@code src} from {@code offset}, with the
     * message's flags (bits 0..7: its encoding, e.g. {@link Layout#FRAME_ENCODING_SERIALIZED} for msgpack).
     *
     * @param src    source array
     * @param offset index of the first byte
     * @param length number of bytes
     * @param topic  topic name, or null
     * @param flags  the frame's flags
     * @return true if committed; false if a reader had rolled it back
     * @throws EOFException if the bus is full
     */
    public boolean write(byte[] src, int offset, int length, String topic, int flags) throws IOException {
        java.util.Objects.checkFromIndexSize(offset, length, src.length);
        return writeFrame(src, offset, length, null, topic, flags);
    }

    /**
     * As {@link #write(byte[], String)}, for the remaining bytes of {@code src} (copied straight into the mapping; its
     * position moves past them once written).
     *
     * @param src   the payload
     * @param topic topic name, or null
     * @return true if committed; false if a reader had rolled it back
     * @throws EOFException if the bus is full
     */
    public boolean write(java.nio.ByteBuffer src, String topic) throws IOException {
        return writeFrame(null, 0, src.remaining(), src, topic, Layout.FRAME_ENCODING_BYTES);
    }

    private boolean writeFrame(byte[] src, int offset, int length, java.nio.ByteBuffer buf, String topic, int flags)
            throws IOException {
        if (!frames) {
            throw new IllegalStateException("messages with topics and of any size need a framed bus: setFrames(true)"
                    + " before open() (" + path + ")");
        }
        if (length > maxLength) {
            throw new IllegalArgumentException("a message of " + length + " bytes is longer than " + path
                    + " holds (" + Layout.frameMaxLength(fileSize, recordSize) + " bytes in fileSize " + fileSize
                    + ", recordSize " + recordSize + ")");
        }
        int topicId = topic == null ? Layout.FRAME_TOPIC_NONE : topicId(topic);
        MemoryMappedFile m = mem();
        long n = Layout.frameSlots(length, recordSize);
        try {
            if ((++writes & LENGTH_CHECK_MASK) == 0) {
                m.checkLength();
            }
            long pos = m.getAndAddLong(Layout.LIMIT_OFFSET, n * slot);
            if (pos < Layout.FIRST_RECORD_OFFSET || pos > fileSize - slot) {
                m.checkLength();
                throw new EOFException("bus full: a message of " + n + " slots at offset " + pos
                        + " does not fit in fileSize " + fileSize + " (" + path + ")");
            }
            writers.publish(positionBase + pos, positionBase + pos + n * slot);
            lastOffset = pos;
            lastEnd = pos + n * slot;
            if (n > Frames.slotsLeft(pos, fileSize, slot)) {
                Frames.pad(m, pos, fileSize, slot);
                wake.wakeIfNeeded();
                throw new EOFException("bus full: a message of " + n + " slots at offset " + pos + " runs past fileSize "
                        + fileSize + " (" + path + "); its slots in the file are a padding");
            }
            if (pos + n * slot > populated) {
                populate(m, Math.min(fileSize, pos + n * slot));
            }
            boolean ok = Frames.fill(m, pos, n, length, topicId, flags, src, offset, buf);
            wake.wakeIfNeeded();
            return ok;
        } catch (InternalError e) {
            throw fault(m, e);
        } catch (BusTruncatedException e) {
            throw fault(m, e);
        }
    }

    /**
     * The id of a topic in this framed bus's topics file, published there if new: for a caller that fills the slots of
     * {@link #reserve} with frames itself (the Spark connector's exactly-once writes).
     *
     * @param topic a topic name, or null
     * @return its id, or {@link Layout#FRAME_TOPIC_NONE} for null
     * @throws IllegalStateException    if this writer is not framed
     * @throws IllegalArgumentException if the name is not a topic name
     * @throws IOException              if the topics file cannot be opened, or is full
     */
    public int topicIdOf(String topic) throws IOException {
        if (!frames) {
            throw new IllegalStateException("topics are a framed bus's: setFrames(true) before open() (" + path + ")");
        }
        return topic == null ? Layout.FRAME_TOPIC_NONE : topicId(topic);
    }

    // The id of a topic in the bus's topics file (opened at the first topic).
    private int topicId(String topic) throws IOException {
        TopicsFile.checkName(topic);
        if (topicsFile == null) {
            mem();
            topicsFile = TopicsFile.forWriter(java.nio.file.Paths.get(topicsPath != null ? topicsPath
                    : path + Layout.TOPICS_SUFFIX), allowForeign);
            ownsTopics = true;
        }
        return topicsFile.idFor(topic);
    }

    // A rolling bus's segment of a framed bus (its writer checked the bus's metadata).
    void framedSegment() {
        frames = true;
    }

    // A rolling bus's segment writes its bus's topics file (shared by its segment writers, closed by the bus writer).
    void topicsOf(TopicsFile f) {
        topicsFile = f;
        ownsTopics = false;
    }

    // Tests: a writer stopped between its reservation (claim published) and its commit. Returns the slot's offset.
    long allocateOnly() throws EOFException {
        return allocate(mem());
    }

    // Tests: the rest of a write allocateOnly() began (the bytes, then the commit); false if a reader rolled it back.
    boolean commitReserved(long pos, byte[] src) {
        return finish(mem(), pos, src.length, null, src, 0);
    }

    /**
     * Reserves up to {@code n} contiguous record slots with one fetch-and-add of the limit, the allocation of
     * {@link #write} for many records, for a caller that fills and commits them itself (the Spark connector's
     * exactly-once writes). The slots stay uncommitted until it commits or rolls back each one
     * ({@link MemoryMappedFile#casStatus}); readers wait on them up to their timeout. Slots past the end of the file
     * are not the caller's: a reservation that does not fit is cut at the end, and is empty once the file is full.
     *
     * @param n slots wanted, at least 1
     * @return the slots reserved that fit in the file: all {@code n}, fewer at its end, none when it was full
     * @throws IllegalArgumentException if {@code n} is below 1 or its slots overflow a long
     * @throws CorruptBusException      if the limit is before the first record
     */
    public Reservation reserve(long n) throws CorruptBusException {
        if (n < 1 || n > Long.MAX_VALUE / slot) {
            throw new IllegalArgumentException("cannot reserve " + n + " slots in " + path);
        }
        MemoryMappedFile m = mem();
        long first;
        try {
            first = m.getAndAddLong(Layout.LIMIT_OFFSET, n * slot);
        } catch (InternalError e) {
            throw fault(m, e);
        }
        if (first < Layout.FIRST_RECORD_OFFSET) {
            throw new CorruptBusException("limit " + first + " of " + path + " is before the first record (a corrupt"
                    + " bus)");
        }
        return new Reservation(first, first >= fileSize ? 0 : Math.min(n, (fileSize - first) / slot));
    }

    /**
     * Wakes the readers parked on this bus, if any. The writes of this class do it after each commit; a caller that
     * commits the slots of {@link #reserve} itself calls this once after its batch.
     */
    public void wakeReaders() {
        wake.wakeIfNeeded();
    }

    private IllegalStateException notAFrame() {
        return new IllegalStateException(path + " is a framed bus: its messages are written with write(payload, topic)"
                + " (records and object messages are not frames)");
    }

    private long allocate(MemoryMappedFile m) throws EOFException {
        if ((++writes & LENGTH_CHECK_MASK) == 0) {
            // Now and then, a look at the file's length (a system call, so the JVM also delivers here a
            // fault report it may still hold from an earlier access).
            m.checkLength();
        }
        long offset = m.getAndAddLong(Layout.LIMIT_OFFSET, slot);
        if (offset < Layout.FIRST_RECORD_OFFSET || offset > fileSize - slot) {
            m.checkLength(); // a limit past the end may come from a truncated (zero) page
            throw new EOFException("bus full: record at offset " + offset + " of " + slot
                    + " bytes does not fit in fileSize " + fileSize + " (" + path + ")");
        }
        // Readers that find this slot uncommitted ask whether we are alive: published before anything slower.
        writers.publish(positionBase + offset, positionBase + offset + slot);
        if (offset + slot > populated) {
            populate(m, offset + slot);
        }
        lastOffset = offset;
        return offset;
    }

    /**
     * Our slot's last holder died with a claim (writers file): rolls back (status 0 -> 2) its slots still
     * uncommitted in this file, then clears the claim, unless it lies in another file (a rolling bus's other
     * segment, which its caller handles).
     *
     * @return how many slots were rolled back
     */
    long takeOver(WritersFile wf) {
        WritersFile.Claim c = wf.claimLeft();
        if (c.empty() || mem == null) {
            return 0;
        }
        long n = 0;
        long from = Math.max(c.begin() - positionBase, Layout.FIRST_RECORD_OFFSET);
        long stop = c.end() - positionBase;
        if ((from - Layout.FIRST_RECORD_OFFSET) % slot != 0) {
            from += slot - (from - Layout.FIRST_RECORD_OFFSET) % slot;
        }
        mem.checkLength();
        if (frames) {
            // A framed claim is one message: given up by its first slot alone (the others may hold payload bytes).
            if (c.begin() - positionBase == from && from <= fileSize - slot
                    && Frames.giveUp(mem, from, Math.min((stop - from) / slot, Frames.slotsLeft(from, fileSize, slot)))) {
                n++;
            }
            stop = from;
        }
        for (long off = from; off < stop && off <= fileSize - slot; off += slot) {
            if (mem.casStatus(off, Layout.STATUS_NOT_SET, Layout.STATUS_ROLLED_BACK)) {
                n++;
            }
        }
        if (!segment || (c.begin() >= positionBase && c.begin() < positionBase + fileSize)) {
            wf.clear(); // a claim never spans two files: all of it was in this one
        }
        return n;
    }

    // Maps the pages ahead of this writer's records POPULATE_CHUNK bytes at a time, as the Python writer's
    // _populate does with MADV_POPULATE_WRITE (here a madvise a chunk costs more than loads: 18 against 12 ns a
    // record, a writer alone on a fresh file, side by side): on tmpfs a load maps up to 16 pages
    // the file already has (the kernel's fault-around; the pages are writable, a shared mapping of tmpfs
    // tracks no dirty pages), a store one, so one trap per 64 KiB replaces 16. The file's pages exist when this process
    // created it (DiskSpace.preallocate) or writers went there; a hole maps one page, as a store would.
    // Loads change nothing, so pages other writers are filling are safe to touch. Measured side by side,
    // 80 M records on a fresh file, a Java writer alone: 24 -> 14 ns a record, system time 0.6 -> 0.2 s.
    private void populate(MemoryMappedFile m, long end) {
        // Every page is looked at: the kernel's window is aligned in the address space, not in the file,
        // and a load of a page already mapped (no fault) maps nothing around it.
        long to = Math.min(fileSize, end + POPULATE_CHUNK);
        loadPages(m, Math.max(populated, end - slot) & ~(PAGE - 1), to);
        populated = to;
    }

    private void loadPages(MemoryMappedFile m, long from, long to) {
        long sum = 0;
        for (long p = from; p < to; p += PAGE) {
            sum += m.getByte(p);
        }
        touched += sum;
    }

    // Maps every page of the file ahead, on the thread that calls it: a rolling writer's spare, prepared off the
    // writing thread before any write goes there (SegmentRoller). POPULATE_STEP at a time, each one madvise where it
    // can (DiskSpace.populate: `made`, this process just made the file, whose pages are not up to date yet), else
    // populate's loads; it stops between steps once `stop` says so (the writer rolls into the file: a madvise holds
    // the process's mapping lock, which the roll's own mmap would wait for), and the writes map the rest as they go.
    void populateAll(boolean made, BooleanSupplier stop) {
        MemoryMappedFile m = mem();
        for (long from = populated & ~(PAGE - 1); from < fileSize && !stop.getAsBoolean(); from = populated) {
            long to = Math.min(fileSize, from + POPULATE_STEP);
            if (!DiskSpace.populate(m, from, to, made)) {
                loadPages(m, from, to);
            }
            populated = to;
        }
    }

    // A step of populateAll: 4 MiB, about half a millisecond of a read populate.
    static final long POPULATE_STEP = 4 << 20;

    // Where the pages mapped ahead end (populate, populateAll).
    long populatedTo() {
        return populated;
    }

    // The kernel's default fault-around window (fault_around_bytes), and a page.
    private static final long POPULATE_CHUNK = 64 << 10;
    private static final long PAGE = 4096;

    private MemoryMappedFile mem() {
        MemoryMappedFile m = mem;
        if (dead != null) {
            throw new BusTruncatedException(path + " was truncated under this writer's mapping; open the bus again",
                    dead);
        }
        if (m == null) {
            throw new IllegalStateException("writer for " + path + " is " + (closed ? "closed" : "not open"));
        }
        watch.check();
        return m;
    }

    /**
     * The record payload size.
     *
     * @return record size in bytes
     */
    public int recordSize() {
        return recordSize;
    }

    /**
     * The logical file size.
     *
     * @return file size in bytes
     */
    public long fileSize() {
        return fileSize;
    }

    /** Releases the mapping; later writes throw {@link IllegalStateException}. Idempotent. */
    @Override
    public void close() {
        closed = true;
        watch.close();
        watch = FileWatch.NONE;
        if (ownsWake) {
            wake.close();
            ownsWake = false;
        }
        if (ownsTopics && topicsFile != null) {
            topicsFile.close();
        }
        topicsFile = null;
        ownsTopics = false;
        if (ownsWriters) {
            writers.close(); // clears our claim, then gives the slot back
            writers = WritersFile.NONE;
            ownsWriters = false;
        }
        if (mem != null) {
            if (segment) {
                mem.closeAndUnmap(); // a rolling bus's segment: the next one follows, so free this one now
            } else {
                mem.close();
            }
            mem = null;
        }
    }

    /**
     * Accepts a bus file owned by another user or writable by group or others, which {@link #open()} refuses
     * by default (another user could read and forge its records). Call before {@code open()}.
     *
     * @param allow true to accept such a file
     * @return this
     */
    public MappedBusWriter setAllowForeign(boolean allow) {
        this.allowForeign = allow;
        return this;
    }

    /** @return whether a foreign or shared-writable file is accepted */
    public boolean allowForeign() {
        return allowForeign;
    }

    // A segment of a rolling bus (RollingBus*): opened only once complete, never created here.
    static MappedBusWriter forSegment(String path, long segmentSize, int recordSize) {
        MappedBusWriter x = new MappedBusWriter(path, segmentSize, recordSize);
        x.segment = true;
        return x;
    }
}
