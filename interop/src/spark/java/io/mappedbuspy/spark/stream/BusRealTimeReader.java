package io.mappedbuspy.spark.stream;

import io.mappedbuspy.BusGapException;
import io.mappedbuspy.BusReplacedException;
import io.mappedbuspy.CorruptBusException;
import io.mappedbuspy.MappedBusMessage;
import io.mappedbuspy.internal.MemoryMappedFile;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.connector.read.streaming.PartitionOffset;
import org.apache.spark.sql.connector.read.streaming.SupportsRealTimeRead;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.io.EOFException;
import java.io.IOException;
import java.io.InterruptedIOException;
import java.util.Arrays;
import java.util.Iterator;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.locks.LockSupport;
import io.mappedbuspy.spark.BusOptions;
import io.mappedbuspy.spark.read.BusPartition;
import io.mappedbuspy.spark.read.BusReaderFactory;
import io.mappedbuspy.spark.read.BusRowReader;
import io.mappedbuspy.spark.BusSource;

/**
 * Reads a bus in Real-time Mode: a bus reader (read-write, as every bus reader: it rolls back slots left
 * uncommitted for {@code timeoutMs}) that hands each record to Spark as soon as it is committed.
 *
 * <p>{@link #nextWithTimeout} waits for the next record with the bus reader's own blocking wait
 * ({@code waitNext}), bounded by the time left in the long-running batch: it polls for 10 us, then parks on the
 * bus's wake file until a writer wakes it after its commit (or, for a writer that wakes nobody, for at most the
 * reader's park bound), so an idle bus costs no CPU and a record wakes the task within microseconds. Uncommitted
 * slots are timed by the reader's clock while it waits, so a crashed writer's run of slots costs one timeout.
 *
 * <p>When a batch ends, the reader is parked (per bus and position) instead of closed, and the next
 * batch's task, which starts at the position it stopped at, takes it over: the clock of a slot it was
 * waiting on keeps running across batches, so a hung slot is rolled back after one timeout even when
 * batches are shorter than the timeout. Parked readers unused for a minute are closed.
 */
public final class BusRealTimeReader implements SupportsRealTimeRead<InternalRow> {
    private static final Logger LOG = LoggerFactory.getLogger(BusRealTimeReader.class);
    private static final long PARKED_TTL_NS = 60_000_000_000L;
    private static final Map<String, Parked> PARKED = new ConcurrentHashMap<>();

    /** A reader left by an ended batch for the next one. */
    private static final class Parked {
        final Source source;
        final long since = System.nanoTime();

        Parked(Source source) {
            this.source = source;
        }
    }

    /** The bus reader: a single file's or a rolling bus's. */
    private static final class Source {
        final BusSource.Reader reader;
        final String busId;
        /** Single file whose end was reached: nothing more can come. */
        boolean full;

        Source(BusSource.Reader reader) {
            this.reader = reader;
            this.busId = reader.busId();
        }

        long position() {
            return reader.position();
        }

        void close() {
            reader.close();
        }
    }

    /** Copies a record's payload out of the mapping. */
    private static final class RawPayload implements MappedBusMessage {
        final byte[] bytes;

        RawPayload(int recordSize) {
            bytes = new byte[recordSize];
        }

        @Override
        public void write(MemoryMappedFile mem, long pos) {
            throw new UnsupportedOperationException();
        }

        @Override
        public void read(MemoryMappedFile mem, long pos) {
            mem.getBytes(pos, bytes, 0, bytes.length);
        }

        @Override
        public int type() {
            return 0;
        }
    }

    private final BusReaderFactory f;
    private final BusRealTimePartition p;
    private final RawPayload payload;
    private Source src;
    private InternalRow row;
    private boolean failed;

    private BusRealTimeReader(BusReaderFactory f, BusRealTimePartition p, Source src) {
        this.f = f;
        this.p = p;
        this.src = src;
        this.payload = new RawPayload(p.options.recordSize);
    }

