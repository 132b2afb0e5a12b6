package io.mappedbuspy;

import java.io.EOFException;
import java.io.IOException;
import java.nio.file.Path;
import io.mappedbuspy.internal.ConsumerHold;
import io.mappedbuspy.internal.Frames;
import io.mappedbuspy.internal.Liveness;
import io.mappedbuspy.internal.MemoryMappedFile;
import io.mappedbuspy.internal.TopicNames;
import io.mappedbuspy.internal.WritersFile;

/**
 * A reader's walk over the slots of one bus file in allocation order ({@link MappedBusReader}'s {@code next}): the
 * status of each slot, the limit (looked at only when caught up), the rollback clock of a slot left uncommitted, the
 * pause on catching up with a writer, and the occasional check of the file while idle. Holds the reader's position,
 * its current record and its counts; the reader owns the mapping and passes it in. The Python reader's is
 * {@code SlotScan} in _core/_slotscan.pyx (its per-record step, {@code scan_next}, in _slotscan.pxd).
 */
final class SlotScan {
    static final long NO_RECORD = -1;
    // Pauses (about 25 ns each on the AMD EPYC of perf/) on the first empty poll after a record.
    private static final int CATCH_UP_PAUSES = 4;
    private static final long CHECK_INTERVAL_NS = 10_000_000L; // docs/safety.md: the readers' bound
    // Records delivered between raisings of pending fault reports (a mask: every 1024th).
    private static final long FAULT_CHECK_RECORDS = 1023;

    private final String path;
    private final long fileSize;
    private final int recordSize;
    private final long slot;
    private final boolean readOnly;
    // A rolling bus's segment: its path is not checked while idle (retention may unlink it).
    boolean segment;
    long timeoutNanos = Layout.DEFAULT_TIMEOUT_MS * 1_000_000L;
    // The next slot to look at, and the record the last successful next() moved to (NO_RECORD: none).
    long position = Layout.FIRST_RECORD_OFFSET;
    long current = NO_RECORD;
    // Position whose status-0 timer is running (NO_RECORD when none) and when it started (System.nanoTime).
    long timerPosition = NO_RECORD;
    private long timerStart;
    // The limit seen when the running clock started: uncommitted slots below it share that clock.
    private long timerLimit;
    // The last limit loaded (a slot at or past it is not allocated as far as this reader knows).
    long limitSeen;
    // Empty polls so far, and when the file was last checked (System.nanoTime).
    private long idle;
    // A record since the last empty poll: the next empty poll pauses first (see next).
    private boolean delivered;
    private long emptyPolls;
    private long records;
    long lastCheck;
    long rolledBackSkipped;
    long rollbacks;

    // What stalled() says of an uncommitted slot below the limit.
    private enum Stall {
        /** Wait on: its writer may still commit it. */
        WAIT,
        /** Its writer is gone (the writers file says so): give it up now. */
        DEAD,
        /** No live writer known and the timeout passed: give it up. */
        TIMED_OUT
    }

    // A slot uncommitted this long has its writer looked up in the writers file (a scan and a system call), then
    // again this often while it stays so: a reader right behind a live writer finds its slot uncommitted for a few
    // hundred ns all the time, and must not pay a system call then (as the Python reader).
    private static final long ASK_AFTER_NS = 1_000_000L;
    private static final long ASK_AGAIN_NS = 1_000_000L;
    // The bus's writers file (null: none to ask), opened at the first stall that asks it and again when its path
    // names another file; the bus position of this file's offset 0 (a rolling bus's segment).
    String writersPath;
    long positionBase;
    boolean allowForeign;
    private SlotHolders writers;
    private String writersAsked; // the path writers was opened for
    private boolean timerNew;
    private long lastLook;
    private long askDue;
    private WritersFile.Holder holder = WritersFile.Holder.UNKNOWN;
    // The last dead writer's claim, in positions: its slots are given up without asking again.
    private long deadBegin;
    private long deadEnd;
    // A live writer's stall longer than this raises WriterStalledException (0: never).
    long stallLimitNanos;
    // A framed bus (docs/design/frames.md): the scan goes from a message's first slot to the next one's; the current
    // message's slot count; its topics (names and the filter; null until a framed reader opens).
    boolean frames;
    long currentSlots;
    TopicNames topics;
    // Committed messages passed over by the topic filter.
    long filtered;

