package io.mappedbuspy;

import io.mappedbuspy.internal.*;

import java.io.EOFException;
import java.io.IOException;
import java.util.Objects;
import io.mappedbuspy.internal.BusMeta;
import io.mappedbuspy.internal.ConsumerRetention;
import io.mappedbuspy.internal.MemoryMappedFile;
import io.mappedbuspy.internal.RollingDir;
import io.mappedbuspy.internal.RollingLayout;
import io.mappedbuspy.internal.WakeFile;
import io.mappedbuspy.internal.WritersFile;

/**
 * Appends records to a rolling bus: a directory of numbered segments, each a complete Mappedbus 0.5.1
 * file (docs/files-and-rolling.md, "Rolling bus"). When a record does not fit in the current segment the
 * writer moves to the next one, creating it if no other writer has yet; a record never spans segments.
 * The writer that creates a segment applies the bus's retention. Readers parked on the bus's wake file
 * ({@code DIR/bus.wake}, {@link WakeFile}) are woken after each commit and after the writer moves to a new segment.
 *
 * <p>Any number of writers (threads or processes) may share a bus. Not thread-safe: one writer per thread.
 */
public final class RollingBusWriter implements AutoCloseable {
    private final String dir;
    private final long segmentSize;
    private final int recordSize;
    private Retention retention = Retention.NONE;
    // The consumer policy of a bus this writer creates, or null when none was set (an existing bus's is accepted).
    private ConsumerPolicy consumerPolicy;
    private final int every;
    // The offset whose allocation makes this writer its segment's spare maker (RollingLayout.spareTrigger).
    private final long trigger;
    private boolean allowForeign;
    private RollingDir bus;
    // The segments written and the moves between them, once open; `w` is their current writer, kept here for the
    // writes.
    private SegmentRoller segments;
    private MappedBusWriter w;
    private int countdown;
    private boolean closed;
    // The bus's wake file, shared by the segment writers.
    private WakeFile wake = WakeFile.NONE;
    // The bus's writers file, where this writer holds a slot: its segment writers publish their claims there.
    private WritersFile writers = WritersFile.NONE;
    // The journal (docs/journal.md): the sync policy, and the time index. An entry is appended after the first write
    // of each millisecond (System.currentTimeMillis, read before the slot is allocated) and the first of each segment
    // (a roll forgets lastIndexMs), to the current segment's index (indexAppender; opened at its first entry).
    private SyncPolicy syncPolicy = SyncPolicy.NONE;
    private long syncIntervalNs = 1_000_000_000L;
    private WriterSync sync;
    // Whether this writer appends to the time index (the bus's time_index=1, settled at open); asked: setTimeIndex.
    private Boolean timeIndexAsked;
    private boolean timeIndex;
    private long lastIndexMs;
    private TimeIndex.Appender indexAppender;
    private long indexBroken = -1; // a segment whose index could not be opened
    // A framed bus (setFrames), and its topics file (opened at the first topic, shared by the segment writers).
    private boolean frames;
    private TopicsFile topics;
    // The archive tier (docs/journal.md, "The archive tier"): what this writer asked (null: the bus's, if it has one),
    // and the archiver running while the writer is open (null: the bus has no archive).
    private String archiveDir;
    private Long archiveAfter;
    private Long archiveAgeMs;
    private ArchiveCompression compress;
    private Retention archiveRetention;
    private Archiver archiver;

    /**
     * Creates a writer of an existing rolling bus with the sizes its {@code DIR/bus.meta} records (read now;
     * {@link #open()} checks them again, and the files' owner and mode); call {@link #open()} before writing.
     *
     * @param dir the bus directory
     * @throws IllegalArgumentException if there is no {@code DIR/bus.meta}, or it describes a single-file bus: a
     *                                  new bus needs both sizes ({@link #RollingBusWriter(String, long, int)})
     * @throws UnsafeBusFileException   if {@code dir} is a link or not a directory
     * @throws IOException              if bus.meta cannot be read or is not a metadata file
     */
    public RollingBusWriter(String dir) throws IOException {
        this(dir, BusMeta.ofRollingDir(dir, "RollingBusWriter"));
    }

    private RollingBusWriter(String dir, BusMeta meta) {
        this(dir, meta.segmentSize(), meta.recordSize());
    }

