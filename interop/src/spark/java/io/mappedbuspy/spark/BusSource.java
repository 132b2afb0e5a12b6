package io.mappedbuspy.spark;

import io.mappedbuspy.internal.BusMeta;
import io.mappedbuspy.Consumers;
import io.mappedbuspy.Layout;
import io.mappedbuspy.MappedBusMessage;
import io.mappedbuspy.MappedBusReader;
import io.mappedbuspy.MappedBusWriter;
import io.mappedbuspy.RollingBusReader;
import io.mappedbuspy.RollingBusWriter;
import io.mappedbuspy.internal.RollingDir;
import io.mappedbuspy.internal.RollingLayout;

import java.io.File;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import io.mappedbuspy.spark.read.BusPartition;
import io.mappedbuspy.spark.write.BusWriterFactory;
import io.mappedbuspy.spark.write.CommitLog;
import io.mappedbuspy.spark.write.RowEncoder;

/**
 * A bus the connector reads or writes: a single file, or a rolling bus (a directory of segments, through the core's
 * {@link RollingDir} and {@link RollingLayout}). The connector is written once against this; what differs between
 * the two kinds is here and nowhere else.
 *
 * <p>Positions are a single file's offsets, or a rolling bus's global positions ({@code segment * segmentSize +
 * offset}, {@link Layout#joinPosition}); a segment's end is the next segment's first record, as the rolling reader
 * reports it ({@link RollingLayout#readerPosition}).
 */
public abstract class BusSource {
    final BusOptions options;

    private BusSource(BusOptions options) {
        this.options = options;
    }

    /** The bus of {@code o} for reading on the driver: a single file must exist, or its fileSize be given. */
    public static BusSource forRead(BusOptions o) {
        return o.rolling ? new Rolling(o) : new SingleFile(o, o.resolveFileSize(true));
    }

    /** The bus of {@code o} for writing: a single file's size from the options or its metadata. */
    public static BusSource forWrite(BusOptions o) {
        return o.rolling ? new Rolling(o) : new SingleFile(o, o.writeFileSize());
    }

    /** The bus of {@code o} on an executor, with the file size the driver planned with ({@link #fileSize()}). */
    public static BusSource of(BusOptions o, long fileSize) {
        return o.rolling ? new Rolling(o) : new SingleFile(o, fileSize);
    }

    /** @return the bus's path: the file, or the rolling bus's directory */
    String path() {
        return options.path;
    }

    /** @return a single file's logical size; a rolling bus: -1 (what partitions and sinks carry to executors) */
    public abstract long fileSize();

    /** @return the position of the oldest record (a rolling bus's oldest retained one) */
    public abstract long earliest();

    /**
     * Where reads start for option {@code startingTime} (a rolling bus's time index; the check that the bus is one is
     * BusOptions'): the first record allocated at or after {@code tNs}, or the end.
     */
    public long positionAtTime(long tNs) {
        throw new IllegalArgumentException("mappedbus: option 'startingTime' needs a rolling bus (its time index)");
    }

    /** @return the position past the last slot allocated now (a slot that fits); -1 if there is no bus file */
    public abstract long end();

    /** @return the record slots in {@code [from, to)} (0 if {@code to <= from}) */
    public abstract long slots(long from, long to);

    /** @return the id the bus at the path has now (its metadata's), or null: none, or no bus */
    public abstract String busIdNow();

    /** @return the commit log of the exactly-once sink, {@code PATH.commits} or {@code DIR/bus.commits} */
    public abstract CommitLog commitLog();

    /**
     * @return how many polls that found nothing a running stream makes in one trigger before it ends the batch
     */
    public abstract int idlePolls();

    /** @return record slots from {@code consumed} to the end of the bus now (a consumer's lag); -1 if no bus */
    public long lag(long consumed) {
        long end = end();
        return end < 0 ? -1 : slots(consumed, end);
    }

    /**
     * The files holding the bus's records now, in position order: the file itself, or each segment present. Each
     * is read as a single file: partitions never span two.
     */
    public abstract List<BusFile> files();

