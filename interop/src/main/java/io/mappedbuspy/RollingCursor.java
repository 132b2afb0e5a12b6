package io.mappedbuspy;

import io.mappedbuspy.internal.*;

import java.io.EOFException;
import java.io.IOException;
import java.nio.file.NoSuchFileException;
import java.util.function.Consumer;
import io.mappedbuspy.internal.ConsumerHold;
import io.mappedbuspy.internal.RollingDir;
import io.mappedbuspy.internal.RollingLayout;

/**
 * Where a {@link RollingBusReader} is in its bus: the segment it reads (through a {@link MappedBusReader}) or waits
 * for, following segments in order, and the gap rule when retention removed the ones it needs
 * (docs/files-and-rolling.md, "Rolling bus": readers follow, gaps). Positions are {@link RollingLayout}'s. Not
 * thread-safe, like its reader.
 */
final class RollingCursor {
    // Polls between checks that the awaited segment exists, and between directory listings and identity
    // checks while waiting for a segment; empty polls inside a segment between identity checks.
    static final int EXISTS_EVERY = 64;
    private static final int LIST_EVERY = 1024;
    private static final int IDENTITY_EVERY = 1 << 16;
    // ... or at least this often (by the clock) for a caller that sleeps between polls.
    private static final long CHECK_INTERVAL_NS = 10_000_000L; // docs/safety.md: the readers' bound

    final RollingDir bus;
    private final long segmentSize;
    private final int recordSize;
    private final boolean readOnly;
    private final boolean allowForeign;
    boolean failOnGap;
    private int timeoutMs;
    // The segment readers' stall limit (MappedBusReader.setStallLimit; 0: none).
    long stallLimitMs;
    // The current segment's reader; null while waiting for segment `segment` to appear (then reading starts
    // at pendingOffset in it).
    MappedBusReader r;
    // Told r at every change (its reader keeps it: RollingBusReader.current).
    Consumer<MappedBusReader> onSwitch;
    long segment;
    private long pendingOffset = Layout.FIRST_RECORD_OFFSET;
    private long pendingPolls;
    private int emptyPolls;
    // System.nanoTime of the last identity check (bus.meta still holds this bus's id).
    private long lastIdentityCheck = System.nanoTime();
    long lost;
    // A framed bus: every segment reader reads frames, with the bus's topics file and this topic filter.
    boolean frames;
    String[] topics = new String[0];
    private long filteredBefore;
    private long skippedBefore;
    private long rollbacksBefore;
    // The next archived segment, decompressed ahead while one is read from the archive (readAhead), or null.
    private ArchiveFiles.ReadAhead ahead;
    // The buffers archived segments are decompressed into, kept from segment to segment while reading the archive.
    private final ArchiveFiles.SegmentBuffers buffers = ArchiveFiles.SegmentBuffers.kept();

    RollingCursor(RollingDir bus, boolean readOnly, boolean allowForeign, boolean failOnGap, int timeoutMs) {
        this.bus = bus;
        this.segmentSize = bus.segmentSize;
        this.recordSize = bus.recordSize;
        this.readOnly = readOnly;
        this.allowForeign = allowForeign;
        this.failOnGap = failOnGap;
        this.timeoutMs = timeoutMs;
    }

    /** At the oldest retained record, or waiting for segment 0 when there is none. */
    void openOldest() throws IOException {
        for (;;) {
            long[] segs = bus.readableSegments();
            if (segs.length == 0) {
                enterPending(0, Layout.FIRST_RECORD_OFFSET);
                return;
            }
            try {
                switchTo(segs[0], openSegment(segs[0]));
                return;
            } catch (NoSuchFileException e) {
                // removed by retention after the listing: the oldest retained is a later one
            }
        }
    }

    void setStallLimit(long ms) {
        stallLimitMs = ms;
        if (r != null) {
            r.setStallLimit(ms);
        }
    }

    void setTimeout(int ms) {
        timeoutMs = ms;
        if (r != null) {
            r.setTimeout(ms);
        }
    }

    /** The position a reader reports for an offset in a segment (a segment's end: the next one's start). */
    long global(long index, long offset) {
        return RollingLayout.readerPosition(index, offset, segmentSize, recordSize);
    }