    /**
     * Creates a writer; call {@link #open()} before writing.
     *
     * @param dir         the bus directory (created by {@link #open()} if absent; its parent must exist)
     * @param segmentSize logical size of every segment, at least {@code 16 + recordSize}
     * @param recordSize  payload size of every record
     */
    public RollingBusWriter(String dir, long segmentSize, int recordSize) {
        this.dir = Objects.requireNonNull(dir, "dir");
        MappedBusWriter.checkSizes(segmentSize, recordSize);
        this.segmentSize = segmentSize;
        this.recordSize = recordSize;
        this.every = (int) Math.max(1, Math.min(4096, RollingLayout.slotsPerSegment(segmentSize, recordSize) / 8));
        this.trigger = RollingLayout.spareTrigger(segmentSize, recordSize);
    }

    /**
     * Sets the retention of a bus this writer creates (stored in its bus.meta); 0 means no limit. Call before
     * {@link #open()}. On an existing bus, all zeros accept its retention, anything else must equal it.
     *
     * @param segments most segments kept
     * @param bytes    most bytes of segments kept (each counted as the segment size)
     * @param ageMs    a segment is removed once its successor was created longer ago than this
     * @return this
     */
    public RollingBusWriter setRetention(long segments, long bytes, long ageMs) {
        return setRetention(new Retention(segments, bytes, ageMs));
    }

    /**
     * Sets the retention of a bus this writer creates, as {@link #setRetention(long, long, long)}.
     *
     * @param retention the retention ({@link Retention#NONE}: accept an existing bus's)
     * @return this
     */
    public RollingBusWriter setRetention(Retention retention) {
        openCheck();
        this.retention = Objects.requireNonNull(retention, "retention");
        return this;
    }

    /**
     * Sets how far a registered consumer may lag and still hold segments from retention, on a bus this writer creates
     * (stored in its bus.meta as {@code max_consumer_lag}; Python: {@code max_consumer_lag=}). Call before
     * {@link #open()}. On an existing bus, a policy set must equal the bus's.
     *
     * @param segments segments behind the writers (0: consumers hold nothing)
     * @return this
     */
    public RollingBusWriter setMaxConsumerLag(long segments) {
        if (segments < 0) {
            throw new IllegalArgumentException("maxConsumerLag must not be negative, got " + segments);
        }
        consumerPolicy = policy().withMaxConsumerLag(segments);
        return this;
    }

    /**
     * What happens to a consumer more than {@code max_consumer_lag} segments behind, on a bus this writer creates
     * (Python: {@code on_consumer_lag=}): {@link OnConsumerLag#EXPIRE} (the default: it is flagged expired and its
     * segments go) or {@link OnConsumerLag#BLOCK} (writers wait before rolling, then throw
     * {@link BusBackPressureException}). Call before {@link #open()}.
     *
     * @param policy the policy
     * @return this
     */
    public RollingBusWriter setOnConsumerLag(OnConsumerLag policy) {
        consumerPolicy = policy().withOnConsumerLag(Objects.requireNonNull(policy, "onConsumerLag"));
        return this;
    }

    /**
     * As {@link #setOnConsumerLag(OnConsumerLag)}, by the name bus.meta stores (the Python and py4j callers').
     *
     * @param policy "expire" or "block"
     * @return this
     * @throws IllegalArgumentException for another value
     */
    public RollingBusWriter setOnConsumerLag(String policy) {
        return setOnConsumerLag(OnConsumerLag.of(policy));
    }

    /**
     * How long a writer waits for a lagging consumer under {@code block} before it throws
     * {@link BusBackPressureException}, on a bus this writer creates (stored in milliseconds as
     * {@code consumer_block_ms}; Python: {@code consumer_block_timeout=} seconds). Call before {@link #open()}.
     *
     * @param timeout the wait (default {@link Layout#DEFAULT_CONSUMER_BLOCK_MS} ms)
     * @param unit    its unit
     * @return this
     */
    public RollingBusWriter setConsumerBlockTimeout(long timeout, java.util.concurrent.TimeUnit unit) {
        if (timeout < 0) {
            throw new IllegalArgumentException("consumer block timeout must not be negative, got " + timeout);
        }
        consumerPolicy = policy().withConsumerBlockMs(unit.toMillis(timeout));
        return this;
    }

    // The policy set so far (the default before the first setter).
    private ConsumerPolicy policy() {
        openCheck();
        return consumerPolicy == null ? ConsumerPolicy.DEFAULT : consumerPolicy;
    }

    /**
     * Accepts a directory, bus.meta or segments owned by another user or writable by group or others. Call
     * before {@link #open()}.
     *
     * @param allow true to accept them
     * @return this
     */
    public RollingBusWriter setAllowForeign(boolean allow) {
        openCheck();
        this.allowForeign = allow;
        return this;
    }

    /**
     * What this writer sends to the disk and when (Python: {@code sync=}); see {@link SyncPolicy}. Call before
     * {@link #open()}.
     *
     * @param policy none (the default), segment or interval
     * @return this
     */
    public RollingBusWriter setSync(SyncPolicy policy) {
        openCheck();
        this.syncPolicy = Objects.requireNonNull(policy, "sync");
        return this;
    }