    /**
     * Partitions of the settled slots {@code [from, to)} (a planned micro-batch), one file at a time; slots of a
     * segment retention removed are reported to {@code lost} and skipped.
     */
    public List<BusPartition> plan(long from, long to, Lost lost) {
        List<BusPartition> parts = new ArrayList<>();
        forEachPresent(from, to, lost, (f, lo, hi) ->
                parts.addAll(List.of(BusPartition.split(options, f.path, f.size, f.base, lo, hi, false))));
        return parts;
    }

    /**
     * A framed bus's partitions of the settled messages {@code [from, to)} (a planned micro-batch; both are first
     * slots), one file at a time, delivering {@code topics} (null: all); a removed segment's slots go to {@code lost}.
     */
    public List<org.apache.spark.sql.connector.read.InputPartition> planFrames(long from, long to, Lost lost,
            String[] topics) {
        List<org.apache.spark.sql.connector.read.InputPartition> parts = new ArrayList<>();
        forEachPresent(from, to, lost, (f, lo, hi) ->
                parts.add(io.mappedbuspy.spark.read.FramePartition.settled(options, f.path, f.size, f.base, lo, hi,
                        topics)));
        return parts;
    }

    /** What a plan makes of a file's part {@code [lo, hi)} (offsets in file {@code f}). */
    @FunctionalInterface
    private interface FilePart {
        void accept(BusFile f, long lo, long hi);
    }

    // The part of each file within [from, to), in position order: to `part`, or, for a segment retention removed
    // (neither hot nor archived), its slots to `lost`.
    private void forEachPresent(long from, long to, Lost lost, FilePart part) {
        for (BusFile f : spanned(from, to)) {
            long lo = Math.max(from - f.base, Layout.FIRST_RECORD_OFFSET);
            long hi = Math.min(to - f.base, f.end);
            if (hi <= lo) {
                continue;
            }
            if (f.segment && !Files.exists(Path.of(f.path), LinkOption.NOFOLLOW_LINKS) && !archived(f)) {
                lost.lost(f.base + lo, f.base + hi, slots(f.base + lo, f.base + hi));
                continue;
            }
            part.accept(f, lo, hi);
        }
    }

    /** Whether a segment gone from the hot directory is in the bus's archive (its tasks read it there). */
    boolean archived(BusFile f) {
        return false;
    }

    /** The files {@code [from, to)} spans, present or not. */
    abstract List<BusFile> spanned(long from, long to);

    /** Opens the bus, creating it as a writer would if it does not exist, then closes it (the driver, once). */
    public abstract void create() throws IOException;

    /** @return a writer on the bus (one per task) */
    public abstract Appender openWriter() throws IOException;

    /**
     * Opens a reader of the bus at its first record (read-write, like any bus reader: it rolls back slots left
     * uncommitted past {@code timeoutMs}). A single file that does not exist is created first, as a writer would:
     * a reader never creates its bus.
     *
     * @param consumer  the consumer name to hold (a new entry holds everything until its first commit), or null
     * @param failOnGap a rolling bus: throw {@link io.mappedbuspy.BusGapException} at records retention removed
     *                  (else go on at the oldest retained one)
     */
    public abstract Reader openReader(String consumer, boolean failOnGap) throws IOException;

    /** Slots of a removed segment, met while planning. */
    public interface Lost {
        void lost(long from, long to, long slots);
    }

    /** A file of the bus. */
    public static final class BusFile {
        /** Its path. */
        public final String path;
        /** Its logical size. */
        public final long size;
        /** The position of its offset 0. */
        public final long base;
        /** The offset past its last slot that fits ({@link RollingLayout#endBoundary}). */
        public final long end;
        /** A rolling bus's segment (which retention may remove). */
        public final boolean segment;

        BusFile(String path, long size, long base, long end, boolean segment) {
            this.path = path;
            this.size = size;
            this.base = base;
            this.end = end;
            this.segment = segment;
        }
    }

    /** A reader of either kind of bus. */
    public interface Reader extends AutoCloseable {
        String busId();

        long position();

        /** @return the position of the current record */
        long recordPosition();

        boolean next() throws IOException;

        boolean waitNext(long nanos) throws IOException, InterruptedException;

