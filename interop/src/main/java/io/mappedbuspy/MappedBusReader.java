package io.mappedbuspy;

import java.io.EOFException;
import java.io.IOException;
import java.nio.file.NoSuchFileException;
import java.util.Objects;
import java.util.concurrent.TimeUnit;

/**
 * Reads the records of a bus file in allocation order, from the first record on.
 *
 * <p>{@link #next()} moves to the next committed record; {@link #readType()}, {@link #readMessage} and
 * {@link #readBuffer} then read that record, in any order and as often as wanted, until the next call to
 * {@code next()}. A record left uncommitted (status 0) for longer than the timeout is rolled back (status
 * CAS 0 -> 2) and skipped, so a crashed writer costs one timeout, never the records after it. A read-only
 * reader never writes to the file: it skips such a record locally instead.
 *
 * <p>{@link #waitNext} waits for the next record: it polls for a while, then parks on the bus's wake file
 * ({@code PATH.wake}, see {@link WakeFile}) until a writer of this project wakes it after its commit, or the park
 * bound passes (a record from a writer that wakes nobody, such as the Java original, waits at most that long);
 * {@link #setIdleStrategy} chooses how much of each.
 *
 * <p>A reader given a consumer name ({@link #setConsumer}, before {@link #open()}) is a <em>named consumer</em>: it
 * opens where that name last committed ({@link #commit()}), so a process that restarts goes on there; its position is
 * kept in the registry {@code PATH.consumers} ({@link Consumers}).
 *
 * <p>Not thread-safe: use one reader per thread.
 */
public final class MappedBusReader implements AutoCloseable {
    private static final long NO_RECORD = -1;

    private final String path;
    private final long fileSize;
    private final int recordSize;
    private final long slot;
    private final boolean readOnly;
    private MemoryMappedFile mem;
    // Accept a file of another owner, or writable by group/others (see setAllowForeign).
    private boolean allowForeign;
    // A rolling bus's segment: exists already, no sidecar metadata, may be unlinked by retention while mapped.
    boolean segment;
    private boolean closed;
    private long timeoutNanos = Layout.DEFAULT_TIMEOUT_MS * 1_000_000L;
    private long position = Layout.FIRST_RECORD_OFFSET;
    private long current = NO_RECORD;
    private long initialLimit;
    // Position whose status-0 timer is running (NO_RECORD when none) and when it started (System.nanoTime).
    private long timerPosition = NO_RECORD;
    private long timerStart;
    // The limit seen when the running clock started: uncommitted slots below it share that clock.
    private long timerLimit;
    // The last limit loaded (a slot at or past it is not allocated as far as this reader knows).
    private long limitSeen;
    // Empty polls so far, and when the file was last checked (System.nanoTime).
    private long idle;
    // A record since the last empty poll: the next empty poll pauses first (see next).
    private boolean delivered;
    // Pauses (about 25 ns each on the AMD EPYC of perf/) on the first empty poll after a record.
    private static final int CATCH_UP_PAUSES = 4;
    private long emptyPolls;
    private long lastCheck;
    private static final long CHECK_INTERVAL_NS = 100_000_000L;
    private long lockTimeoutMs = MemoryMappedFile.DEFAULT_LOCK_TIMEOUT_MS;
    private String busId;
    // Set once a fault showed the file truncated: every later call throws.
    private BusTruncatedException dead;
    private long rolledBackSkipped;
    private long rollbacks;
    // The blocking wait (waitNext): how long to spin and park, and the wake file, opened at the first park.
    private final Waiter waiter = new Waiter();
    private final Waiter.Reader waiting = new Waiter.Reader() {
        @Override
        public boolean poll(boolean thorough) throws IOException {
            return next();
        }

        @Override
        public void check() throws IOException {
            waitCheck();
        }

        @Override
        public WakeFile wakeFile() {
            if (wake == null) {
                mem();
                wake = segment ? WakeFile.NONE : WakeFile.forBus(path, allowForeign, wakeNative);
            }
            return wake;
        }
    };
    private WakeFile wake;
    // Tests: park by polling, as without the JNI library.
    boolean wakeNative = true;
    // A named consumer: its name and first start (before open), its hold on the registry (once open).
    private String consumerName;
    private long consumerStart = Consumers.OLDEST;
    private ConsumerHold consumer;