    /**
     * As {@link #setSync(SyncPolicy)}, by the name Python uses (the py4j callers').
     *
     * @param policy "none", "segment" or "interval"
     * @return this
     */
    public RollingBusWriter setSync(String policy) {
        return setSync(SyncPolicy.of(policy));
    }

    /**
     * The interval of {@link SyncPolicy#INTERVAL} (Python: {@code sync_interval=} seconds; default 1 s). Call before
     * {@link #open()}.
     *
     * @param interval the interval, more than 0
     * @param unit     its unit
     * @return this
     */
    public RollingBusWriter setSyncInterval(long interval, java.util.concurrent.TimeUnit unit) {
        openCheck();
        long ns = unit.toNanos(interval);
        if (ns <= 0) {
            throw new IllegalArgumentException("sync interval must be more than 0, got " + interval + " " + unit);
        }
        syncIntervalNs = ns;
        return this;
    }

    /**
     * Sends every record committed so far by this writer to the disk before it returns: {@code fdatasync} of every
     * segment it wrote since the last sync and of their time indexes, of the consumers' registry and the work groups'
     * files, {@code fsync} of the bus's directory and its
     * index directory (docs/journal.md, "Durability"). On {@code /dev/shm} the calls are made and do nothing.
     *
     * @throws IOException if a file cannot be synced, or an earlier sync of the policy's thread failed
     */
    public void sync() throws IOException {
        if (sync == null || closed) {
            throw new IllegalStateException("rolling writer for " + dir + " is " + (closed ? "closed" : "not open"));
        }
        sync.sync();
    }

    /**
     * Moves full segments of the bus into an archive directory in the background (Python: {@code archive=DIR};
     * docs/journal.md, "The archive tier"): a segment moves once more than {@link #setArchiveAfter} full segments are
     * hot (or it filled longer than {@link #setArchiveAge} ago) and every slot of it is settled; readers read on from
     * the archive. The settings are stored in bus.meta when first set and fixed from then on; a writer of a bus that
     * has an archive archives it whether it asked or not. With an archive the hot tier keeps no retention of its own
     * ({@link #setRetention} is refused): the archive's is {@link #setArchiveRetention}. Call before {@link #open()}.
     *
     * @param dir the archive directory (made 0700 if absent; on a disk, when the hot directory is /dev/shm)
     * @return this
     */
    public RollingBusWriter setArchive(String dir) {
        openCheck();
        java.nio.file.Path p = java.nio.file.Path.of(Objects.requireNonNull(dir, "archive")).toAbsolutePath();
        if (p.toString().contains("\n")) {
            throw new IllegalArgumentException("archive path '" + p + "' cannot be stored in bus.meta");
        }
        archiveDir = p.normalize().toString();
        return this;
    }

    /**
     * How many full segments stay hot (Python: {@code archive_after=}; default 1). Call before {@link #open()}.
     *
     * @param segments full segments kept in the hot directory, 0 or more
     * @return this
     */
    public RollingBusWriter setArchiveAfter(long segments) {
        openCheck();
        if (segments < 0) {
            throw new IllegalArgumentException("archiveAfter must be a non-negative number of segments, got " + segments);
        }
        archiveAfter = segments;
        return this;
    }

    /**
     * A full segment that filled longer ago than this moves even within {@link #setArchiveAfter} (Python:
     * {@code archive_age=} seconds; default 0: no age). Call before {@link #open()}.
     *
     * @param age  the age, 0 or more
     * @param unit its unit
     * @return this
     */
    public RollingBusWriter setArchiveAge(long age, java.util.concurrent.TimeUnit unit) {
        openCheck();
        if (age < 0) {
            throw new IllegalArgumentException("archiveAge must not be negative, got " + age + " " + unit);
        }
        archiveAgeMs = unit.toMillis(age);
        return this;
    }

    /**
     * How archived segments are stored (Python: {@code compress=}; default {@link ArchiveCompression#NONE}). Call
     * before {@link #open()}.
     *
     * @param compression none, zstd or lz4
     * @return this
     */
    public RollingBusWriter setCompress(ArchiveCompression compression) {
        openCheck();
        compress = Objects.requireNonNull(compression, "compress");
        return this;
    }

    /**
     * As {@link #setCompress(ArchiveCompression)}, by the name bus.meta stores (the py4j callers').
     *
     * @param compression "none", "zstd" or "lz4"
     * @return this
     */
    public RollingBusWriter setCompress(String compression) {
        return setCompress(ArchiveCompression.of(compression));
    }