    /** The position just past the last record allocated now (in the newest segment with records). */
    long currentEnd() throws IOException {
        RollingDir.Current c = bus.chooseCurrent();
        return c == null ? Layout.FIRST_RECORD_OFFSET : global(c.segment(), c.limit());
    }

    // Segment index from the hot directory, else (gone from there: moved) from the archive, if the bus has one
    // (docs/design/journal.md: the hot one wins while both hold it). NoSuchFileException when in neither.
    private MappedBusReader openSegment(long index) throws IOException {
        MappedBusReader hot;
        try {
            hot = openHot(index);
        } catch (NoSuchFileException e) {
            ArchiveFiles.Archived a = bus.archived(index);
            if (a == null) {
                dropAhead();
                throw e;
            }
            MemoryMappedFile m = openArchived(a);
            MappedBusReader read;
            try {
                // a framed bus's archived segment is read as frames, with the bus's topics file and filter
                MappedBusReader x = MappedBusReader.forSegment(m.path, segmentSize, recordSize, true)
                        .setFrames(frames);
                if (frames) {
                    x.topicsAt(bus.dir.resolve(Layout.TOPICS_FILE));
                    x.setTopics(topics);
                }
                x.setTimeout(timeoutMs);
                x.setStallLimit(stallLimitMs);
                read = x.openArchived(m);
            } catch (RuntimeException bad) {
                m.closeAndUnmap();
                throw bad;
            }
            readAhead(index + 1);
            return read;
        }
        dropAhead();
        buffers.close(); // reading hot segments: no spare kept
        return hot;
    }

    // Archived segment a: the one read ahead when it is that one (its errors are this segment's), else opened now.
    private MemoryMappedFile openArchived(ArchiveFiles.Archived a) throws IOException {
        ArchiveFiles.ReadAhead had = ahead;
        ahead = null;
        if (had != null) {
            if (had.archived().equals(a)) {
                return had.take(segmentSize, recordSize);
            }
            had.close();
        }
        return ArchiveFiles.open(a, segmentSize, recordSize, allowForeign, buffers);
    }

    // Reading an archived segment: the next one, when it too is archived (and not hot: the hot one wins) and
    // compressed in frames, is decompressed ahead by the decompression pool while this one is read (Python's
    // ArchiveTier does the same in a thread). What fails here fails again, and is thrown, when it is opened.
    private void readAhead(long index) {
        dropAhead();
        try {
            ArchiveFiles.Archived a = bus.archived(index);
            if (a != null && !bus.exists(index)) {
                ahead = ArchiveFiles.ReadAhead.start(a, segmentSize, allowForeign, buffers).orElse(null);
            }
        } catch (IOException | RuntimeException e) {
            // opened (or its error thrown) when it is needed
        }
    }

    private void dropAhead() {
        if (ahead != null) {
            ahead.close();
            ahead = null;
        }
    }

    private MappedBusReader openHot(long index) throws IOException {
        MappedBusReader x = MappedBusReader.forSegment(bus.segmentPath(index).toString(), segmentSize, recordSize,
                readOnly).setAllowForeign(allowForeign)
                .askingWriters(bus.dir.resolve(Layout.WRITERS_FILE).toString(),
                        Layout.joinPosition(index, 0, segmentSize))
                .setFrames(frames)
                .open();
        if (frames) {
            x.topicsAt(bus.dir.resolve(Layout.TOPICS_FILE));
            x.setTopics(topics);
        }
        x.setTimeout(timeoutMs);
        x.setStallLimit(stallLimitMs);
        return x;
    }

    private void switchTo(long index, MappedBusReader next) {
        if (r != null) {
            skippedBefore += r.rolledBackSkipped();
            filteredBefore += r.filtered();
            rollbacksBefore += r.rollbacks();
            r.close();
        }
        r = next;
        if (onSwitch != null) {
            onSwitch.accept(next);
        }
        segment = index;
        emptyPolls = 0;
    }

    /** Waits for segment {@code index}, to read from {@code offset} in it. */
    void enterPending(long index, long offset) {
        switchTo(index, null);
        pendingOffset = offset;
        pendingPolls = 0;
    }