    /**
     * Creates a reader of an existing bus that may roll back uncommitted records, with the sizes its metadata
     * file {@code PATH.meta} records (read now; {@link #open()} checks them again, and the files' owner and
     * mode).
     *
     * @param path bus file path: a bus of this project, whose {@code PATH.meta} describes this file
     * @throws IllegalArgumentException if the file or {@code PATH.meta} is missing, or it describes another file
     *                                  or a rolling bus: a file of the Java original, or a bus not made yet,
     *                                  needs both sizes ({@link #MappedBusReader(String, long, int)})
     * @throws UnsafeBusFileException   if the path is a link or not a regular file
     * @throws IOException              if {@code PATH.meta} cannot be read or is not a metadata file
     */
    public MappedBusReader(String path) throws IOException {
        this(path, false);
    }

    /**
     * Creates a reader of an existing bus with the sizes its metadata file {@code PATH.meta} records, as
     * {@link #MappedBusReader(String)}.
     *
     * @param path     bus file path: a bus of this project, whose {@code PATH.meta} describes this file
     * @param readOnly open the file read-only, as {@link #MappedBusReader(String, long, int, boolean)}
     * @throws IllegalArgumentException if there is no metadata describing this file: give both sizes
     * @throws UnsafeBusFileException   if the path is a link or not a regular file
     * @throws IOException              if {@code PATH.meta} cannot be read or is not a metadata file
     */
    public MappedBusReader(String path, boolean readOnly) throws IOException {
        this(path, BusMeta.ofFile(path, "MappedBusReader"), readOnly);
    }

    private MappedBusReader(String path, BusMeta meta, boolean readOnly) {
        this(path, meta.fileSize(), meta.recordSize(), readOnly);
    }

    /**
     * Creates a reader that may roll back uncommitted records (opens the file read-write).
     *
     * @param path       bus file path (a writer creates it; a reader never does)
     * @param fileSize   logical file size in bytes, at least {@code 16 + recordSize}
     * @param recordSize payload size of every record, in bytes
     */
    public MappedBusReader(String path, long fileSize, int recordSize) {
        this(path, fileSize, recordSize, false);
    }

    /**
     * Creates a reader.
     *
     * @param path       bus file path
     * @param fileSize   logical file size in bytes, at least {@code 16 + recordSize}
     * @param recordSize payload size of every record, in bytes
     * @param readOnly   open the file read-only (it must exist); the reader then never writes, and skips
     *                   an uncommitted record locally after the timeout instead of rolling it back
     */
    public MappedBusReader(String path, long fileSize, int recordSize, boolean readOnly) {
        this.path = Objects.requireNonNull(path, "path");
        MappedBusWriter.checkSizes(fileSize, recordSize);
        this.fileSize = fileSize;
        this.recordSize = recordSize;
        this.slot = Layout.slotSize(recordSize);
        this.readOnly = readOnly;
    }

    /**
     * Waits up to {@code waitMs} for a writer to create the bus, then {@link #open()}s it.
     *
     * <p>Opens the file as {@code docs/files-and-rolling.md} says (it must exist and be a complete bus: a reader
     * never creates, grows or writes a file that is not one; never through a link; owner and mode
     * checked), checks the sizes its metadata records, and records the limit seen now (for
     * {@link #hasRecovered()}).
     *
     * @param waitMs how long to wait for a writer to create the bus, in milliseconds (0: not at all)
     * @return this reader
     * @throws NoSuchFileException     if there is no such file (after {@code waitMs})
     * @throws InterruptedException    if interrupted while waiting
     * @throws IOException             if the file cannot be opened or mapped, or is shorter than the mapping
     * @throws UnsafeBusFileException  if the path is a link, not a regular file, or foreign (see
     *                                 {@link #setAllowForeign})
     * @throws BusMismatchException    if the bus was created with other sizes
     * @throws BusLockTimeoutException if another process holds the open lock longer than the lock timeout
     * @throws CorruptBusException     if the limit is not on a record boundary for this record size
     */
    public MappedBusReader open(long waitMs) throws IOException, InterruptedException {
        long deadline = System.nanoTime() + waitMs * 1_000_000L;
        for (;;) {
            try {
                return open();
            } catch (NoSuchFileException e) {
                if (System.nanoTime() - deadline >= 0) {
                    throw e;
                }
                Thread.sleep(5);
            }
        }
    }