    /**
     * The archive's own retention (Python: {@code archive_retain_segments/bytes/age}); 0 means no limit. Call before
     * {@link #open()}.
     *
     * @param segments most archived segments kept
     * @param bytes    most bytes of archived segments (each counted as the segment size)
     * @param ageMs    an archived segment is removed once it filled longer ago than this
     * @return this
     */
    public RollingBusWriter setArchiveRetention(long segments, long bytes, long ageMs) {
        return setArchiveRetention(new Retention(segments, bytes, ageMs));
    }

    /**
     * The archive's own retention, as {@link #setArchiveRetention(long, long, long)}.
     *
     * @param retention the retention
     * @return this
     */
    public RollingBusWriter setArchiveRetention(Retention retention) {
        openCheck();
        archiveRetention = Objects.requireNonNull(retention, "archiveRetention");
        return this;
    }

    /**
     * Waits until this writer's archiver holds the bus's archiver lock and no segment is due to move (Python:
     * {@code archiver.wait_idle}).
     *
     * @param timeout the longest wait
     * @param unit    its unit
     * @return true if none is due; false at the timeout
     * @throws IllegalStateException if the writer is not open or the bus has no archive
     * @throws IOException           if the hot directory cannot be listed
     */
    public boolean awaitArchived(long timeout, java.util.concurrent.TimeUnit unit) throws IOException {
        Archiver a = archiver;
        if (a == null) {
            throw new IllegalStateException("rolling writer for " + dir + " has no archiver (not open, or no archive)");
        }
        return a.waitIdle(timeout, unit);
    }

    /** @return segments this writer's archiver moved so far (0 without one) */
    public long archivedSegments() {
        Archiver a = archiver;
        return a == null ? 0 : a.moved();
    }

    /**
     * Whether the bus keeps a time index (Python: {@code time_index=}): true adds {@code time_index=1} to the bus.meta
     * of a bus without one, and from then on every writer of this project appends to it (a clock read a record);
     * false on a bus that keeps one is refused at {@link #open()} (its readers' seek by time counts on every writer's
     * entries). Not called: the bus's setting. Call before {@link #open()}.
     *
     * @param keep whether the bus keeps a time index
     * @return this
     */
    public RollingBusWriter setTimeIndex(boolean keep) {
        openCheck();
        timeIndexAsked = keep;
        return this;
    }

    /** @return whether this writer appends to the bus's time index (once open) */
    public boolean timeIndex() {
        return timeIndex;
    }

    /** @return the sync policy */
    public SyncPolicy syncPolicy() {
        return syncPolicy;
    }

    private void openCheck() {
        if (closed || bus != null) {
            throw new IllegalStateException("rolling writer for " + dir + " is " + (closed ? "closed" : "already open"));
        }
    }

    /**
     * Opens the bus (creating the directory, bus.meta and segment 0 if absent) at its newest segment.
     *
     * @return this
     * @throws BusMismatchException     if the bus was created with other sizes
     * @throws IllegalArgumentException if the retention set differs from the bus's
     * @throws IOException              if it cannot be opened or is not to be trusted
     */
    public RollingBusWriter open() throws IOException {
        openCheck();
        ArchiveRequest asked = archiveRequest();
        RollingDir b = RollingDir.forWriter(dir, segmentSize, recordSize, retention, consumerPolicy, allowForeign,
                frames);
        ConsumerRetention held = b.consumers();
        if (held != null) {
            try {
                held.check(); // a registry that cannot be read is an error now, not at some later write
            } catch (IOException | RuntimeException e) {
                b.close();
                throw e;
            }
        }
        wake = WakeFile.forRollingBus(dir, allowForeign); // never fails: without it, readers find records by polling
        writers = WritersFile.forWriter(java.nio.file.Paths.get(dir, Layout.WRITERS_FILE), allowForeign);
        SegmentRoller s;
        try {
            s = SegmentRoller.openNewest(b, wake, writers, allowForeign);
            takeOver(s);
        } catch (IOException | RuntimeException e) {
            wake.close();
            wake = WakeFile.NONE;
            writers.close();
            writers = WritersFile.NONE;
            throw e;
        }
        ArchiveFiles.Config archiveCfg;
        try {
            archiveCfg = settleArchive(b, asked);
            timeIndex = settleTimeIndex(b);
        } catch (IOException | RuntimeException e) {
            s.close();
            wake.close();
            wake = WakeFile.NONE;
            writers.close();
            writers = WritersFile.NONE;
            throw e;
        }
        lastIndexMs = timeIndex ? Long.MIN_VALUE : 0; // off: the clock is never read, 0 == 0 appends nothing
        bus = b;
        segments = s;
        w = s.w;
        sync = new WriterSync(b.dir, syncPolicy, syncIntervalNs, s.segment);
        countdown = 1; // look ahead at the first write
        if (archiveCfg != null) {
            boolean framed = b.meta.frames();
            boolean foreign = allowForeign;
            archiver = new Archiver(b.dir, b.meta, archiveCfg, allowForeign, Layout.DEFAULT_TIMEOUT_MS,
                    (segment, segmentSize, recordSize, writers, first) -> MappedBusReader
                            .forSegment(segment.toString(), segmentSize, recordSize, false)
                            .setAllowForeign(foreign)
                            .askingWriters(writers.toString(), first)
                            .setFrames(framed)
                            .open());
            archiver.start();
        }
        return this;
    }

