package io.mappedbuspy;

import java.util.SplittableRandom;
import java.util.stream.Stream;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The record grid and file names over generated cases (each case a seed, see {@link Seeds}): the
 * arithmetic every process must agree on, for record sizes and positions far beyond what the example
 * tests in {@link LayoutTest} pick.
 */
public final class LayoutPropertiesTest {
    static Stream<String> seeds() {
        return Seeds.seeds();
    }

    /** Small sizes (1..64, most of them unaligned) most of the time, sometimes up to 1 MiB. */
    private static int recordSize(SplittableRandom r) {
        return r.nextInt(4) == 0 ? r.nextInt(1, 1 << 20) : r.nextInt(1, 65);
    }

    /** Record k sits at 8 + k * (8 + recordSize); it and only it is a boundary in its slot. */
    @ParameterizedTest(name = "seed={0}")
    @MethodSource("seeds")
    public void recordOffsetsAreTheOnlyBoundariesOfTheGrid(String seed) {
        SplittableRandom r = Seeds.random(seed);
        int rs = recordSize(r);
        long slot = 8L + rs;
        long k = r.nextInt(3) == 0 ? r.nextLong(0, 64) : r.nextLong(0, 1L << 40);
        long off = Layout.recordOffset(k, rs);
        assertEquals(Math.addExact(8, Math.multiplyExact(k, slot)), off, "offset of record " + k);
        assertEquals(slot, Layout.slotSize(rs), "slot size");
        assertEquals(off + slot, Layout.recordOffset(k + 1, rs), "the next record follows without a gap");
        assertTrue(Layout.isRecordBoundary(off, rs), "record " + k + " at " + off + " is a boundary");
        long inside = off + r.nextLong(1, slot);
        assertFalse(Layout.isRecordBoundary(inside, rs), inside + " lies inside record " + k);
        assertFalse(Layout.isRecordBoundary(off + 1, rs), "one past a record start");
        assertFalse(Layout.isRecordBoundary(off + slot - 1, rs), "the last byte of a record");
        // Nothing before the first record is a boundary: the limit field, negative offsets.
        long before = r.nextBoolean() ? r.nextLong(0, Layout.FIRST_RECORD_OFFSET) : -r.nextLong(1, 1L << 40);
        assertFalse(Layout.isRecordBoundary(before, rs), before + " is before the first record");
        // Any offset at or after 8 is a boundary exactly when it is the start of the record it falls in.
        long x = r.nextLong(Layout.FIRST_RECORD_OFFSET, 1L << 50);
        long containing = (x - Layout.FIRST_RECORD_OFFSET) / slot;
        assertEquals(x == Layout.recordOffset(containing, rs), Layout.isRecordBoundary(x, rs),
                "offset " + x + " for recordSize " + rs);
    }

    /** The mapping is the logical size rounded up to whole pages, never less, never a page more. */
    @ParameterizedTest(name = "seed={0}")
    @MethodSource("seeds")
    public void mappedSizeIsTheSmallestPageMultipleHoldingTheFile(String seed) {
        SplittableRandom r = Seeds.random(seed);
        long fileSize = r.nextBoolean() ? r.nextLong(0, 3 * Layout.PAGE_SIZE) : r.nextLong(0, 1L << 50);
        long m = Layout.mappedSize(fileSize);
        assertEquals(0, m % Layout.PAGE_SIZE, "whole pages for " + fileSize);
        assertTrue(m >= fileSize && m - fileSize < Layout.PAGE_SIZE, fileSize + " -> " + m);
        assertEquals(m, Layout.mappedSize(m), "a page multiple maps to itself");
        assertTrue(Layout.mappedSize(fileSize + 1) >= m, "monotonic");
    }

    /** A segment's name gives back its index, and names sort as their indices do (directory order). */
    @ParameterizedTest(name = "seed={0}")
    @MethodSource("seeds")
    public void segmentNamesRoundTripAndSortByIndex(String seed) {
        SplittableRandom r = Seeds.random(seed);
        long a = index(r);
        long b = index(r);
        String na = Layout.segmentName(a);
        String nb = Layout.segmentName(b);
        assertEquals(Layout.SEGMENT_DIGITS + Layout.SEGMENT_SUFFIX.length(), na.length(), na);
        assertEquals(a, Layout.segmentIndex(na), na);
        assertEquals(b, Layout.segmentIndex(nb), nb);
        assertEquals(Long.signum(Long.compare(a, b)), Integer.signum(na.compareTo(nb)), na + " vs " + nb);
    }

    /** Any damage to a segment name makes it "not a segment" (-1), never another index. */
    @ParameterizedTest(name = "seed={0}")
    @MethodSource("seeds")
    public void damagedSegmentNamesAreNotSegments(String seed) {
        SplittableRandom r = Seeds.random(seed);
        String name = Layout.segmentName(index(r));
        StringBuilder bad = new StringBuilder(name);
        int i = r.nextInt(name.length());
        switch (r.nextInt(5)) {
            case 0: // a digit replaced by something else
                i = r.nextInt(Layout.SEGMENT_DIGITS);
                String others = "x-+ ./\u0660aZ";
                bad.setCharAt(i, others.charAt(r.nextInt(others.length())));
                break;
            case 1: // a character dropped
                bad.deleteCharAt(i);
                break;
            case 2: // a digit added
                bad.insert(r.nextInt(Layout.SEGMENT_DIGITS + 1), (char) ('0' + r.nextInt(10)));
                break;
            case 3: // another suffix, same length
                bad.replace(Layout.SEGMENT_DIGITS, name.length(), r.nextBoolean() ? ".tmp" : ".BUS");
                break;
            default: // a prefix (a temporary file's)
                bad.insert(0, Layout.TMP_PREFIX);
        }
        assertEquals(-1, Layout.segmentIndex(bad.toString()), "'" + bad + "' from " + name);
    }

    /** 20 digits hold numbers a long cannot: they are not segments either; negative indices have no name. */
    @Test
    public void segmentIndicesOutsideALongAreRefused() {
        assertEquals(Long.MAX_VALUE, Layout.segmentIndex(Layout.segmentName(Long.MAX_VALUE)));
        assertEquals(-1, Layout.segmentIndex("09223372036854775808.bus"), "Long.MAX_VALUE + 1");
        assertEquals(-1, Layout.segmentIndex("99999999999999999999.bus"));
        assertThrows(IllegalArgumentException.class, () -> Layout.segmentName(-1));
    }

    private static long index(SplittableRandom r) {
        switch (r.nextInt(3)) {
            case 0:
                return r.nextLong(0, 1000);
            case 1:
                return r.nextLong(0, Long.MAX_VALUE);
            default:
                return Long.MAX_VALUE - r.nextLong(0, 1000);
        }
    }
}