    /**
     * Maps the file (which must exist: a reader never creates a bus; see {@link #open(long)} to wait for a writer
     * to create it) and places the reader; see the other exceptions of {@link #open(long)}.
     *
     * @return this reader
     * @throws IOException as {@link #open(long)}
     */
    public MappedBusReader open() throws IOException {
        if (closed || mem != null) {
            throw new IllegalStateException("reader for " + path + " is " + (closed ? "closed" : "already open"));
        }
        MemoryMappedFile.OpenOptions o = new MemoryMappedFile.OpenOptions();
        o.readOnly = readOnly;
        o.allowForeign = allowForeign;
        o.lockTimeoutMs = lockTimeoutMs;
        String[] id = new String[1];
        o.beforeGrow = f -> {
            if (!segment) {
                BusMeta meta = BusMeta.read(BusMeta.metaPath(path), allowForeign);
                if (meta != null && BusMeta.SINGLE.equals(meta.kind()) && meta.inode() == f.inode()) {
                    meta.check(recordSize, fileSize, path);
                    id[0] = meta.id();
                }
            }
        };
        o.afterMap = f -> {
            initialLimit = f.getLongAcquire(Layout.LIMIT_OFFSET);
            MappedBusWriter.checkLimit(initialLimit, recordSize, path);
        };
        mem = MemoryMappedFile.open(path, fileSize, o);
        busId = id[0];
        limitSeen = initialLimit;
        lastCheck = System.nanoTime();
        if (consumerName != null && !segment) {
            try {
                attachConsumer();
            } catch (IOException | RuntimeException e) {
                close();
                throw e;
            }
        }
        return this;
    }

    // Opens the consumer (made at its first start if new) and moves to its committed position.
    private void attachConsumer() throws IOException {
        long start = consumerStart;
        if (start == Consumers.END) {
            seekToEnd();
            start = position;
        } else if (start == Consumers.OLDEST) {
            start = Layout.FIRST_RECORD_OFFSET;
        }
        consumer = Consumers.hold(java.nio.file.Path.of(path), false, allowForeign, consumerName, busId, start);
        long p = consumer.position();
        long end = Math.max(loadLimit(mem()), Layout.FIRST_RECORD_OFFSET);
        if (!Layout.isRecordBoundary(p, recordSize) || p > fileSize) {
            throw Consumers.badPosition(consumer, p, "not a record boundary within fileSize " + fileSize
                    + " for recordSize " + recordSize);
        }
        if (p > end) {
            throw Consumers.badPosition(consumer, p, "past the end of the bus (" + end + ")");
        }
        seek(p);
    }

    /**
     * Makes this reader the named consumer {@code name}, which starts at the oldest record the first time. Call before
     * {@link #open()}.
     *
     * @param name 1 to 64 bytes of UTF-8, no control characters
     * @return this
     * @see #setConsumer(String, long)
     */
    public MappedBusReader setConsumer(String name) {
        return setConsumer(name, Consumers.OLDEST);
    }