    // What this writer asked of the archive, checked (Python's check_archive), or null when it asked nothing.
    private record ArchiveRequest(ArchiveFiles.Config cfg, java.util.Set<String> given) { }

    private ArchiveRequest archiveRequest() {
        if (archiveDir == null) {
            if (archiveAfter != null || archiveAgeMs != null || compress != null || archiveRetention != null) {
                throw new IllegalArgumentException("setArchiveAfter, setArchiveAge, setCompress and "
                        + "setArchiveRetention apply to an archive: setArchive(dir) too (" + dir + ")");
            }
            return null;
        }
        if (!retention.equals(Retention.NONE)) {
            throw new IllegalArgumentException("setRetention would delete hot segments before they are archived: with "
                    + "setArchive, the hot tier keeps archiveAfter segments (and archiveAge), and the archive's "
                    + "retention is setArchiveRetention (" + dir + ")");
        }
        java.util.Set<String> given = new java.util.HashSet<>(java.util.List.of("dir"));
        if (archiveAfter != null) {
            given.add("after");
        }
        if (archiveAgeMs != null) {
            given.add("ageMs");
        }
        if (compress != null) {
            given.add("compress");
        }
        if (archiveRetention != null) {
            given.add("retention");
        }
        Retention ar = archiveRetention == null ? Retention.NONE : archiveRetention;
        return new ArchiveRequest(new ArchiveFiles.Config(java.nio.file.Path.of(archiveDir),
                archiveAfter == null ? 1 : archiveAfter, archiveAgeMs == null ? 0 : archiveAgeMs,
                (compress == null ? ArchiveCompression.NONE : compress).files(), ar.segments(), ar.bytes(),
                ar.ageMs()), java.util.Set.copyOf(given));
    }

    // The archive this writer applies (Python's settle_meta, then prepare_archive): the request's, written into
    // bus.meta if the bus has none yet, else the bus's own, which what it set must match; a writer that asks for none
    // still archives a bus that has one. Null: no archive.
    private ArchiveFiles.Config settleArchive(RollingDir b, ArchiveRequest asked) throws IOException {
        java.nio.file.Path metaPath = b.dir.resolve(Layout.META_FILE);
        BusMeta now = BusMeta.read(metaPath, allowForeign);
        if (now == null || !now.id().equals(b.meta.id())) {
            throw new BusReplacedException(metaPath + " no longer describes the bus this writer opened");
        }
        ArchiveFiles.Config have = ArchiveFiles.config(now, metaPath.toString());
        ArchiveFiles.Config cfg = have;
        if (asked != null) {
            ArchiveFiles.Config want = asked.cfg();
            if (have == null) {
                BusMeta m = now.withExtra("archive_dir", want.dir().toString())
                        .withExtra("archive_after", Long.toString(want.after()))
                        .withExtra("archive_age_ms", Long.toString(want.ageMs()))
                        .withExtra("archive_compress", want.compress().text())
                        .withExtra("archive_retain_segments", Long.toString(want.retainSegments()))
                        .withExtra("archive_retain_bytes", Long.toString(want.retainBytes()))
                        .withExtra("archive_retain_age_ms", Long.toString(want.retainAgeMs()));
                m.write(metaPath, "rw-------", false);
                WriterSync.forceDir(b.dir);
                now = m;
                cfg = want;
            } else {
                java.util.Set<String> g = asked.given();
                boolean same = have.dir().equals(want.dir())
                        && (!g.contains("after") || have.after() == want.after())
                        && (!g.contains("ageMs") || have.ageMs() == want.ageMs())
                        && (!g.contains("compress") || have.compress() == want.compress())
                        && (!g.contains("retention") || (have.retainSegments() == want.retainSegments()
                        && have.retainBytes() == want.retainBytes() && have.retainAgeMs() == want.retainAgeMs()));
                if (!same) {
                    throw new IllegalArgumentException(metaPath + " has the archive " + have + "; this writer asked "
                            + "for " + want + ": the archive settings are fixed once set");
                }
            }
        }
        if (cfg != null) {
            Archiver.prepareArchive(b.dir, now, cfg, allowForeign);
        }
        return cfg;
    }

