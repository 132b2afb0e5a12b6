package io.mappedbuspy;

import io.mappedbuspy.testing.Test;

import static io.mappedbuspy.testing.Assert.assertContains;
import static io.mappedbuspy.testing.Assert.assertEquals;
import static io.mappedbuspy.testing.Assert.assertFalse;
import static io.mappedbuspy.testing.Assert.assertTrue;

/** The layout constants and helpers. */
public final class LayoutTest {
    /** Constants have the values of the 0.5.1 format. */
    @Test
    public void constantsMatchTheWireFormat() {
        assertEquals("LIMIT_OFFSET", 0, Layout.LIMIT_OFFSET);
        assertEquals("FIRST_RECORD_OFFSET", 8, Layout.FIRST_RECORD_OFFSET);
        assertEquals("STATUS_OFFSET", 0, Layout.STATUS_OFFSET);
        assertEquals("METADATA_OFFSET", 4, Layout.METADATA_OFFSET);
        assertEquals("PAYLOAD_OFFSET", 8, Layout.PAYLOAD_OFFSET);
        assertEquals("HEADER_SIZE", 8, Layout.HEADER_SIZE);
        assertEquals("STATUS_NOT_SET", 0, Layout.STATUS_NOT_SET);
        assertEquals("STATUS_COMMITTED", 1, Layout.STATUS_COMMITTED);
        assertEquals("STATUS_ROLLED_BACK", 2, Layout.STATUS_ROLLED_BACK);
        assertEquals("PAGE_SIZE", 4096, Layout.PAGE_SIZE);
        assertEquals("DEFAULT_TIMEOUT_MS", 2000, Layout.DEFAULT_TIMEOUT_MS);
    }

    /** Slot, record offset and mapping size arithmetic. */
    @Test
    public void helpersComputeOffsetsAndRoundUpToPages() {
        assertEquals("slot", 20, Layout.slotSize(12));
        assertEquals("record 0", 8, Layout.recordOffset(0, 12));
        assertEquals("record 3", 68, Layout.recordOffset(3, 12));
        assertEquals("record far", 8 + 200_000_000L * 108, Layout.recordOffset(200_000_000L, 100));
        assertEquals("80", 4096, Layout.mappedSize(80));
        assertEquals("4096", 4096, Layout.mappedSize(4096));
        assertEquals("4097", 8192, Layout.mappedSize(4097));
        assertEquals("2000000", 2002944, Layout.mappedSize(2_000_000));
        assertTrue("8 is a boundary", Layout.isRecordBoundary(8, 10));
        assertTrue("26 is a boundary", Layout.isRecordBoundary(26, 10));
        assertFalse("0 is not", Layout.isRecordBoundary(0, 10));
        assertFalse("27 is not", Layout.isRecordBoundary(27, 10));
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
        assertEquals("lines", 19, d.split("\n").length);
    }
}