    /**
     * Makes this reader the named consumer {@code name}: {@link #open()} registers it in {@code PATH.consumers} (at
     * {@code start} the first time) and holds it until {@link #close()}, then moves to its committed position. A name
     * held by another live reader (another process, or another reader of this one) makes {@code open()} throw
     * {@link ConsumerInUseException}. Call before {@code open()}.
     *
     * @param name  1 to 64 bytes of UTF-8, no control characters
     * @param start where a new consumer starts: a record boundary, {@link Consumers#OLDEST} or {@link Consumers#END}
     * @return this
     */
    public MappedBusReader setConsumer(String name, long start) {
        if (closed || mem != null) {
            throw new IllegalStateException("set the consumer of " + path + " before open()");
        }
        ConsumerEntry.nameBytes(name);
        if (start != Consumers.OLDEST && start != Consumers.END
                && (!Layout.isRecordBoundary(start, recordSize) || start > fileSize)) {
            throw new IllegalArgumentException("consumer start " + start + " is not a record boundary within fileSize "
                    + fileSize + " for recordSize " + recordSize);
        }
        consumerName = name;
        consumerStart = start;
        return this;
    }

    /** @return the consumer name set with {@link #setConsumer}, or null */
    public String consumer() {
        return consumerName;
    }

    /**
     * Commits this consumer's position: {@link #position()}, the slot after the last record read. A restart by the
     * same name goes on there. One ordered 8-byte store (a SIGKILL leaves the old or the new position), no lock;
     * committing after each record gives exactly-once delivery across restarts.
     *
     * @throws IllegalStateException if this reader is not a named consumer, or not open
     */
    public void commit() {
        held().commit(position);
    }

    /**
     * Commits a given position for this consumer (where a restart goes on).
     *
     * @param position a record boundary within the file
     * @throws IllegalArgumentException if it is not one
     * @throws IllegalStateException    if this reader is not a named consumer, or not open
     */
    public void commit(long position) {
        if (!Layout.isRecordBoundary(position, recordSize) || position > fileSize) {
            throw new IllegalArgumentException("position " + position + " is not a record boundary within fileSize "
                    + fileSize + " for recordSize " + recordSize);
        }
        held().commit(position);
    }

    private ConsumerHold held() {
        ConsumerHold h = consumer;
        if (h == null) {
            throw new IllegalStateException("reader for " + path + " is " + (consumerName == null
                    ? "not a named consumer (setConsumer before open)" : closed ? "closed" : "not open"));
        }
        return h;
    }

    /**
     * The bus's id from its metadata file: new for every bus created.
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
    public MappedBusReader setLockTimeout(long timeoutMs) {
        if (timeoutMs < 0) {
            throw new IllegalArgumentException("lock timeout must be >= 0 ms, got " + timeoutMs);
        }
        this.lockTimeoutMs = timeoutMs;
        return this;
    }

    /**
     * Sets the rollback timeout: how long a record may stay uncommitted before this reader rolls it back
     * (or, read-only, skips it). Measured on the monotonic clock from when this reader first saw the record
     * uncommitted. It is not a bound on {@link #next()}, which never blocks.
     *
     * @param timeoutMs timeout in milliseconds, at least {@link Layout#MIN_ROLLBACK_TIMEOUT_MS} (default
     *                  {@link Layout#DEFAULT_TIMEOUT_MS})
     * @throws IllegalArgumentException if below {@link Layout#MIN_ROLLBACK_TIMEOUT_MS}
     */
    public void setTimeout(int timeoutMs) {
        checkRollbackTimeout(timeoutMs);
        timeoutNanos = timeoutMs * 1_000_000L;
    }

    // Refuses a rollback timeout so short that a live writer between its fetch-and-add and its commit would
    // be rolled back (0 would roll back every slot the reader meets uncommitted).
    static void checkRollbackTimeout(long timeoutMs) {
        if (timeoutMs < Layout.MIN_ROLLBACK_TIMEOUT_MS) {
            throw new IllegalArgumentException("the rollback timeout: how long a slot may stay uncommitted before "
                    + "readers roll it back; must be at least " + Layout.MIN_ROLLBACK_TIMEOUT_MS + " ms, got "
                    + timeoutMs);
        }
    }