        void seek(long position) throws IOException;

        /** Moves past every record allocated so far; @return the position there, at most the last slot's end */
        long seekToEnd() throws IOException;

        /** Commits the held consumer's position. */
        void commit(long position);

        int readType();

        void readMessage(MappedBusMessage m);

        /** A framed bus: the current message, copied out whole (position, topic, flags, payload). */
        io.mappedbuspy.FrameMessage message() throws IOException;

        @Override
        void close();
    }

    /** A writer of either kind of bus. */
    public interface Appender extends AutoCloseable {
        /** @return false if a reader rolled the record back (this writer was too slow to commit it) */
        boolean write(RowEncoder.Record rec) throws IOException;

        /** A framed bus's message: @return false if a reader rolled it back */
        boolean writeFrame(byte[] payload, String topic) throws IOException;

        @Override
        void close();
    }

    // -- a single file ---------------------------------------------------------------------------------------

    /** A single-file bus: positions are offsets in the file. */
    static final class SingleFile extends BusSource {
        private final long fileSize;
        private final long slot;

        SingleFile(BusOptions o, long fileSize) {
            super(o);
            this.fileSize = fileSize;
            this.slot = Layout.slotSize(o.recordSize);
        }

        @Override
        public long fileSize() {
            return fileSize;
        }

        /** The end of the last slot that fits in the file. */
        private long lastSlotEnd() {
            return RollingLayout.endBoundary(fileSize, options.recordSize);
        }

        @Override
        public long earliest() {
            return Layout.FIRST_RECORD_OFFSET;
        }

        @Override
        public int idlePolls() {
            return 0; // a single file's reader sees a new record at its next poll
        }

        @Override
        public long end() {
            ByteBuffer b = ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN);
            try (FileChannel ch = FileChannel.open(Path.of(options.path), StandardOpenOption.READ,
                    LinkOption.NOFOLLOW_LINKS)) {
                ch.read(b, Layout.LIMIT_OFFSET);
            } catch (NoSuchFileException e) {
                return -1;
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
            return Math.min(Math.max(b.getLong(0), Layout.FIRST_RECORD_OFFSET), lastSlotEnd());
        }

        @Override
        public long slots(long from, long to) {
            return Math.max(0, (to - from) / slot);
        }

        @Override
        public String busIdNow() {
            try {
                BusMeta m = BusMeta.read(BusMeta.metaPath(options.path), false);
                if (m == null || m.kind() != io.mappedbuspy.BusKind.SINGLE) {
                    return null;
                }
                Object ino = Files.getAttribute(Path.of(options.path), "unix:ino", LinkOption.NOFOLLOW_LINKS);
                return ino.equals(m.inode()) ? m.id() : null;
            } catch (IOException | RuntimeException e) {
                return null; // no bus there now (being recreated), or metadata opening the bus will report
            }
        }

        @Override
        public CommitLog commitLog() {
            return new CommitLog(options.path, fileSize, options.recordSize, options.frames);
        }

        @Override
        public List<BusFile> files() {
            return List.of(new BusFile(options.path, fileSize, 0, lastSlotEnd(), false));
        }

        @Override
        List<BusFile> spanned(long from, long to) {
            return files();
        }

        @Override
        public void create() throws IOException {
            BusWriterFactory.open(options.path, fileSize, options.recordSize, options.frames).close();
        }

        @Override
        public Appender openWriter() throws IOException {
            MappedBusWriter w = BusWriterFactory.open(options.path, fileSize, options.recordSize, options.frames);
            return new Appender() {
                @Override
                public boolean write(RowEncoder.Record rec) throws IOException {
                    return rec.metaIsLength ? w.write(rec.bytes, 0, rec.length) : w.write(rec);
                }

                @Override
                public boolean writeFrame(byte[] payload, String topic) throws IOException {
                    return w.write(payload, topic);
                }

                @Override
                public void close() {
                    w.close();
                }
            };
        }