    private static String key(String path, long position, String busId) {
        return path + "@" + position + "#" + busId;
    }

    public static BusRealTimeReader open(BusReaderFactory f, BusRealTimePartition p) throws IOException {
        BusPartition.checkHost(p.options.path, p.requiredHost);
        closeStale();
        Parked parked = PARKED.remove(key(p.options.path, p.start, p.busId));
        if (parked != null) {
            return new BusRealTimeReader(f, p, parked.source);
        }
        return new BusRealTimeReader(f, p, openSource(p));
    }

    private static void closeStale() {
        long now = System.nanoTime();
        for (Iterator<Map.Entry<String, Parked>> it = PARKED.entrySet().iterator(); it.hasNext(); ) {
            Map.Entry<String, Parked> e = it.next();
            if (now - e.getValue().since > PARKED_TTL_NS && PARKED.remove(e.getKey(), e.getValue())) {
                e.getValue().source.close();
            }
        }
    }

    private static Source openSource(BusRealTimePartition p) throws IOException {
        BusOptions o = p.options;
        BusSource bus = BusSource.of(o, p.fileSize);
        Source s = new Source(bus.openReader(null, o.failOnDataLoss));
        long start = p.start;
        if (p.busId != null && s.busId != null && !p.busId.equals(s.busId)) {
            String msg = "mappedbus: bus " + o.path + " was replaced between planning and reading a real-time "
                    + "batch: planned on bus " + p.busId + " from position " + p.start + ", the path now holds bus "
                    + s.busId;
            if (o.failOnDataLoss) {
                s.close();
                throw new IllegalStateException(msg + " (option failOnDataLoss=false reads the new bus from its "
                        + "earliest record)");
            }
            LOG.warn(msg + "; reading the new bus from its earliest record (failOnDataLoss=false)");
            start = bus.earliest();
        }
        try {
            s.reader.seek(start);
        } catch (BusGapException e) {
            s.close();
            throw gapError(o, e);
        } catch (IOException | RuntimeException e) {
            s.close();
            throw e;
        }
        return s;
    }

    private static IllegalStateException gapError(BusOptions o, BusGapException e) {
        return new IllegalStateException("mappedbus: data lost on rolling bus " + o.path + ": positions ["
                + e.lostFrom() + ", " + e.lostTo() + ") (" + e.lost() + " record slots) were removed by retention "
                + "before this query read them (option failOnDataLoss=false continues from the oldest retained "
                + "record)", e);
    }

    /** One poll of the bus ({@code waitNs} 0), or a wait of at most {@code waitNs}; true when a record is current. */
    private boolean poll(long waitNs) throws IOException {
        if (src.full) {
            return false;
        }
        try {
            return waitNs == 0 ? src.reader.next() : src.reader.waitNext(waitNs);
        } catch (InterruptedException e) {
            failed = true;
            Thread.currentThread().interrupt();
            throw new InterruptedIOException("mappedbus: interrupted while waiting for records on " + p.options.path);
        } catch (EOFException e) {
            src.full = true; // a single file's last slot is read: nothing more will come
            return false;
        } catch (BusGapException e) {
            failed = true;
            throw gapError(p.options, e);
        } catch (BusReplacedException e) {
            failed = true;
            throw new IOException("mappedbus: " + e.getMessage() + " (while reading " + p.options.path
                    + " in real-time mode)", e);
        } catch (IOException | RuntimeException e) {
            failed = true;
            throw e;
        }
    }

    @Override
    public RecordStatus nextWithTimeout(Long startTimeMs, Long timeoutMs) throws IOException {
        return nextWithTimeout(timeoutMs);
    }