    /**
     * Moves to the next committed record, if there is one yet.
     *
     * <p>A run of uncommitted slots is timed with one clock: once a slot is rolled back (or, read-only,
     * skipped) after the timeout, the following uncommitted slots that were already allocated when that
     * clock started are timed out at once, so a crashed batch costs one timeout. When a slot this reader
     * waits on gets committed, the clock stops.
     *
     * @return true if a record is now current; false if nothing new has been committed (yet)
     * @throws EOFException          if the next record would not fit in the file (the end of the bus)
     * @throws CorruptBusException   if a status other than 0, 1 or 2, or a limit off the record grid, is found
     * @throws BusReplacedException  if, caught up, the reader finds its path names another file or none
     * @throws BusTruncatedException if the file was truncated under the mapping
     */
    public boolean next() throws EOFException, CorruptBusException, BusReplacedException {
        MemoryMappedFile m = mem();
        current = NO_RECORD;
        try {
            return next(m);
        } catch (InternalError e) {
            throw fault(m, e);
        } catch (BusTruncatedException e) {
            throw fault(m, e);
        }
    }

    private boolean next(MemoryMappedFile m) throws EOFException, CorruptBusException, BusReplacedException {
        long pos = position;
        for (;;) {
            if (pos + slot > fileSize) {
                position = pos;
                throw new EOFException("end of bus " + path + ": no record fits at position " + pos
                        + " in fileSize " + fileSize);
            }
            // The status first: a committed slot was allocated, so the common path never touches the
            // limit's cache line, which every writer's fetch-and-add needs.
            int status = m.getStatus(pos);
            if (status == Layout.STATUS_COMMITTED) {
                current = pos;
                position = pos + slot;
                idle = 0; // the first empty poll after a record looks at the limit
                delivered = true;
                if (timerPosition == pos) {
                    timerPosition = NO_RECORD; // the slot we waited on was committed: the clock stops
                }
                return true;
            }
            if (status == Layout.STATUS_ROLLED_BACK) {
                pos += slot;
                rolledBackSkipped++;
                continue;
            }
            if (pos >= limitSeen) {
                if (status == Layout.STATUS_NOT_SET && delivered) {
                    // Just caught up: the writer is most likely filling this slot's line now. Looking
                    // at once would take the line from it mid-record; about 100 ns later the record is
                    // usually whole (measured side by side: 1->1 Java 32 -> 54, Python -> Java 8.4 -> 12.7
                    // M msgs/s; round trip p50 240 -> 200 ns: in a ping-pong the echo is not there yet).
                    delivered = false;
                    for (int i = 0; i < CATCH_UP_PAUSES; i++) {
                        Thread.onSpinWait();
                    }
                    continue;
                }
                // Caught up: look at the limit on one empty poll in 16 only, and pause, so a spinning
                // reader does not steal the line the writers it waits for need (as the Python reader).
                if (status == Layout.STATUS_NOT_SET && (idle++ & 15) != 0) {
                    Thread.onSpinWait();
                    position = pos;
                    idleCheck(m);
                    return false;
                }
                long limit = loadLimit(m);
                if (limit <= pos) {
                    position = pos;
                    idleCheck(m);
                    return false;
                }
                continue; // allocated since: look at its status again
            }
            if (status != Layout.STATUS_NOT_SET) {
                position = pos;
                throw new CorruptBusException("record at position " + pos + " in " + path
                        + " has invalid status " + status + " (wrong recordSize " + recordSize
                        + ", or a corrupt file)");
            }
            if (!timedOut(pos)) {
                position = pos;
                return false;
            }
            if (readOnly) {
                // Cannot write the rollback: skip locally. Nothing was written, so it is a lost record
                // (rolledBackSkipped) but not a rollback, as in the Python reader.
                pos += slot;
                rolledBackSkipped++;
                continue;
            }
            // Immediately before a rollback: the limit on its grid and above this slot, and the file still
            // long enough (an atomic on a truncated page can crash the JVM, not just fault).
            long limit = loadLimit(m);
            if (pos >= limit) {
                continue;
            }
            m.checkLength();
            if (m.casStatus(pos, Layout.STATUS_NOT_SET, Layout.STATUS_ROLLED_BACK)) {
                rollbacks++;
                rolledBackSkipped++;
                pos += slot;
            }
            // Otherwise loop: the status is now 1 or 2 (the writer committed, or another reader won).
        }
    }