    /**
     * Reading from {@code offset} in segment {@code index}: opens it, or waits for it if neither it nor a later one
     * exists yet; if it was removed (a later one exists), the gap rule.
     */
    void place(long index, long offset) throws IOException {
        for (;;) {
            MappedBusReader next = null;
            try {
                next = openSegment(index);
            } catch (NoSuchFileException e) {
                // absent: see what the directory holds
            }
            if (next != null) {
                if (offset != Layout.FIRST_RECORD_OFFSET) {
                    next.seek(offset);
                }
                switchTo(index, next);
                return;
            }
            long later = -1;
            boolean appeared = false;
            for (long i : bus.readableSegments()) {
                if (i == index) {
                    appeared = true;
                } else if (i > index && later < 0) {
                    later = i;
                }
            }
            if (appeared) {
                continue; // created since the open attempt
            }
            if (later < 0) {
                if (r != null || segment != index || pendingOffset != offset) {
                    enterPending(index, offset);
                }
                return;
            }
            BusGapException gap = bus.gap(index, offset, later, "segment " + index + " is gone");
            if (failOnGap) {
                throw gap;
            }
            lost += gap.lost();
            index = later;
            offset = Layout.FIRST_RECORD_OFFSET;
        }
    }

    /** {@link RollingBusReader#next()}. */
    boolean next() throws IOException {
        for (;;) {
            MappedBusReader x = r;
            if (x == null) {
                if (!awaitSegment()) {
                    return false;
                }
                continue;
            }
            try {
                return x.next() || empty();
            } catch (EOFException e) {
                // Every slot of this segment is settled: what follows is in the next one.
                enterPending(segment + 1, Layout.FIRST_RECORD_OFFSET);
            }
        }
    }

    /** A poll of the current segment found no record: the identity check now and then; false. */
    boolean empty() throws IOException {
        // The clock is read on one empty poll in 16 only: a caller that sleeps between polls still gets
        // the check within about CHECK_INTERVAL_NS, a spinning one within IDENTITY_EVERY polls.
        if ((++emptyPolls & 15) == 0) {
            long now = System.nanoTime();
            if (emptyPolls >= IDENTITY_EVERY || now - lastIdentityCheck >= CHECK_INTERVAL_NS) {
                emptyPolls = 0;
                lastIdentityCheck = now;
                checkIdentity();
            }
        }
        return false;
    }

    // One look of RollingBusReader.waitNext (Waiter.Reader.poll).
    boolean poll(boolean thorough) throws IOException {
        if (thorough && r == null) {
            // Waiting for a segment: this look asks whether it exists (a poll of next() does one in 64).
            pendingPolls = (pendingPolls + EXISTS_EVERY - 1) / EXISTS_EVERY * EXISTS_EVERY;
        }
        return next();
    }

    // The checks of a waiting reader: the segment read was not truncated, bus.meta still holds this bus's id (the
    // reader checks its wake file).
    void check() throws IOException {
        if (r != null) {
            r.waitCheck();
        }
        lastIdentityCheck = System.nanoTime();
        checkIdentity();
    }

    // bus.meta still holds this bus's id, and the segment read is there, or retention's to remove (a later one
    // exists): retention keeps the newest, so the newest gone means no record can come (rolling.py _check_newest).
    private void checkIdentity() throws IOException {
        bus.checkIdentity();
        if (r == null || bus.exists(segment) || bus.archived(segment) != null) {
            return;
        }
        for (long i : bus.segments()) {
            if (i > segment) {
                return;
            }
        }
        throw new BusReplacedException(bus.segmentPath(segment) + ", the newest segment of its rolling bus, was removed "
                + "(not by retention, which keeps the newest): no record can come to this reader");
    }

    // Waiting for segment `segment`: a cheap existence check now and then, a listing (for gaps) and an
    // identity check more rarely.
    private boolean awaitSegment() throws IOException {
        long n = pendingPolls++;
        if (n % EXISTS_EVERY != 0) {
            return false;
        }
        long now = System.nanoTime();
        if (n % LIST_EVERY == 0 || now - lastIdentityCheck >= CHECK_INTERVAL_NS) {
            if (n > 0) {
                lastIdentityCheck = now;
                checkIdentity();
            }
            place(segment, pendingOffset);
        } else if (bus.exists(segment)) {
            place(segment, pendingOffset);
        }
        return r != null;
    }

