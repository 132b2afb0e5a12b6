package io.mappedbuspy.tools;

import io.mappedbuspy.MappedBusWriter;
import io.mappedbuspy.messages.PriceUpdate;
import io.mappedbuspy.messages.Token;
import io.mappedbuspy.messages.Trade;

import java.io.IOException;
import java.util.Objects;

/**
 * Writes {@code count} test records to a bus, in the calling thread ({@link #writeAll()}) or in a Java
 * thread of its own ({@link #start()}), e.g. one started from Python through JPype while Python code in
 * the same process reads the bus. Record {@code i} of writer {@code id}, by kind:
 * <ul>
 *   <li>{@code bytes}: 8 bytes, int32 id then int32 i, little-endian (metadata 8)</li>
 *   <li>{@code price}: PriceUpdate(id, i, 2i)</li>
 *   <li>{@code token}: Token(id, i)</li>
 *   <li>{@code trade}: Trade(id * 1e9 + i, i + 0.5, id)</li>
 * </ul>
 * BusTool's write-bytes and write-objects write through this class.
 */
public final class ThreadedWriter implements Runnable {
    private final String path;
    private final long fileSize;
    private final int recordSize;
    private final long count;
    private final String kind;
    private final int writerId;
    private volatile long wrote;
    private volatile long committed;
    private volatile Throwable failure;
    private Thread thread;

    /**
     * Creates a writer; nothing is opened until it runs.
     *
     * @param path       bus file path
     * @param fileSize   logical file size in bytes
     * @param recordSize payload size of every record
     * @param count      number of records to write
     * @param kind       {@code bytes}, {@code price}, {@code token} or {@code trade}
     * @param writerId   the id written into every record
     */
    public ThreadedWriter(String path, long fileSize, int recordSize, long count, String kind, int writerId) {
        this.path = Objects.requireNonNull(path, "path");
        if (!isKind(kind)) {
            throw new IllegalArgumentException("kind must be bytes, price, token or trade, got " + kind);
        }
        if (count < 0) {
            throw new IllegalArgumentException("count must be >= 0, got " + count);
        }
        this.fileSize = fileSize;
        this.recordSize = recordSize;
        this.count = count;
        this.kind = kind;
        this.writerId = writerId;
    }

    /**
     * Whether {@code kind} names a record kind this class writes.
     *
     * @param kind a kind name
     * @return true for bytes, price, token and trade
     */
    public static boolean isKind(String kind) {
        return "bytes".equals(kind) || "price".equals(kind) || "token".equals(kind) || "trade".equals(kind);
    }

    /**
     * Writes every record in the calling thread.
     *
     * @throws IOException if the bus cannot be opened or fills up (the counters say how far it got)
     */
    public void writeAll() throws IOException {
        byte[] rec = new byte[8];
        PriceUpdate price = new PriceUpdate();
        Token token = new Token();
        Trade trade = new Trade();
        try (MappedBusWriter w = new MappedBusWriter(path, fileSize, recordSize).open()) {
            for (long i = 0; i < count; i++) {
                boolean ok;
                switch (kind) {
                    case "bytes":
                        putIntLE(rec, 0, writerId);
                        putIntLE(rec, 4, (int) i);
                        ok = w.write(rec, 0, rec.length);
                        break;
                    case "price":
                        price.setSource(writerId);
                        price.setPrice((int) i);
                        price.setQuantity((int) (2 * i));
                        ok = w.write(price);
                        break;
                    case "token":
                        token.setFrom(writerId);
                        token.setTo((int) i);
                        ok = w.write(token);
                        break;
                    default:
                        trade.setId(writerId * 1_000_000_000L + i);
                        trade.setPrice(i + 0.5);
                        trade.setQuantity(writerId);
                        ok = w.write(trade);
                        break;
                }
                // One writing thread per instance, so read-increment-write of the volatiles is safe.
                wrote++;
                if (ok) {
                    committed++;
                }
            }
        }
    }

    /** Runs {@link #writeAll()}, keeping any failure for {@link #failure()}. */
    @Override
    public void run() {
        try {
            writeAll();
        } catch (IOException | RuntimeException e) {
            failure = e;
        }
    }

    /**
     * Starts a daemon thread that runs this writer; at most once.
     *
     * @return this writer
     */
    public synchronized ThreadedWriter start() {
        if (thread != null) {
            throw new IllegalStateException("already started");
        }
        thread = new Thread(this, "mappedbuspy-writer-" + writerId);
        thread.setDaemon(true);
        thread.start();
        return this;
    }

    /**
     * Waits for the thread started by {@link #start()} to finish.
     *
     * @param timeoutMs longest wait in milliseconds
     * @return true if the writer has finished (successfully or not)
     * @throws InterruptedException if interrupted while waiting
     */
    public boolean join(long timeoutMs) throws InterruptedException {
        Thread t;
        synchronized (this) {
            t = thread;
        }
        if (t == null) {
            throw new IllegalStateException("not started");
        }
        t.join(timeoutMs);
        return !t.isAlive();
    }

    /** @return records written so far (committed or rolled back) */
    public long wrote() {
        return wrote;
    }

    /** @return records committed so far (the others were rolled back by a reader) */
    public long committed() {
        return committed;
    }

    /** @return what stopped the writer early, or null */
    public Throwable failure() {
        return failure;
    }

    private static void putIntLE(byte[] b, int at, int v) {
        b[at] = (byte) v;
        b[at + 1] = (byte) (v >>> 8);
        b[at + 2] = (byte) (v >>> 16);
        b[at + 3] = (byte) (v >>> 24);
    }
}
