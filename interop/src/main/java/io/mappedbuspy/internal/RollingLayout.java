package io.mappedbuspy.internal;

import java.util.Arrays;
import java.util.function.LongFunction;
import io.mappedbuspy.Layout;

/**
 * The arithmetic and the decisions of a rolling bus (docs/files-and-rolling.md, "Rolling bus" and "Retention that holds
 * consumers"), written once for the JVM as pure functions: no file is touched here. Python has the same functions in
 * {@code mappedbus_py/rolling/__init__.py}; {@code tests/vectors/rolling.json} pins both (tests/rolling/test_vectors.py and
 * VectorsTest.java run every case of it), so a change one language makes and the other does not follow fails both.
 *
 * <p>A position names a place across segments: {@code segment * segmentSize + offset}
 * ({@link Layout#joinPosition}). Records never span segments: a segment holds {@link #slotsPerSegment} slots from
 * {@link Layout#FIRST_RECORD_OFFSET} to its {@link #endBoundary}.
 *
 * <pre>
 *  segment k                                          segment k+1
 *  +-------+--------+--------+-----+--------+------+  +-------+--------+----
 *  | limit | slot 0 | slot 1 | ... | slot n-1 | pad |  | limit | slot 0 | ...
 *  +-------+--------+--------+-----+--------+------+  +-------+--------+----
 *  0       8                       endBoundary   segmentSize   k+1 joined at offset 8
 * </pre>
 *
 * <p>The end of segment k is position {@code k * segmentSize + endBoundary}; when records fill a segment to its last
 * byte ({@code endBoundary == segmentSize}) that is also {@code (k + 1) * segmentSize}, which {@link #locate} reads as
 * (k, segmentSize), not (k+1, 0). A Java reader reports the end of a segment as the next segment's first record
 * ({@link #readerPosition}); both name the same place.
 *
 * <p>The directory itself (segments present, a segment's file and limit, bus.meta) is {@link RollingDir}.
 * <p>Internal: not a supported API. Public only for the library's own packages (io.mappedbuspy and the
 * Spark connector); it may change in any release.
 */
public final class RollingLayout {
    /** The hold of {@link #retentionPlan} when no consumer holds any segment (Python: {@code None}). */
    public static final long NO_HOLD = Long.MAX_VALUE;

    private static final long FIRST = Layout.FIRST_RECORD_OFFSET;

    private RollingLayout() {
    }

    /**
     * The offset just past the last record that fits in a segment.
     *
     * @param segmentSize logical size of every segment
     * @param recordSize  payload size of every record
     * @return {@code 8 + slotsPerSegment * slotSize}
     */
    public static long endBoundary(long segmentSize, int recordSize) {
        long slot = Layout.slotSize(recordSize);
        return FIRST + (segmentSize - FIRST) / slot * slot;
    }

    /**
     * How many records one segment holds.
     *
     * @param segmentSize logical size of every segment
     * @param recordSize  payload size of every record
     * @return {@code (segmentSize - 8) / slotSize}
     */
    public static long slotsPerSegment(long segmentSize, int recordSize) {
        return (segmentSize - FIRST) / Layout.slotSize(recordSize);
    }

    /**
     * The segment and offset of a position: the plain split, except that the end of a segment that records fill to
     * its last byte stays in that segment ({@code (k, segmentSize)}, not {@code (k+1, 0)}). Whether the offset is on
     * the record grid is not checked ({@link #onGrid}).
     *
     * @param position    a position, not negative
     * @param segmentSize logical size of every segment
     * @param recordSize  payload size of every record
     * @return its segment and offset there
     */
    public static SegmentOffset locate(long position, long segmentSize, int recordSize) {
        long k = Math.floorDiv(position, segmentSize);
        long off = Math.floorMod(position, segmentSize);
        if (off == 0 && k > 0 && endBoundary(segmentSize, recordSize) == segmentSize) {
            return new SegmentOffset(k - 1, segmentSize);
        }
        return new SegmentOffset(k, off);
    }