    /**
     * Holds consumer {@code name} of this bus (made at {@code start} the first time: a position, {@link
     * Consumers#OLDEST} or {@link Consumers#END}) and moves to its committed position. Segments removed since (an
     * expired consumer) are the gap rule's at the first next(), not an error here.
     *
     * @return the hold; the caller releases it
     */
    ConsumerHold attach(String name, long start) throws IOException {
        if (start == Consumers.END) {
            seekToEnd();
            start = position();
        } else if (start == Consumers.OLDEST) {
            start = position();
        } else {
            start = normalize(start, segmentSize, recordSize);
        }
        ConsumerHold h = Consumers.hold(bus.dir, true, allowForeign, name, bus.meta.id(), start);
        try {
            long p = h.position();
            long g = normalize(p, segmentSize, recordSize);
            if (g < 0) {
                throw Consumers.badPosition(h, p, "not a record boundary of segmentSize " + segmentSize
                        + " and recordSize " + recordSize);
            }
            long end = currentEnd();
            if (g > end) {
                throw Consumers.badPosition(h, p, "past the end of the bus (" + end + ")");
            }
            try {
                seek(g);
            } catch (BusGapException e) {
                RollingLayout.SegmentOffset at = RollingLayout.locate(g, segmentSize, recordSize);
                enterPending(at.segment(), at.offset());
            }
        } catch (IOException | RuntimeException e) {
            Consumers.release(h);
            throw e;
        }
        return h;
    }

    /**
     * A position as readers give them (a segment's end is the next one's first record), or -1 if it is not one on the
     * record grid. Python's reader gives the end of a segment as that segment's end boundary ({@link
     * RollingLayout#locate}).
     */
    static long normalize(long p, long segmentSize, int recordSize) {
        if (!RollingLayout.isPosition(p, segmentSize, recordSize)) {
            return -1;
        }
        RollingLayout.SegmentOffset at = RollingLayout.locate(p, segmentSize, recordSize);
        return RollingLayout.readerPosition(at.segment(), at.offset(), segmentSize, recordSize);
    }

    /**
     * {@link #normalize}, or IllegalArgumentException naming {@code what} when {@code p} is not a position.
     */
    static long checkedPosition(long p, long segmentSize, int recordSize, String what) {
        long g = normalize(p, segmentSize, recordSize);
        if (g < 0) {
            throw new IllegalArgumentException("position " + p + " is not a record boundary of segmentSize "
                    + segmentSize + " and recordSize " + recordSize + " (" + what + ")");
        }
        return g;
    }

    /** {@link RollingBusReader#position()}. */
    long position() {
        return r == null ? global(segment, pendingOffset) : global(segment, r.position());
    }

    /** {@link RollingBusReader#recordPosition()}. */
    long recordPosition() {
        if (r == null || r.recordPosition() < 0) {
            return -1;
        }
        return Layout.joinPosition(segment, r.recordPosition(), segmentSize);
    }

    /** Moves to {@code position}, as a reader reports them (never a segment's end). */
    void seek(long position) throws IOException {
        RollingLayout.SegmentOffset at = RollingLayout.locate(position, segmentSize, recordSize);
        place(at.segment(), at.offset());
    }

    /** {@link RollingBusReader#seekToEnd()}. */
    void seekToEnd() throws IOException {
        for (;;) {
            RollingDir.Current c = bus.chooseCurrent();
            if (c == null) {
                place(0, Layout.FIRST_RECORD_OFFSET);
                return;
            }
            MappedBusReader x;
            try {
                x = openSegment(c.segment());
            } catch (NoSuchFileException e) {
                continue;
            }
            x.seekToEnd();
            switchTo(c.segment(), x);
            return;
        }
    }

    long filtered() {
        return filteredBefore + (r == null ? 0 : r.filtered());
    }

    // The topic filter of the segment readers, now and for those to come.
    void topics(String[] names) {
        topics = names;
        if (r != null && frames) {
            r.setTopics(names);
        }
    }

    long rolledBackSkipped() {
        return skippedBefore + (r == null ? 0 : r.rolledBackSkipped());
    }

    long rollbacks() {
        return rollbacksBefore + (r == null ? 0 : r.rollbacks());
    }

    /** Releases the current segment and one read ahead; the counts stay. */
    void close() {
        switchTo(segment, null);
        dropAhead();
        buffers.close();
    }
}