    /**
     * Waits for the next committed record, at most {@code timeout}: {@link #next()} until it returns true, spinning
     * and then parking on the bus's wake file as the {@link IdleStrategy} says. While waiting it checks every
     * 10 ms (or once per park, if parks are longer) that the file was not truncated or replaced, as {@code next()}
     * does less often.
     *
     * @param timeout the most to wait; 0 looks once
     * @param unit    its unit
     * @return true if a record is now current; false if none came in time
     * @throws EOFException          if the next record would not fit in the file (the end of the bus)
     * @throws CorruptBusException   if a status other than 0, 1 or 2, or a limit off the record grid, is found
     * @throws BusReplacedException  if the reader finds its path names another file or none
     * @throws BusTruncatedException if the file was truncated under the mapping
     * @throws InterruptedException  if the thread is interrupted while waiting (noticed within one park bound)
     * @throws IOException           as {@code next()}
     */
    public boolean waitNext(long timeout, TimeUnit unit) throws IOException, InterruptedException {
        return waiter.await(waiting, timeout, unit);
    }

    // A waiting reader's look at its files, as a writer's next access would find them (also a rolling bus's, at
    // its segment).
    void waitCheck() throws BusReplacedException {
        MemoryMappedFile m = mem();
        try {
            m.checkLength();
        } catch (BusTruncatedException e) {
            throw fault(m, e);
        }
        if (!segment) {
            m.checkPath();
        }
        if (wake != null) {
            wake.check();
        }
    }

    /**
     * How {@link #waitNext} waits.
     *
     * @param strategy BUSY_SPIN, SPIN_PARK (the default) or PARK
     * @return this
     */
    public MappedBusReader setIdleStrategy(IdleStrategy strategy) {
        waiter.strategy(strategy);
        return this;
    }

    /** @return how {@link #waitNext} waits */
    public IdleStrategy idleStrategy() {
        return waiter.strategy();
    }

    /**
     * How long {@link #waitNext} polls before it parks (SPIN_PARK).
     *
     * @param ns nanoseconds, 0 to 1 000 000 000 (default 10 000)
     * @return this
     */
    public MappedBusReader setSpinNanos(long ns) {
        waiter.spinNanos(ns);
        return this;
    }

    /** @return how long {@link #waitNext} polls before it parks */
    public long spinNanos() {
        return waiter.spinNanos();
    }

    /**
     * How long a parked {@link #waitNext} sleeps before it looks by itself, at first: the delay of a record from a
     * writer that wakes nobody (the Java original), and of a wait without the JNI library. It backs off up to
     * {@link #parkMaxNanos()} while such looks find nothing.
     *
     * @param ns nanoseconds, 10 000 to 60 000 000 000 (default {@link Layout#DEFAULT_PARK_NS})
     * @return this
     */
    public MappedBusReader setParkNanos(long ns) {
        waiter.parkNanos(ns);
        return this;
    }

    /** @return how long a parked {@link #waitNext} sleeps before it looks by itself, at first */
    public long parkNanos() {
        return waiter.parkNanos();
    }

    /**
     * The most the park bound grows to while the looks after parks that nobody woke find nothing (it doubles from
     * {@link #parkNanos()} on each, and returns there once such a look finds a record). A value below the park
     * bound is the park bound.
     *
     * @param ns nanoseconds, 10 000 to 60 000 000 000 (default {@link Layout#DEFAULT_PARK_MAX_NS})
     * @return this
     */
    public MappedBusReader setParkMaxNanos(long ns) {
        waiter.parkMaxNanos(ns);
        return this;
    }