    SlotScan(String path, long fileSize, int recordSize, boolean readOnly) {
        this.path = path;
        this.fileSize = fileSize;
        this.recordSize = recordSize;
        this.slot = Layout.slotSize(recordSize);
        this.readOnly = readOnly;
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

    // The bus is open with this limit: the scan starts from it.
    void opened(long limit) {
        limitSeen = limit;
        lastCheck = System.nanoTime();
    }

    // Where the scan stands, for a message about a wait that found nothing: its position, the status and limit there,
    // the limit it last saw, the filtered and skipped counts and what it knows of the slot's writer.
    String state(MemoryMappedFile m) {
        String status = position <= fileSize - slot ? Integer.toString(m.getStatus(position)) : "past the end";
        return "position " + position + " (status " + status + "), limit " + m.getLongAcquire(Layout.LIMIT_OFFSET)
                + " (last seen " + limitSeen + "), filtered " + filtered + ", rolled back skipped "
                + rolledBackSkipped + ", writer " + holder + (topics == null ? "" : ", " + topics.describe());
    }

    // The current record's position; throws if there is none.
    long current() {
        if (current == NO_RECORD) {
            throw new IllegalStateException("no current record: call next() and check that it returned true");
        }
        return current;
    }

    // seek(pos): a record boundary within the file, else IllegalArgumentException.
    void seek(long pos) {
        moveTo(checkedPosition(pos, "position"));
    }

    // pos if it is a record boundary within the file, else IllegalArgumentException naming `what`.
    long checkedPosition(long pos, String what) {
        if (!Layout.isRecordBoundary(pos, recordSize) || pos > fileSize) {
            throw new IllegalArgumentException(what + " " + pos + " is not a record boundary within fileSize "
                    + fileSize + " for recordSize " + recordSize);
        }
        return pos;
    }

    /**
     * Holds consumer {@code name} of this bus (made at {@code start} the first time: a record boundary,
     * {@link Consumers#OLDEST} or {@link Consumers#END}) and moves to its committed position, as
     * {@link RollingCursor#attach} on a rolling bus.
     *
     * @return the hold; the caller releases it
     */
    ConsumerHold attach(MemoryMappedFile m, String name, long start, boolean allowForeign, String busId)
            throws IOException {
        if (start == Consumers.END) {
            moveTo(Math.max(loadLimit(m), Layout.FIRST_RECORD_OFFSET));
            start = position;
        } else if (start == Consumers.OLDEST) {
            start = Layout.FIRST_RECORD_OFFSET;
        }
        ConsumerHold h = Consumers.hold(Path.of(path), false, allowForeign, name, busId, start);
        try {
            long p = h.position();
            long end = Math.max(loadLimit(m), Layout.FIRST_RECORD_OFFSET);
            if (!Layout.isRecordBoundary(p, recordSize) || p > fileSize) {
                throw Consumers.badPosition(h, p, "not a record boundary within fileSize " + fileSize
                        + " for recordSize " + recordSize);
            }
            if (p > end) {
                throw Consumers.badPosition(h, p, "past the end of the bus (" + end + ")");
            }
            moveTo(p);
        } catch (IOException | RuntimeException e) {
            Consumers.release(h);
            throw e;
        }
        return h;
    }

    // Places the scan at `pos` (checked by the caller), with no current record and no clock running.
    void moveTo(long pos) {
        position = pos;
        current = NO_RECORD;
        timerPosition = NO_RECORD;
    }

    // Moves to the next committed record (current), rolling back or skipping a slot left uncommitted past the
    // timeout; false when there is none yet. See MappedBusReader.next.
    boolean next(MemoryMappedFile m) throws EOFException, CorruptBusException, BusReplacedException {
        current = NO_RECORD;
        long pos = position;
        for (;;) {
            if (pos > fileSize - slot) { // not pos + slot: a corrupt limit near 2^63 would overflow
                position = pos;
                throw new EOFException("end of bus " + path + ": no record fits at position " + pos
                        + " in fileSize " + fileSize);
            }
            // The status first: a committed slot was allocated, so the common path never touches the
            // limit's cache line, which every writer's fetch-and-add needs.
            int status = m.getStatus(pos);
            if (status == Layout.STATUS_COMMITTED) {
                long step = slot;
                if (frames) {
                    step = frameStep(m, pos);
                    if (step < 0) { // not wanted by the topic filter: passed over like a rolled-back one
                        pos -= step;
                        filtered++;
                        if (timerPosition == pos + step) {
                            timerPosition = NO_RECORD;
                        }
                        continue;
                    }
                    currentSlots = step / slot;
                }
                current = pos;
                position = pos + step;
                idle = 0; // the first empty poll after a record looks at the limit
                delivered = true;
                if (timerPosition == pos) {
                    timerPosition = NO_RECORD; // the slot we waited on was committed: the clock stops
                }
                if ((++records & FAULT_CHECK_RECORDS) == 0) {
                    // A page of a truncated file can read as a run of committed records: its fault report is
                    // raised here, in next(), not in the caller's code after it (see raiseFaultReports).
                    MemoryMappedFile.raiseFaultReports();
                }
                return true;
            }
            if (status == Layout.STATUS_ROLLED_BACK) {
                // A frame's count is final once its status left 0: every reader skips the same.
                pos += frames ? Frames.skipSlots(m.getInt(pos + Layout.METADATA_OFFSET)) * slot : slot;
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
            Stall stall = stalled(m, pos);
            if (stall == Stall.WAIT) {
                position = pos;
                return false;
            }
            if (readOnly) {
                // Cannot write the rollback: skip locally. Nothing was written, so it is a lost record
                // (rolledBackSkipped) but not a rollback, as in the Python reader.
                if (frames) {
                    int meta = m.getIntAcquire(pos + Layout.METADATA_OFFSET);
                    pos += (meta != 0 ? Frames.skipSlots(meta) : giveUpSlots(pos)) * slot;
                } else {
                    pos += slot;
                }
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
            if (frames) {
                // The count first (if unwritten), then the status: the next look skips by the final count.
                if (Frames.giveUp(m, pos, giveUpSlots(pos))) {
                    rollbacks++;
                }
                continue;
            }
            if (m.casStatus(pos, Layout.STATUS_NOT_SET, Layout.STATUS_ROLLED_BACK)) {
                rollbacks++;
                rolledBackSkipped++;
                pos += slot;
            }
            // Otherwise loop: the status is now 1 or 2 (the writer committed, or another reader won).
        }
    }

    // The committed frame at pos: its bytes from pos to the next message (its slots times the slot), negative when the
    // topic filter passes it over; its meta and length checked.
    private long frameStep(MemoryMappedFile m, long pos) throws CorruptBusException {
        int meta = m.getInt(pos + Layout.METADATA_OFFSET);
        long length = m.getLong(pos + Layout.PAYLOAD_OFFSET + Layout.FRAME_LENGTH_OFFSET);
        long step = Frames.committedSlots(path, pos, meta, length, fileSize, slot) * slot;
        if (topics != null && topics.filtering()
                && !topics.wants(m.getInt(pos + Layout.PAYLOAD_OFFSET + Layout.FRAME_TOPIC_OFFSET), pos)) {
            return -step;
        }
        return step;
    }

    // How many slots a reader gives up of a message whose count is unwritten: the dead writer's claim when it begins
    // here (never past the file), else 1 (docs/design/frames.md, "Reader protocol").
    private long giveUpSlots(long pos) {
        long p = positionBase + pos;
        if (deadBegin == p && deadEnd > deadBegin) {
            return Math.max(1, Math.min((deadEnd - deadBegin) / slot, Frames.slotsLeft(pos, fileSize, slot)));
        }
        return 1;
    }

    long loadLimit(MemoryMappedFile m) throws CorruptBusException {
        long limit = m.getLongAcquire(Layout.LIMIT_OFFSET);
        MappedBusWriter.checkLimit(limit, recordSize, path);
        limitSeen = limit;
        return limit;
    }

    // Whether the uncommitted slot at pos has waited out the timeout. A slot below the limit seen when
    // the running clock started was allocated by then: it keeps that start. Otherwise its clock starts now.
    private boolean timedOut(long pos) {
        long now = System.nanoTime();
        lastLook = now;
        if (pos != timerPosition) {
            if (timerPosition == NO_RECORD || pos >= timerLimit) {
                timerStart = now;
                timerLimit = limitSeen;
            }
            timerPosition = pos;
            timerNew = true;
        }
        return now - timerStart >= timeoutNanos;
    }

    // The uncommitted slot at pos (below the limit): wait, or give it up now because its writer is gone or, no live
    // writer known, the timeout passed (docs/design/side-files.md, "The writers file").
    private Stall stalled(MemoryMappedFile m, long pos) {
        boolean timedOut = timedOut(pos); // keeps the stall clock
        long p = positionBase + pos;
        if (deadBegin <= p && p < deadEnd) {
            return Stall.DEAD;
        }
        long now = lastLook;
        if (timerNew) {
            timerNew = false;
            askDue = now + ASK_AFTER_NS;
            holder = WritersFile.Holder.UNKNOWN;
        }
        if (now - askDue >= 0) {
            askDue = now + ASK_AGAIN_NS;
            holder = askWriters(p);
            if (holder.liveness() == Liveness.DEAD) {
                deadBegin = holder.claim().begin();
                deadEnd = holder.claim().end();
                if (!readOnly && !frames) {
                    rollBackDeadClaim(m, pos); // a framed message is given up by its first slot alone (next())
                }
                return Stall.DEAD;
            }
        }
        if (holder.liveness() == Liveness.ALIVE) {
            if (stallLimitNanos > 0 && now - timerStart >= stallLimitNanos) {
                int pid = writers == null ? 0 : writers.pidOf(holder.index());
                throw new WriterStalledException("the writer of the record at " + pos + " in " + path + " (pid "
                        + pid + ", as it recorded itself) is alive but has not committed it for "
                        + (now - timerStart) / 1_000_000 + " ms (stall limit " + stallLimitNanos / 1_000_000
                        + " ms); nothing was rolled back: reading again waits on", pid, p);
            }
            return Stall.WAIT;
        }
        return timedOut ? Stall.TIMED_OUT : Stall.WAIT;
    }

    // The rest of a dead writer's claim at once (a killed batch of millions of slots: ms, not a pass of next()'s
    // loop per slot), never past the limit; next() then passes them as rolled back.
    private void rollBackDeadClaim(MemoryMappedFile m, long pos) {
        long stop = Math.min(Math.min(deadEnd - positionBase, m.getLongAcquire(Layout.LIMIT_OFFSET)), fileSize - slot + 1);
        m.checkLength();
        for (long off = pos; off < stop; off += slot) {
            if (m.casStatus(off, Layout.STATUS_NOT_SET, Layout.STATUS_ROLLED_BACK)) {
                rollbacks++;
            }
        }
    }

    // Who holds position p, by the writers file (SlotHolders: opened at the first question, and again when its
    // path names another file); a new path (the rolling reader's next bus) gets its own.
    private WritersFile.Holder askWriters(long p) {
        if (writersPath == null) {
            return WritersFile.Holder.UNKNOWN;
        }
        if (writers == null || !writersPath.equals(writersAsked)) {
            close();
            writers = new SlotHolders(java.nio.file.Paths.get(writersPath), allowForeign);
            writersAsked = writersPath;
        }
        return writers.holder(p);
    }

    // The reader closes: the writers file too.
    void close() {
        if (writers != null) {
            writers.close();
            writers = null;
        }
        if (topics != null) {
            topics.close();
        }
    }

    // Caught up: now and then (2^16 empty polls, or 10 ms: the clock is read on one empty poll in 16), check
    // that the file is still whole and that the path still names it (a segment's: names no other file; its
    // removal is retention's) (system calls, where the JVM also delivers a pending fault report).
    private void idleCheck(MemoryMappedFile m) throws BusReplacedException {
        if ((++emptyPolls & 15) != 0) {
            return;
        }
        long now = System.nanoTime();
        if ((emptyPolls & 0xFFFF) != 0 && now - lastCheck < CHECK_INTERVAL_NS) {
            return;
        }
        lastCheck = now;
        MemoryMappedFile.raiseFaultReports(); // a fault of a page read as empty: raised in next()
        m.checkLength();
        m.checkPath(segment);
    }
}