    /**
     * Where a position is ({@link #locate}).
     *
     * @param segment the segment index
     * @param offset  the offset in that segment (the segment size for the end of an exactly filled one)
     */
    public record SegmentOffset(long segment, long offset) { }

    /**
     * What a reader lost to retention ({@link #gapRange}).
     *
     * @param from  the first position lost
     * @param to    the position past the last one lost: the first record of the oldest retained segment
     * @param slots the record slots in {@code [from, to)}
     */
    public record Gap(long from, long to, long slots) { }

    /**
     * Whether an offset in a segment is where a record starts or the segment's end boundary.
     *
     * @param offset      offset in a segment
     * @param segmentSize logical size of every segment
     * @param recordSize  payload size of every record
     * @return true when on the record grid and not past {@link #endBoundary}
     */
    public static boolean onGrid(long offset, long segmentSize, int recordSize) {
        return Layout.isRecordBoundary(offset, recordSize) && offset <= endBoundary(segmentSize, recordSize);
    }

    /**
     * The spare trigger of a segment: the offset of its first slot at or past the middle. The writer whose
     * allocation returns it makes the next segment (docs/files-and-rolling.md, "Spare segment").
     *
     * @param segmentSize logical size of every segment
     * @param recordSize  payload size of every record
     * @return {@code 8 + ceil((segmentSize / 2 - 8) / slotSize) * slotSize}
     */
    public static long spareTrigger(long segmentSize, int recordSize) {
        long slot = Layout.slotSize(recordSize);
        long half = segmentSize / 2;
        return FIRST + Math.floorDiv(half - FIRST + slot - 1, slot) * slot;
    }

    /**
     * Whether {@code position} is one a reader can be at: its segment offset ({@link #locate}) on the record grid,
     * the end of an exactly filled segment included.
     *
     * @param position    a position
     * @param segmentSize logical size of every segment
     * @param recordSize  payload size of every record
     * @return true for a record boundary or a segment's end boundary
     */
    public static boolean isPosition(long position, long segmentSize, int recordSize) {
        return position > 0 && onGrid(locate(position, segmentSize, recordSize).offset(), segmentSize, recordSize);
    }

    /**
     * The position a Java reader reports for {@code offset} in {@code segment}: the join, except that a segment's end
     * (an offset with no room for another record: the end boundary, or a limit past it) is the next segment's first
     * record.
     *
     * @param segment     segment index
     * @param offset      a record boundary or a limit in that segment
     * @param segmentSize logical size of every segment
     * @param recordSize  payload size of every record
     * @return the position
     */
    public static long readerPosition(long segment, long offset, long segmentSize, int recordSize) {
        if (offset + Layout.slotSize(recordSize) > segmentSize) {
            return Layout.joinPosition(segment + 1, FIRST, segmentSize);
        }
        return Layout.joinPosition(segment, offset, segmentSize);
    }

    /**
     * What a reader lost when segment {@code fromSegment} was removed before it read past {@code fromOffset}, and
     * the next retained record is the first of segment {@code oldest}.
     *
     * @param fromSegment the removed segment the reader was in (or waited for)
     * @param fromOffset  its offset there
     * @param oldest      the oldest retained segment
     * @param segmentSize logical size of every segment
     * @param recordSize  payload size of every record
     * @return the positions lost and the record slots in them
     */
    public static Gap gapRange(long fromSegment, long fromOffset, long oldest, long segmentSize, int recordSize) {
        long slot = Layout.slotSize(recordSize);
        long per = slotsPerSegment(segmentSize, recordSize);
        long first = Math.max(0, Math.floorDiv(fromOffset - FIRST, slot));
        long lost = Math.max(0, per - first) + (oldest - fromSegment - 1) * per;
        return new Gap(Layout.joinPosition(fromSegment, fromOffset, segmentSize),
                Layout.joinPosition(oldest, FIRST, segmentSize), lost);
    }

