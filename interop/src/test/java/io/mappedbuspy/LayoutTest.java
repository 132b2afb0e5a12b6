package io.mappedbuspy;

import org.junit.jupiter.api.Test;

import static io.mappedbuspy.Buses.assertContains;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The layout constants and helpers. */
public final class LayoutTest {
    /** Constants have the values of the 0.5.1 format. */
    @Test
    public void constantsMatchTheWireFormat() {
        assertEquals(0, Layout.LIMIT_OFFSET, "LIMIT_OFFSET");
        assertEquals(8, Layout.FIRST_RECORD_OFFSET, "FIRST_RECORD_OFFSET");
        assertEquals(0, Layout.STATUS_OFFSET, "STATUS_OFFSET");
        assertEquals(4, Layout.METADATA_OFFSET, "METADATA_OFFSET");
        assertEquals(8, Layout.PAYLOAD_OFFSET, "PAYLOAD_OFFSET");
        assertEquals(8, Layout.HEADER_SIZE, "HEADER_SIZE");
        assertEquals(0, Layout.STATUS_NOT_SET, "STATUS_NOT_SET");
        assertEquals(1, Layout.STATUS_COMMITTED, "STATUS_COMMITTED");
        assertEquals(2, Layout.STATUS_ROLLED_BACK, "STATUS_ROLLED_BACK");
        assertEquals(4096, Layout.PAGE_SIZE, "PAGE_SIZE");
        assertEquals(2000, Layout.DEFAULT_TIMEOUT_MS, "DEFAULT_TIMEOUT_MS");
    }

    /** Slot, record offset and mapping size arithmetic. */
    @Test
    public void helpersComputeOffsetsAndRoundUpToPages() {
        assertEquals(20, Layout.slotSize(12), "slot");
        assertEquals(8, Layout.recordOffset(0, 12), "record 0");
        assertEquals(68, Layout.recordOffset(3, 12), "record 3");
        assertEquals(8 + 200_000_000L * 108, Layout.recordOffset(200_000_000L, 100), "record far");
        assertEquals(4096, Layout.mappedSize(80), "80");
        assertEquals(4096, Layout.mappedSize(4096), "4096");
        assertEquals(8192, Layout.mappedSize(4097), "4097");
        assertEquals(2002944, Layout.mappedSize(2_000_000), "2000000");
        assertTrue(Layout.isRecordBoundary(8, 10), "8 is a boundary");
        assertTrue(Layout.isRecordBoundary(26, 10), "26 is a boundary");
        assertFalse(Layout.isRecordBoundary(0, 10), "0 is not");
        assertFalse(Layout.isRecordBoundary(27, 10), "27 is not");
    }

    /** describe() prints NAME=value for every constant, the file-name ones included. */
    @Test
    public void describeListsEveryConstant() {
        String d = Layout.describe();
        assertContains(d, "LIMIT_OFFSET=0\n");
        assertContains(d, "FIRST_RECORD_OFFSET=8\n");
        assertContains(d, "DEFAULT_TIMEOUT_MS=2000\n");
        assertContains(d, "META_MAGIC=# mappedbus bus metadata\n");
        assertContains(d, "SEGMENT_SUFFIX=.bus\n");
        assertContains(d, "SEGMENT_CLAIM_BASE=1099511627776\n");
        assertContains(d, "TIME_INDEX_MAGIC=" + 0x315849545355424DL + "\n"); // "MBUSTIX1"
        assertContains(d, "ARCHIVE_SUFFIX_ZSTD=.zst\n");
        assertEquals(188 + 23, d.split("\n").length,
                "lines (188 with the frames' constants and GROUP_ENTRY_SLOTS_OFFSET; 23: the journal's)");
    }
}