    @Override
    public RecordStatus nextWithTimeout(Long timeoutMs) throws IOException {
        long deadline = System.nanoTime() + Math.max(0, timeoutMs) * 1_000_000L;
        if (poll(Math.max(0, timeoutMs) * 1_000_000L)) {
            decode();
            return RecordStatus.newStatusWithoutArrivalTime(true);
        }
        // A single file read to its end: nothing more will come, so the batch's time passes idle.
        for (long left; src.full && (left = deadline - System.nanoTime()) > 0; ) {
            if (Thread.currentThread().isInterrupted()) {
                failed = true;
                throw new InterruptedIOException("mappedbus: interrupted while waiting for records on "
                        + p.options.path);
            }
            LockSupport.parkNanos(left);
        }
        return RecordStatus.newStatusWithoutArrivalTime(false);
    }

    @Override
    public boolean next() throws IOException {
        // Spark calls nextWithTimeout in real-time mode; without a timeout, only what is committed now.
        if (poll(0)) {
            decode();
            return true;
        }
        return false;
    }

    private void decode() throws IOException {
        if (p.options.frames) {
            decodeFrame();
            return;
        }
        long pos = src.reader.recordPosition();
        int meta = src.reader.readType();
        src.reader.readMessage(payload);
        byte[] b = payload.bytes;
        Object[] values = new Object[f.kinds.length];
        for (int c = 0; c < values.length; c++) {
            int off = f.offsets[c];
            switch (f.kinds[c]) {
                case BusReaderFactory.POSITION:
                    values[c] = pos;
                    break;
                case BusReaderFactory.META:
                    values[c] = meta;
                    break;
                case BusReaderFactory.PAYLOAD:
                    values[c] = b.clone();
                    break;
                case BusReaderFactory.PAYLOAD_TRIMMED:
                    if (meta < 0 || meta > b.length) {
                        failed = true;
                        throw new CorruptBusException("mappedbus: record at position " + pos + " in "
                                + p.options.path + " has length " + meta + " outside 0.." + b.length
                                + " (trimPayload needs byte-array records)");
                    }
                    values[c] = Arrays.copyOf(b, meta);
                    break;
                default:
                    values[c] = BusRowReader.decode(f.fieldKinds[c], b, off, f.sizes[c]);
            }
        }
        row = new GenericInternalRow(values);
    }

    /** A framed bus's message as a row: position, topic, payload (the reader passed the filtered topics over). */
    private void decodeFrame() throws IOException {
        io.mappedbuspy.FrameMessage m;
        try {
            m = src.reader.message();
        } catch (IOException | RuntimeException e) {
            failed = true;
            throw e;
        }
        Object[] values = new Object[f.kinds.length];
        for (int c = 0; c < values.length; c++) {
            switch (f.kinds[c]) {
                case BusReaderFactory.POSITION:
                    values[c] = m.position();
                    break;
                case BusReaderFactory.TOPIC:
                    values[c] = m.topic() == null ? null : org.apache.spark.unsafe.types.UTF8String.fromString(m.topic());
                    break;
                default: // the payload
                    values[c] = m.payload();
            }
        }
        row = new GenericInternalRow(values);
    }

    @Override
    public InternalRow get() {
        return row;
    }

    @Override
    public PartitionOffset getOffset() {
        return new BusPartitionOffset(src.position(), src.busId);
    }

    @Override
    public void close() {
        Source s = src;
        if (s == null) {
            return;
        }
        src = null;
        if (failed) {
            s.close();
            return;
        }
        Parked old = PARKED.put(key(p.options.path, s.position(), s.busId), new Parked(s));
        if (old != null && old.source != s) {
            old.source.close();
        }
    }

    /** Closes every parked reader of {@code path} (the query reading it stopped). */
    public static void closeParked(String path) {
        for (Iterator<Map.Entry<String, Parked>> it = PARKED.entrySet().iterator(); it.hasNext(); ) {
            Map.Entry<String, Parked> e = it.next();
            if (e.getKey().startsWith(path + "@") && PARKED.remove(e.getKey(), e.getValue())) {
                e.getValue().source.close();
            }
        }
    }

    public static int parkedCount() {
        return PARKED.size();
    }

    @Override
    public String toString() {
        return "BusRealTimeReader[" + p.options.path + " at " + (src == null ? "closed" : src.position()) + "]";
    }
}