    // Whether this writer appends to the time index: the bus's setting; asked true adds it to a bus without one
    // (bus.meta rewritten atomically under the same id, the directory synced), asked false on a bus that keeps one is
    // refused (Python's settle_time_index).
    private boolean settleTimeIndex(RollingDir b) throws IOException {
        java.nio.file.Path metaPath = b.dir.resolve(Layout.META_FILE);
        BusMeta now = BusMeta.read(metaPath, allowForeign); // as it is now: another writer may have turned it on
        boolean have = now != null && "1".equals(now.extra(Layout.TIME_INDEX_META_KEY));
        if (timeIndexAsked == null || timeIndexAsked == have) {
            return have;
        }
        if (!timeIndexAsked) {
            throw new IllegalArgumentException(dir + " keeps a time index (bus.meta time_index=1): every writer "
                    + "appends to it, setTimeIndex(false) is refused");
        }
        if (now == null || !now.id().equals(b.meta.id())) {
            throw new BusReplacedException(metaPath + " no longer describes the bus this writer opened");
        }
        now.withExtra(Layout.TIME_INDEX_META_KEY, "1").write(metaPath, "rw-------", false);
        WriterSync.forceDir(b.dir);
        return true;
    }

    /**
     * Wakes the readers parked on this bus, if any. The writes of this class do it after each commit; a caller that
     * commits the slots of {@link #reserve} itself calls this once after its batch.
     */
    public void wakeReaders() {
        wake.wakeIfNeeded();
    }

    /**
     * Writes an object message as one record, in a new segment if the current one is full.
     *
     * @param message the message
     * @return true if committed; false if a reader had already rolled the record back (too slow)
     * @throws IOException if the next segment cannot be created or opened
     */
    public boolean write(MappedBusMessage message) throws IOException {
        long ms = timeIndex ? System.currentTimeMillis() : 0; // before the slot is allocated: the index's entry
        if (--countdown <= 0) {
            lookAhead();
        }
        for (;;) {
            MappedBusWriter x = writer();
            try {
                boolean ok = x.write(message);
                if (ms != lastIndexMs) {
                    indexEntry(ms, x.positionBase + x.lastOffset);
                }
                if (x.lastOffset == trigger) {
                    segments.makeSpare();
                }
                return ok;
            } catch (EOFException e) {
                roll();
            }
        }
    }

    /**
     * Writes bytes as one record (the metadata holds {@code length}), in a new segment if the current one
     * is full.
     *
     * @param src    source array
     * @param offset index of the first byte
     * @param length number of bytes, at most the record size
     * @return true if committed; false if a reader had already rolled the record back (too slow)
     * @throws IOException if the next segment cannot be created or opened
     */
    public boolean write(byte[] src, int offset, int length) throws IOException {
        long ms = timeIndex ? System.currentTimeMillis() : 0; // before the slot is allocated: the index's entry
        if (--countdown <= 0) {
            lookAhead();
        }
        for (;;) {
            MappedBusWriter x = writer();
            try {
                boolean ok = x.write(src, offset, length);
                if (ms != lastIndexMs) {
                    indexEntry(ms, x.positionBase + x.lastOffset);
                }
                if (x.lastOffset == trigger) {
                    segments.makeSpare();
                }
                return ok;
            } catch (EOFException e) {
                roll();
            }
        }
    }