    /** @return the most the park bound grows to */
    public long parkMaxNanos() {
        return waiter.parkMaxNanos();
    }

    private long loadLimit(MemoryMappedFile m) throws CorruptBusException {
        long limit = m.getLongAcquire(Layout.LIMIT_OFFSET);
        MappedBusWriter.checkLimit(limit, recordSize, path);
        limitSeen = limit;
        return limit;
    }

    // Whether the uncommitted slot at pos has waited out the timeout. A slot below the limit seen when
    // the running clock started was allocated by then: it keeps that start. Otherwise its clock starts now.
    private boolean timedOut(long pos) {
        long now = System.nanoTime();
        if (pos != timerPosition) {
            if (timerPosition == NO_RECORD || pos >= timerLimit) {
                timerStart = now;
                timerLimit = limitSeen;
            }
            timerPosition = pos;
        }
        return now - timerStart >= timeoutNanos;
    }

    // Caught up: now and then (2^16 empty polls, or 100 ms), check that the file is still whole and that
    // the path still names it (system calls, where the JVM also delivers a pending fault report).
    private void idleCheck(MemoryMappedFile m) throws BusReplacedException {
        if ((++emptyPolls & 63) != 0) {
            return;
        }
        long now = System.nanoTime();
        if ((emptyPolls & 0xFFFF) != 0 && now - lastCheck < CHECK_INTERVAL_NS) {
            return;
        }
        lastCheck = now;
        m.checkLength();
        if (!segment) {
            m.checkPath();
        }
    }

    // A fault in the mapping: the file was truncated under it. The reader is dead from then on.
    private BusTruncatedException fault(MemoryMappedFile m, InternalError e) {
        if (!MemoryMappedFile.isMappingFault(e)) {
            throw e;
        }
        dead = m.truncated(e);
        current = NO_RECORD;
        return dead;
    }

    private BusTruncatedException fault(MemoryMappedFile m, BusTruncatedException e) {
        dead = e;
        current = NO_RECORD;
        return e;
    }

    /**
     * The type (object message) or byte length (byte array) of the current record.
     *
     * @return the record's metadata
     * @throws BusTruncatedException if the file was truncated under the mapping
     */
    public int readType() {
        MemoryMappedFile m = mem();
        try {
            return m.getInt(current() + Layout.METADATA_OFFSET);
        } catch (InternalError e) {
            throw fault(m, e);
        }
    }

    /**
     * Reads the current record into a message.
     *
     * @param message the message to fill
     * @param <T>     the message class
     * @return {@code message}
     * @throws BusTruncatedException if the file was truncated under the mapping
     */
    public <T extends MappedBusMessage> T readMessage(T message) {
        MemoryMappedFile m = mem();
        try {
            message.read(m, current() + Layout.PAYLOAD_OFFSET);
        } catch (InternalError e) {
            throw fault(m, e);
        }
        return message;
    }

    /**
     * Copies the current record's bytes (its metadata holds their number).
     *
     * @param dst    destination array
     * @param offset index of the first destination byte
     * @return the number of bytes copied
     * @throws CorruptBusException      if the stored length is negative or larger than the record size
     * @throws IllegalArgumentException if {@code dst} has no room (the record stays current)
     * @throws BusTruncatedException    if the file was truncated under the mapping
     */
    public int readBuffer(byte[] dst, int offset) throws CorruptBusException {
        MemoryMappedFile m = mem();
        long pos = current();
        try {
            int length = m.getInt(pos + Layout.METADATA_OFFSET);
            if (length < 0 || length > recordSize) {
                throw new CorruptBusException("record at position " + pos + " in " + path + " has length " + length
                        + " outside 0.." + recordSize + " (not a byte-array record, wrong recordSize, or a corrupt file)");
            }
            if (offset < 0 || offset > dst.length - length) {
                throw new IllegalArgumentException("no room for " + length + " bytes at offset " + offset
                        + " in an array of length " + dst.length);
            }
            m.getBytes(pos + Layout.PAYLOAD_OFFSET, dst, offset, length);
            return length;
        } catch (InternalError e) {
            throw fault(m, e);
        }
    }

