package io.mappedbuspy;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

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
        assertEquals(188 + 30 + 4, d.split("\n").length,
                "lines (188 with the frames' constants and GROUP_ENTRY_SLOTS_OFFSET; 23: the journal's; 4: the archiver's"
                + " polls and early fill)");
    }

    /** A single-file bus's side files are PATH + each side suffix; a rolling bus's are DIR/each side file. */
    @Test
    public void sideFilesNameEveryFileBesideABus(@TempDir Path tmp) throws Exception {
        String bus = tmp.resolve("bus").toString();
        assertEquals(List.of(bus + ".meta", bus + ".wake", bus + ".consumers", bus + ".writers", bus + ".commits",
                bus + ".groups", bus + ".topics"), Layout.sideFiles(bus));
        Path dir = Files.createDirectory(tmp.resolve("rolling"));
        List<String> want = new ArrayList<>();
        for (String n : new String[] {"bus.meta", "bus.wake", "bus.consumers", "bus.writers", "bus.commits", "groups",
                "index", "topics"}) {
            want.add(dir.resolve(n.equals("topics") ? "bus.topics" : n).toString());
        }
        assertEquals(want, Layout.sideFiles(dir.toString()));
    }

    /**
     * removeBus leaves nothing of a bus a writer and a work group used (its writers file among the rest), removes
     * a link inside without following it, and takes a rolling bus's whole directory; a missing bus is fine.
     */
    @Test
    public void removeBusLeavesNothingBehind(@TempDir Path tmp) throws Exception {
        Path outside = Files.writeString(tmp.resolve("outside"), "kept");
        Path busDir = Files.createDirectory(tmp.resolve("b"));
        String bus = busDir.resolve("bus").toString();
        try (MappedBusWriter w = new MappedBusWriter(bus, 1 << 16, 8).open()) {
            w.write(new byte[8], 0, 8);
        }
        try (GroupReader g = new GroupReader(bus, "g").open()) {
            assertTrue(g.next(), "the record, to the group");
            g.ack();
        }
        Files.createSymbolicLink(Path.of(bus + Layout.GROUP_DIR_SUFFIX, "link"), outside);
        assertTrue(names(busDir).contains("bus.writers"), "a writer leaves its writers file: " + names(busDir));
        Layout.removeBus(bus);
        assertEquals(List.of(), names(busDir));
        assertEquals("kept", Files.readString(outside), "a link is removed, never followed");
        Layout.removeBus(bus);   // nothing there: fine

        String dir = tmp.resolve("r").toString();
        try (RollingBusWriter w = new RollingBusWriter(dir, 1 << 16, 8).open()) {
            w.write(new byte[8], 0, 8);
        }
        Layout.removeBus(dir);
        assertFalse(Files.exists(Path.of(dir)), dir + " removed");
        assertEquals(List.of("b", "outside"), names(tmp));
    }

    private static List<String> names(Path dir) throws Exception {
        try (Stream<Path> s = Files.list(dir)) {
            return s.map(p -> p.getFileName().toString()).sorted().toList();
        }
    }
}