        @Override
        public Reader openReader(String consumer, boolean failOnGap) throws IOException {
            if (!new File(options.path).exists()) {
                // fileSize was given (resolveFileSize checked): a bus reader never creates its file, so the
                // connector creates it as a writer does, for writers that come later.
                create();
            }
            MappedBusReader r = new MappedBusReader(options.path, fileSize, options.recordSize);
            if (consumer != null) {
                r.setConsumer(consumer, Consumers.OLDEST);
            }
            r.setFrames(options.frames);
            r.open();
            try {
                r.setTimeout(options.timeoutMs);
                if (options.topics != null) {
                    r.setTopics(options.topics);
                }
            } catch (RuntimeException e) {
                r.close();
                throw e;
            }
            return new Reader() {
                @Override
                public String busId() {
                    return r.busId();
                }

                @Override
                public long position() {
                    return r.position();
                }

                @Override
                public long recordPosition() {
                    return r.recordPosition();
                }

                @Override
                public boolean next() throws IOException {
                    return r.next();
                }

                @Override
                public boolean waitNext(long nanos) throws IOException, InterruptedException {
                    return r.waitNext(nanos, TimeUnit.NANOSECONDS);
                }

                @Override
                public void seek(long position) {
                    r.seek(position);
                }

                @Override
                public long seekToEnd() throws IOException {
                    r.seekToEnd();
                    return Math.min(r.position(), lastSlotEnd());
                }

                @Override
                public void commit(long position) {
                    r.commit(position);
                }

                @Override
                public int readType() {
                    return r.readType();
                }

                @Override
                public void readMessage(MappedBusMessage m) {
                    r.readMessage(m);
                }

                @Override
                public io.mappedbuspy.FrameMessage message() throws IOException {
                    return r.message();
                }

                @Override
                public void close() {
                    r.close();
                }
            };
        }
    }

    // -- a rolling bus ---------------------------------------------------------------------------------------

    /** A rolling bus: its directory is the core's {@link RollingDir}, its arithmetic {@link RollingLayout}'s. */
    static final class Rolling extends BusSource {
        // The rolling reader looks for the next segment only every so many polls, and a trigger makes one call.
        private static final int IDLE_POLLS = 1024;
        private final long segmentSize;
        private final int recordSize;
        private RollingDir dir;

        Rolling(BusOptions o) {
            super(o);
            this.segmentSize = o.segmentSize;
            this.recordSize = o.recordSize;
        }

        /** The directory, opened at first use (the bus may be created after this source). */
        private RollingDir dir() {
            if (dir == null) {
                try {
                    dir = RollingDir.open(options.path, segmentSize, recordSize, false);
                } catch (NoSuchFileException e) {
                    throw new IllegalArgumentException("mappedbus: no rolling bus at " + options.path + " (no "
                            + Layout.META_FILE + ")", e);
                } catch (IOException e) {
                    throw new UncheckedIOException("mappedbus: cannot open rolling bus " + options.path + ": "
                            + e.getMessage(), e);
                }
            }
            return dir;
        }

        private long[] segments() {
            try {
                return dir().readableSegments(); // the hot directory's and the archive's (docs/journal.md)
            } catch (IOException e) {
                throw new UncheckedIOException("mappedbus: cannot list rolling bus " + options.path, e);
            }
        }

        private BusFile file(long k) {
            return new BusFile(dir().segmentPath(k).toString(), segmentSize,
                    Layout.joinPosition(k, 0, segmentSize), RollingLayout.endBoundary(segmentSize, recordSize), true);
        }

        @Override
        public long fileSize() {
            return -1;
        }

        @Override
        public int idlePolls() {
            return IDLE_POLLS;
        }

        @Override
        public long earliest() {
            long[] segs = segments();
            return Layout.joinPosition(segs.length == 0 ? 0 : segs[0], Layout.FIRST_RECORD_OFFSET, segmentSize);
        }

        @Override
        boolean archived(BusFile f) {
            try {
                return dir().archived(Math.floorDiv(f.base, segmentSize)) != null;
            } catch (IOException e) {
                throw new UncheckedIOException("mappedbus: cannot look in the archive of " + options.path + ": "
                        + e.getMessage(), e);
            }
        }