    /**
     * Record slots from {@code position} to the end of the bus (segment {@code headSegment}, whose limit is
     * {@code headLimit}): a consumer's lag in records; 0 for a position past the head.
     *
     * @param position    a record boundary or a segment's end
     * @param headSegment the newest segment with records
     * @param headLimit   its limit
     * @param segmentSize logical size of every segment
     * @param recordSize  payload size of every record
     * @return the record slots between them
     */
    public static long recordsBetween(long position, long headSegment, long headLimit, long segmentSize,
                                      int recordSize) {
        long slot = Layout.slotSize(recordSize);
        long end = endBoundary(segmentSize, recordSize);
        SegmentOffset at = locate(position, segmentSize, recordSize);
        long head = Math.min(Math.max(headLimit, FIRST), end);
        if (at.segment() > headSegment) {
            return 0;
        }
        if (at.segment() == headSegment) {
            return Math.max(0, Math.floorDiv(head - at.offset(), slot));
        }
        return Math.max(0, Math.floorDiv(end - at.offset(), slot))
                + (headSegment - at.segment() - 1) * slotsPerSegment(segmentSize, recordSize) + (head - FIRST) / slot;
    }

    /**
     * The segment a consumer at {@code position} needs next: its own, or the one after when it has read all of it
     * (its offset is at the end boundary).
     *
     * @param position    the consumer's committed position
     * @param segmentSize logical size of every segment
     * @param recordSize  payload size of every record
     * @return a segment index
     */
    public static long consumerSegment(long position, long segmentSize, int recordSize) {
        SegmentOffset at = locate(position, segmentSize, recordSize);
        return at.offset() >= endBoundary(segmentSize, recordSize) ? at.segment() + 1 : at.segment();
    }

    /**
     * Whether a bus's retention removes anything: a limit of segments, bytes or age is set.
     *
     * @param meta the bus's metadata
     * @return true if any limit is set
     */
    public static boolean retains(BusMeta meta) {
        return meta.retention().removesAny();
    }

    /**
     * Which segments retention removes, oldest first: the decision alone. History is the segments present below
     * {@code min(keepFrom, newest + 1)}; from its oldest, a segment goes while more than {@code retain_segments} (or
     * more than {@code retain_bytes} worth of segments) are left, or while it became full more than
     * {@code retain_age_ms} before {@code nowMs}. A segment whose time is unknown, or one at or above
     * {@code holdFrom}, stops it.
     *
     * @param segments the segments present, ascending
     * @param meta     the bus's retention (and segment size)
     * @param newest   the newest segment (the one just created)
     * @param keepFrom the segment being written: it and those above are not history
     * @param nowMs    now, Unix milliseconds
     * @param fullMs   when the writers rolled out of a segment (its modification time, Unix milliseconds), or null
     *                 if unknown (removed meanwhile)
     * @param holdFrom the oldest segment a consumer needs, or {@link #NO_HOLD}
     * @return the segments to remove, ascending
     */
    public static long[] retentionPlan(long[] segments, BusMeta meta, long newest, long keepFrom, long nowMs,
                                       LongFunction<Long> fullMs, long holdFrom) {
        if (!retains(meta)) {
            return new long[0];
        }
        long rs = meta.retainSegments();
        long rb = meta.retainBytes();
        long age = meta.retainAgeMs();
        long below = Math.min(keepFrom, newest + 1);
        int n = 0;
        while (n < segments.length && segments[n] < below) {
            n++;
        }
        int removed = 0;
        for (; removed < n; removed++) {
            long oldest = segments[removed];
            if (oldest >= holdFrom) {
                break;
            }
            long count = n - removed;
            boolean drop = (rs > 0 && count > rs) || (rb > 0 && count * meta.segmentSize() > rb);
            if (!drop && age > 0) {
                Long full = fullMs.apply(oldest);
                drop = full != null && nowMs - full > age;
            }
            if (!drop) {
                break;
            }
        }
        return Arrays.copyOf(segments, removed);
    }
}