    /**
     * Makes (or opens) the bus as a framed bus (docs/design/frames.md), as {@link MappedBusWriter#setFrames}: messages
     * of any size up to what one segment holds; a message that meets a segment's end leaves a padding there and is
     * written whole in the next segment. Call before {@link #open()}.
     *
     * @param frames true for a framed bus
     * @return this
     */
    public RollingBusWriter setFrames(boolean frames) {
        openCheck();
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

    /**
     * Writes a message of any size (up to what one segment holds) to a framed bus, as
     * {@link MappedBusWriter#write(byte[], String)}, in the next segment if it does not fit in the current one.
     *
     * @param payload the message's bytes
     * @param topic   its topic's name, or null
     * @return true if committed; false if a reader had rolled it back (this writer was too slow)
     * @throws IOException if the next segment cannot be created or opened
     */
    public boolean write(byte[] payload, String topic) throws IOException {
        return write(payload, 0, payload.length, topic, Layout.FRAME_ENCODING_BYTES);
    }

    /**
     * As {@link #write(byte[], String)}, for {@code length} bytes of {@code src} from {@code offset}, with the
     * message's flags.
     *
     * @param src    source array
     * @param offset index of the first byte
     * @param length number of bytes
     * @param topic  topic name, or null
     * @param flags  the frame's flags (bits 0..7: its encoding)
     * @return true if committed; false if a reader had rolled it back
     * @throws IOException if the next segment cannot be created or opened
     */
    public boolean write(byte[] src, int offset, int length, String topic, int flags) throws IOException {
        if (--countdown <= 0) {
            lookAhead();
        }
        for (;;) {
            MappedBusWriter x = framedWriter();
            try {
                boolean ok = x.write(src, offset, length, topic, flags);
                if (x.lastOffset <= trigger && trigger < x.lastEnd) {
                    segments.makeSpare();
                }
                return ok;
            } catch (EOFException e) {
                roll(); // the message met the segment's end: a padding there, the whole message in the next
            }
        }
    }

    /**
     * The id of a topic in this framed bus's topics file ({@code DIR/bus.topics}), published there if new: for a caller
     * that fills the slots of {@link #reserve} with frames itself (the Spark connector's exactly-once writes).
     *
     * @param topic a topic name, or null
     * @return its id, or {@link Layout#FRAME_TOPIC_NONE} for null
     * @throws IllegalStateException if this writer is not framed
     * @throws IOException           if the topics file cannot be opened, or is full
     */
    public int topicIdOf(String topic) throws IOException {
        return framedWriter().topicIdOf(topic);
    }

    // The current segment's writer, framed, with the bus's topics file.
    private MappedBusWriter framedWriter() throws IOException {
        MappedBusWriter x = writer();
        if (!frames) {
            throw new IllegalStateException("messages with topics and of any size need a framed bus: setFrames(true)"
                    + " before open() (" + dir + ")");
        }
        if (topics == null) {
            topics = TopicsFile.forWriter(java.nio.file.Paths.get(dir, Layout.TOPICS_FILE), allowForeign);
        }
        x.framedSegment();
        x.topicsOf(topics);
        return x;
    }

    /**
     * Reserves up to {@code n} contiguous record slots in one segment for a caller that fills and commits
     * them itself (the Spark connector's exactly-once writes): all {@code n} if they fit in the current
     * segment, else the slots left in it, moving to the next segment first when none is left. The slots
     * are the caller's alone and stay uncommitted until it commits (or rolls back) each of them, through its own
     * mapping of the segment; readers wait on them up to their timeout.
     *
     * @param n slots wanted, at least 1
     * @return the global position of the first slot and the slots reserved (1..n)
     * @throws IOException if the next segment cannot be created or opened
     */
    public Reservation reserve(long n) throws IOException {
        long slot = Layout.slotSize(recordSize);
        if (n < 1 || n > Long.MAX_VALUE / slot) {
            throw new IllegalArgumentException("cannot reserve " + n + " slots in " + dir);
        }
        long ms = timeIndex ? System.currentTimeMillis() : 0; // before the slots are allocated: the index's entry
        if (--countdown <= 0) {
            lookAhead();
        }
        for (;;) {
            Reservation r = writer().reserve(n); // the segment writer's fetch-and-add
            if (r.count() > 0) {
                long first = Layout.joinPosition(segments.segment, r.first(), segmentSize);
                if (ms != lastIndexMs) {
                    indexEntry(ms, first);
                }
                return new Reservation(first, r.count());
            }
            roll();
        }
    }

    // Once every `every` writes: deferred work, then, past the middle of the segment, the spare.
    private void lookAhead() throws IOException {
        countdown = every;
        if (segments != null) { // not open: the write reports it
            segments.lookAhead();
        }
    }

    // The current segment is full: to the next one (SegmentRoller.roll).
    private void roll() throws IOException {
        writer();
        long full = segments.segment;
        segments.roll();
        w = segments.w;
        countdown = every;
        if (timeIndex) {
            lastIndexMs = Long.MIN_VALUE; // the first record of a segment has an entry
        }
        sync.rolled(full, segments.segment);
        Archiver a = archiver;
        if (a != null) {
            a.wake();
        }
    }

    // The time index's entry for the record at `position`, allocated after `ms` (read before its allocation): to the
    // index of the segment written now, opened (made if absent) at its first entry. An index that cannot be made costs
    // the index (seek by time then reads that segment from its start), never the write.
    private void indexEntry(long ms, long position) {
        lastIndexMs = ms;
        long seg = Math.floorDiv(position, segmentSize);
        appendIndexEntry(ms, position, seg);
        TimeIndex.Appender a = indexAppender;
        if (a != null && a.segment() == seg && !a.stillLinked() && kept(seg)) {
            // The segment moved to the archive since its index was opened here (this writer stalled between its write
            // and this append): the entry went to the unlinked file. Appended again by path, it makes the segment's
            // hot index again (docs/design/journal.md, "late entries"); an append before the move's unlink is read by
            // the move after its unlink.
            a.close();
            indexAppender = null;
            appendIndexEntry(ms, position, seg);
        }
    }

    // Whether segment seg is still hot or in the archive: its late entry belongs in its index. Not when retention
    // removed it (no index made for a segment that is gone).
    private boolean kept(long seg) {
        try {
            return bus.exists(seg) || bus.archived(seg) != null;
        } catch (IOException | RuntimeException e) {
            return false;
        }
    }

    private void appendIndexEntry(long ms, long position, long seg) {
        TimeIndex.Appender a = indexAppender;
        if (a == null || a.segment() != seg) {
            if (a != null) {
                a.close();
            }
            if (seg == indexBroken) {
                return;
            }
            try {
                a = TimeIndex.Appender.open(bus.dir, bus.meta.id(), seg, segmentSize, recordSize, allowForeign);
            } catch (IOException | RuntimeException e) {
                a = null;
                indexBroken = seg; // not tried again in this segment
            }
            indexAppender = a;
            if (a == null) {
                return;
            }
        }
        a.append(ms * 1_000_000L, position);
    }

    private MappedBusWriter writer() {
        MappedBusWriter x = w;
        if (x == null) {
            throw new IllegalStateException("rolling writer for " + dir + " is " + (closed ? "closed" : "not open"));
        }
        return x;
    }

    /** @return the bus's id (from bus.meta) */
    public String busId() {
        if (bus == null) {
            throw new IllegalStateException("rolling writer for " + dir + " is not open");
        }
        return bus.meta.id();
    }

    /**
     * @return the index of the segment this writer writes to
     * @throws IllegalStateException if the writer is not open
     */
    public long segment() {
        if (segments == null) {
            throw new IllegalStateException("rolling writer for " + dir + " is not open");
        }
        return segments.segment;
    }

    /** @return the times this writer moved to another segment */
    public long rolls() {
        return segments == null ? 0 : segments.rolls;
    }

    /** @return nanoseconds spent moving to other segments, all rolls together */
    public long rollNanos() {
        return segments == null ? 0 : segments.rollNanos;
    }

    /** @return nanoseconds of the slowest roll */
    public long maxRollNanos() {
        return segments == null ? 0 : segments.maxRollNanos;
    }

    /** @return the segment size */
    public long segmentSize() {
        return segmentSize;
    }

    /** @return the record payload size */
    public int recordSize() {
        return recordSize;
    }

    /**
     * Stops the archiver (if any), releases the current segment; later writes throw {@link IllegalStateException}.
     * Idempotent.
     *
     * @throws IllegalStateException after releasing everything, if the archiver met an error (kept since)
     */
    @Override
    public void close() {
        closed = true;
        Throwable archiveError = null;
        if (archiver != null) {
            archiver.stop();
            archiveError = archiver.error();
            archiver = null;
        }
        if (sync != null) {
            sync.close();
        }
        if (indexAppender != null) {
            indexAppender.close();
            indexAppender = null;
        }
        if (segments != null) {
            segments.close();
        }
        w = null;
        if (topics != null) {
            topics.close();
            topics = null;
        }
        wake.close();
        writers.close(); // clears this writer's claim, gives its slot back
        writers = WritersFile.NONE;
        if (archiveError != null) {
            throw new IllegalStateException("mappedbus: the archiver of " + dir + " failed: " + archiveError,
                    archiveError);
        }
    }

    // Our slot's last holder died with a claim: roll back its uncommitted slots in the segment it lies in (if
    // retention left it), then clear it.
    private void takeOver(SegmentRoller s) throws IOException {
        WritersFile.Claim c = writers.claimLeft();
        if (c.empty()) {
            return;
        }
        long index = Math.floorDiv(c.begin(), segmentSize);
        if (index == s.segment) {
            if (frames) {
                s.w.framedSegment();
            }
            s.w.takeOver(writers);
            return;
        }
        MappedBusWriter x = MappedBusWriter.forSegment(s.bus.segmentPath(index).toString(), segmentSize, recordSize);
        x.positionBase = Layout.joinPosition(index, 0, segmentSize);
        try {
            x.setAllowForeign(allowForeign).open();
            if (frames) {
                x.framedSegment();
            }
            x.takeOver(writers);
        } catch (java.nio.file.NoSuchFileException e) {
            // its segment is gone: nothing left to roll back
        } finally {
            x.close();
        }
        writers.clear();
    }
}