        @Override
        public long positionAtTime(long tNs) {
            try {
                return dir().positionAtTime(tNs, end());
            } catch (IOException e) {
                throw new UncheckedIOException("mappedbus: cannot read the time index of " + options.path + ": "
                        + e.getMessage(), e);
            }
        }

        @Override
        public long end() {
            RollingDir.Current at;
            try {
                at = dir().chooseCurrent();
            } catch (IOException e) {
                throw new UncheckedIOException("mappedbus: cannot read rolling bus " + options.path, e);
            }
            if (at == null) {
                return Layout.FIRST_RECORD_OFFSET;
            }
            long limit = Math.min(at.limit(), RollingLayout.endBoundary(segmentSize, recordSize));
            return RollingLayout.readerPosition(at.segment(), limit, segmentSize, recordSize);
        }

        @Override
        public long slots(long from, long to) {
            RollingLayout.SegmentOffset head = RollingLayout.locate(to, segmentSize, recordSize);
            return RollingLayout.recordsBetween(from, head.segment(), head.offset(), segmentSize, recordSize);
        }

        @Override
        public String busIdNow() {
            try {
                BusMeta m = BusOptions.rollingMeta(options.path);
                return m == null ? null : m.id();
            } catch (RuntimeException e) {
                return null; // no bus there now (being recreated), or metadata opening the bus will report
            }
        }

        @Override
        public CommitLog commitLog() {
            return CommitLog.rolling(options.path, segmentSize, recordSize, options.frames);
        }

        @Override
        public List<BusFile> files() {
            List<BusFile> out = new ArrayList<>();
            for (long k : segments()) {
                out.add(file(k));
            }
            return out;
        }

        @Override
        List<BusFile> spanned(long from, long to) {
            List<BusFile> out = new ArrayList<>();
            long last = RollingLayout.locate(to, segmentSize, recordSize).segment();
            for (long k = RollingLayout.locate(from, segmentSize, recordSize).segment(); k <= last; k++) {
                out.add(file(k));
            }
            return out;
        }

        @Override
        public void create() throws IOException {
            BusWriterFactory.openRolling(options).close();
        }

        @Override
        public Appender openWriter() throws IOException {
            RollingBusWriter w = BusWriterFactory.openRolling(options);
            return new Appender() {
                @Override
                public boolean write(RowEncoder.Record rec) throws IOException {
                    return rec.metaIsLength ? w.write(rec.bytes, 0, rec.length) : w.write(rec);
                }

                @Override
                public boolean writeFrame(byte[] payload, String topic) throws IOException {
                    return w.write(payload, topic);
                }

                @Override
                public void close() {
                    w.close();
                }
            };
        }

        @Override
        public Reader openReader(String consumer, boolean failOnGap) throws IOException {
            RollingBusReader r = new RollingBusReader(options.path, segmentSize, recordSize);
            r.setTimeout(options.timeoutMs);
            r.setFailOnGap(failOnGap);
            if (consumer != null) {
                r.setConsumer(consumer, Consumers.OLDEST);
            }
            r.setFrames(options.frames);
            if (options.topics != null) {
                r.setTopics(options.topics);
            }
            r.open();
            return new Reader() {
                @Override
                public String busId() {
                    return r.busId();
                }

                @Override
                public long position() {
                    return r.position();
                }

                @Override
                public long recordPosition() {
                    return r.recordPosition();
                }

                @Override
                public boolean next() throws IOException {
                    return r.next();
                }

                @Override
                public boolean waitNext(long nanos) throws IOException, InterruptedException {
                    return r.waitNext(nanos, TimeUnit.NANOSECONDS);
                }

                @Override
                public void seek(long position) throws IOException {
                    r.seek(position);
                }

                @Override
                public long seekToEnd() throws IOException {
                    r.seekToEnd();
                    return r.position();
                }

                @Override
                public void commit(long position) {
                    r.commit(position);
                }

                @Override
                public int readType() {
                    return r.readType();
                }

                @Override
                public void readMessage(MappedBusMessage m) {
                    r.readMessage(m);
                }

                @Override
                public io.mappedbuspy.FrameMessage message() throws IOException {
                    return r.message();
                }

                @Override
                public void close() {
                    r.close();
                }
            };
        }
    }
}