    /**
     * Whether this reader has reached the limit the file had when it was opened.
     *
     * @return {@code position() >= } the initial limit
     */
    public boolean hasRecovered() {
        return position >= initialLimit;
    }

    /**
     * Position of the next record to look at.
     *
     * @return a file offset
     */
    public long position() {
        return position;
    }

    /**
     * Position of the current record.
     *
     * @return the offset of the record the last successful {@link #next()} moved to, or -1 if none
     */
    public long recordPosition() {
        return current;
    }

    /**
     * Moves to a record boundary; there is no current record afterwards.
     *
     * @param pos offset of a record slot, or the end of the file
     */
    public void seek(long pos) {
        mem();
        if (!Layout.isRecordBoundary(pos, recordSize) || pos > fileSize) {
            throw new IllegalArgumentException("position " + pos + " is not a record boundary within fileSize "
                    + fileSize + " for recordSize " + recordSize);
        }
        position = pos;
        current = NO_RECORD;
        timerPosition = NO_RECORD;
    }

    /**
     * Moves to the current limit, skipping every record allocated so far.
     *
     * @throws CorruptBusException if the limit is not on a record boundary
     */
    public void seekToEnd() throws CorruptBusException {
        MemoryMappedFile m = mem();
        long limit;
        try {
            limit = loadLimit(m);
        } catch (InternalError e) {
            throw fault(m, e);
        }
        position = Math.max(limit, Layout.FIRST_RECORD_OFFSET);
        current = NO_RECORD;
        timerPosition = NO_RECORD;
    }

    /**
     * The number of records skipped: rolled back (status 2, by anyone, this reader included) or, for a
     * read-only reader, left uncommitted past the timeout and skipped locally.
     *
     * @return a count
     */
    public long rolledBackSkipped() {
        return rolledBackSkipped;
    }

    /**
     * The number of records this reader rolled back (status CAS 0 -> 2) after its timeout; always 0 for a
     * read-only reader, which never writes.
     *
     * @return a count
     */
    public long rollbacks() {
        return rollbacks;
    }

    /**
     * Whether the reader was opened read-only.
     *
     * @return true if read-only
     */
    public boolean isReadOnly() {
        return readOnly;
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

    /** Releases the mapping; later calls throw {@link IllegalStateException}. Idempotent. */
    @Override
    public void close() {
        closed = true;
        current = NO_RECORD;
        if (consumer != null) {
            ConsumerHold h = consumer;
            consumer = null;
            Consumers.release(h);
        }
        if (wake != null) {
            wake.close();
            wake = null;
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

    private MemoryMappedFile mem() {
        MemoryMappedFile m = mem;
        if (dead != null) {
            throw new BusTruncatedException(path + " was truncated under this reader's mapping; open the bus again",
                    dead);
        }
        if (m == null) {
            throw new IllegalStateException("reader for " + path + " is " + (closed ? "closed" : "not open"));
        }
        return m;
    }

    private long current() {
        if (current == NO_RECORD) {
            throw new IllegalStateException("no current record: call next() and check that it returned true");
        }
        return current;
    }

    /**
     * Accepts a bus file owned by another user or writable by group or others, which {@link #open()} refuses
     * by default (another user could read and forge its records). Call before {@code open()}.
     *
     * @param allow true to accept such a file
     * @return this
     */
    public MappedBusReader setAllowForeign(boolean allow) {
        this.allowForeign = allow;
        return this;
    }

    /** @return whether a foreign or shared-writable file is accepted */
    public boolean allowForeign() {
        return allowForeign;
    }

    // A segment of a rolling bus (RollingBus*): opened only once complete, never created here.
    static MappedBusReader forSegment(String path, long segmentSize, int recordSize, boolean readOnly) {
        MappedBusReader x = new MappedBusReader(path, segmentSize, recordSize, readOnly);
        x.segment = true;
        return x;
    }
}
