package io.mappedbuspy;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.attribute.PosixFilePermissions;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import static io.mappedbuspy.Buses.assertContains;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import io.mappedbuspy.internal.BusMeta;
import io.mappedbuspy.internal.MemoryMappedFile;

/**
 * Issue 26, one rule everywhere: sizes left out come from the bus's metadata ({@code PATH.meta},
 * {@code DIR/bus.meta}); a bus without any (the Java original's, or one not made yet) needs both, and a size
 * given that disagrees with the metadata is a {@link BusMismatchException} naming both.
 */
public class SizesFromMetadataTest {
    private static final long FILE = 100_000;
    private static final int REC = 12;
    private static final long SEG = 4096;

    /** Scratch directory, new for each test. */
    @TempDir
    Path tmp;

    private static byte[] rec(int i) {
        return ByteBuffer.allocate(REC).order(ByteOrder.LITTLE_ENDIAN).putInt(i).putLong(-i).array();
    }

    private static byte[] readOne(MappedBusReader r) throws Exception {
        assertTrue(Buses.await(r, 5_000), "a record");
        byte[] b = new byte[REC];
        assertEquals(REC, r.readBuffer(b, 0));
        return b;
    }

    private static byte[] readOne(RollingBusReader r) throws Exception {
        long end = System.nanoTime() + 5_000_000_000L;
        while (!r.next()) {
            assertTrue(System.nanoTime() < end, "a record");
            Thread.onSpinWait();
        }
        byte[] b = new byte[REC];
        assertEquals(REC, r.readBuffer(b, 0));
        return b;
    }

    /** What the Java original leaves: a bus file with its limit set and no metadata. */
    private static void javaOriginalFile(String path) throws Exception {
        try (MemoryMappedFile mem = new MemoryMappedFile(path, FILE)) {
            mem.compareAndSetLong(Layout.LIMIT_OFFSET, 0, Layout.FIRST_RECORD_OFFSET);
        }
    }

    private static void assertNeedsBothSizes(IllegalArgumentException e, String path, String why) {
        assertContains(e.getMessage(), path + ": no sizes given");
        assertContains(e.getMessage(), why);
        assertContains(e.getMessage(), "needs both sizes");
    }

    /** MappedBusWriter(path) and MappedBusReader(path[, readOnly]) open a bus of this project with its sizes. */
    @Test
    public void singleFileBusTakesItsSizesFromItsMetadata() throws Exception {
        String path = tmp.resolve("a.bus").toString();
        try (MappedBusWriter w = new MappedBusWriter(path, FILE, REC).open()) {
            assertTrue(w.write(rec(1), 0, REC));
        }
        MappedBusWriter w = new MappedBusWriter(path);
        assertEquals(FILE, w.fileSize());
        assertEquals(REC, w.recordSize());
        try (MappedBusWriter open = w.open()) {
            assertTrue(open.write(rec(2), 0, REC));
        }
        try (MappedBusReader r = new MappedBusReader(path).open();
             MappedBusReader ro = new MappedBusReader(path, true).open()) {
            assertEquals(FILE, r.fileSize());
            assertEquals(REC, r.recordSize());
            assertFalse(r.isReadOnly());
            assertTrue(ro.isReadOnly());
            assertEquals(ro.busId(), r.busId());
            for (MappedBusReader x : new MappedBusReader[] {r, ro}) {
                assertArrayEquals(rec(1), readOne(x));
                assertArrayEquals(rec(2), readOne(x));
                assertFalse(x.next());
            }
        }
    }

    /**
     * Issue 33: a file without metadata opened with the wrong record size is refused at open, before any record is
     * read or written (as the Python side). Records of 16 bytes (24-byte slots) opened as 4-byte ones (12-byte
     * slots): the limit, 8 + 24 n, is on both grids, so only the statuses tell.
     */
    @Test
    public void wrongRecordSizeWithoutMetadataIsRefusedAtOpen() throws Exception {
        String path = tmp.resolve("original16.bus").toString();
        byte[] payload = new byte[16];
        try (MappedBusWriter w = new MappedBusWriter(path, FILE, 16).open()) {
            for (int i = 0; i < 10; i++) {
                byte[] b = String.format("record %08d", i).getBytes(java.nio.charset.StandardCharsets.US_ASCII);
                System.arraycopy(b, 0, payload, 0, 15);
                assertTrue(w.write(payload, 0, 16));
            }
        }
        Files.delete(BusMeta.metaPath(path)); // as the Java original leaves it
        long limit;
        try (MemoryMappedFile m = new MemoryMappedFile(path, FILE, true)) {
            limit = m.getLongAcquire(Layout.LIMIT_OFFSET);
        }
        CorruptBusException e = assertThrows(CorruptBusException.class,
                () -> new MappedBusReader(path, FILE, 4).open());
        assertContains(e.getMessage(), "another recordSize");
        e = assertThrows(CorruptBusException.class, () -> new MappedBusWriter(path, FILE, 4).open());
        assertContains(e.getMessage(), "another recordSize");
        try (MemoryMappedFile m = new MemoryMappedFile(path, FILE, true)) {
            assertEquals(limit, m.getLongAcquire(Layout.LIMIT_OFFSET), "the refused writer reserved nothing");
        }
        try (MappedBusReader r = new MappedBusReader(path, FILE, 16).open()) { // the right one reads them all
            int n = 0;
            while (r.next()) {
                n++;
            }
            assertEquals(10, n);
        }
    }

    /**
     * A file without metadata (the Java original's), or a path with no file yet, needs both sizes: the message
     * names the path and says so, and nothing is created.
     */
    @Test
    public void singleFileWithoutMetadataNeedsBothSizes() throws Exception {
        String path = tmp.resolve("original.bus").toString();
        javaOriginalFile(path);
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> new MappedBusReader(path));
        assertNeedsBothSizes(e, path, "no metadata file (" + path + Layout.META_SUFFIX + ")");
        assertContains(e.getMessage(), "Java original");
        assertContains(e.getMessage(), "new MappedBusReader(path, fileSize, recordSize)");
        e = assertThrows(IllegalArgumentException.class, () -> new MappedBusWriter(path));
        assertContains(e.getMessage(), "new MappedBusWriter(path, fileSize, recordSize)");
        assertThrows(IllegalArgumentException.class, () -> new MappedBusReader(path, true));
        try (MappedBusReader r = new MappedBusReader(path, FILE, REC).open()) { // both sizes: still opens
            assertFalse(r.next());
        }

        String none = tmp.resolve("none.bus").toString();
        e = assertThrows(IllegalArgumentException.class, () -> new MappedBusWriter(none));
        assertNeedsBothSizes(e, none, "does not exist");
        assertFalse(Files.exists(Path.of(none)));
        assertFalse(Files.exists(BusMeta.metaPath(none)));
    }

    /**
     * Metadata that does not describe this file gives no sizes: a stale PATH.meta left by a bus deleted since
     * (another inode), or one of a rolling bus.
     */
    @Test
    public void metadataOfAnotherFileOrKindGivesNoSizes() throws Exception {
        String path = tmp.resolve("b.bus").toString();
        new MappedBusWriter(path, FILE, REC).open().close();
        // The Java original's file replaces the bus (made before the old one goes: another inode for sure).
        String other = tmp.resolve("other.bus").toString();
        javaOriginalFile(other);
        Files.move(Path.of(other), Path.of(path), StandardCopyOption.REPLACE_EXISTING,
                StandardCopyOption.ATOMIC_MOVE);
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> new MappedBusReader(path));
        assertNeedsBothSizes(e, path, "describes another file");
        assertThrows(IllegalArgumentException.class, () -> new MappedBusWriter(path));

        BusMeta.rolling(REC, SEG, Retention.NONE).write(BusMeta.metaPath(path), "rw-------", false);
        e = assertThrows(IllegalArgumentException.class, () -> new MappedBusWriter(path));
        assertNeedsBothSizes(e, path, "describes a rolling bus");
    }

    /** A link or something else than a regular file is refused as open() refuses it, not taken for "no metadata". */
    @Test
    public void linkIsRefusedAsOpenRefusesIt() throws Exception {
        String target = tmp.resolve("t.bus").toString();
        new MappedBusWriter(target, FILE, REC).open().close();
        String link = tmp.resolve("link.bus").toString();
        Files.createSymbolicLink(Path.of(link), Path.of(target));
        UnsafeBusFileException e = assertThrows(UnsafeBusFileException.class, () -> new MappedBusReader(link));
        assertContains(e.getMessage(), "symbolic link");
        assertThrows(UnsafeBusFileException.class, () -> new MappedBusWriter(tmp.toString()));
    }

    /**
     * The constructor takes only the sizes; open() checks the files' owner and mode with the object's own
     * allowForeign: metadata writable by others opens only with setAllowForeign(true).
     */
    @Test
    public void trustIsCheckedByOpen() throws Exception {
        String path = tmp.resolve("shared.bus").toString();
        new MappedBusWriter(path, FILE, REC).open().close();
        Files.setPosixFilePermissions(BusMeta.metaPath(path), PosixFilePermissions.fromString("rw-rw-rw-"));
        UnsafeBusFileException e = assertThrows(UnsafeBusFileException.class, () -> new MappedBusReader(path).open());
        assertContains(e.getMessage(), "writable by group or others");
        try (MappedBusReader r = new MappedBusReader(path).setAllowForeign(true).open()) {
            assertEquals(REC, r.recordSize());
        }
    }

    /** Sizes given that disagree with the metadata still fail at open(), naming both. */
    @Test
    public void givenSizesThatDisagreeNameBoth() throws Exception {
        String path = tmp.resolve("c.bus").toString();
        new MappedBusWriter(path, FILE, REC).open().close();
        BusMismatchException e = assertThrows(BusMismatchException.class,
                () -> new MappedBusReader(path, FILE, 16).open());
        assertContains(e.getMessage(), path + " was created with recordSize 12, not 16");
        e = assertThrows(BusMismatchException.class, () -> new MappedBusWriter(path, 2 * FILE, REC).open());
        assertContains(e.getMessage(), path + " was created with fileSize 100000, not 200000");

        String dir = tmp.resolve("rolling").toString();
        new RollingBusWriter(dir, SEG, REC).open().close();
        e = assertThrows(BusMismatchException.class, () -> new RollingBusReader(dir, SEG, 16).open());
        assertContains(e.getMessage(), dir + " was created with recordSize 12, not 16");
        e = assertThrows(BusMismatchException.class, () -> new RollingBusWriter(dir, 2 * SEG, REC).open());
        assertContains(e.getMessage(), dir + " was created with segmentSize 4096, not 8192");
    }

    /** RollingBusWriter(dir) and RollingBusReader(dir[, readOnly]) open a rolling bus with its bus.meta's sizes. */
    @Test
    public void rollingBusTakesItsSizesFromBusMeta() throws Exception {
        String dir = tmp.resolve("r").toString();
        try (RollingBusWriter w = new RollingBusWriter(dir, SEG, REC).open()) {
            assertTrue(w.write(rec(1), 0, REC));
        }
        RollingBusWriter w = new RollingBusWriter(dir);
        assertEquals(SEG, w.segmentSize());
        assertEquals(REC, w.recordSize());
        try (RollingBusWriter open = w.open()) {
            assertTrue(open.write(rec(2), 0, REC));
        }
        try (RollingBusReader r = new RollingBusReader(dir).open();
             RollingBusReader ro = new RollingBusReader(dir, true).open()) {
            assertEquals(SEG, r.segmentSize());
            assertEquals(REC, r.recordSize());
            assertEquals(SEG, ro.segmentSize());
            assertEquals(REC, ro.recordSize());
            for (RollingBusReader x : new RollingBusReader[] {r, ro}) {
                assertArrayEquals(rec(1), readOne(x));
                assertArrayEquals(rec(2), readOne(x));
                assertFalse(x.next());
            }
        }
    }

    /**
     * No rolling bus here (no directory, no bus.meta, or a bus.meta of a single-file bus named "bus"): both
     * sizes are needed, and nothing is created.
     */
    @Test
    public void rollingBusWithoutBusMetaNeedsBothSizes() throws Exception {
        String none = tmp.resolve("none").toString();
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> new RollingBusWriter(none));
        assertNeedsBothSizes(e, none, "no rolling bus here");
        assertContains(e.getMessage(), "new RollingBusWriter(dir, segmentSize, recordSize)");
        assertFalse(Files.exists(Path.of(none)));

        Path empty = Files.createDirectory(tmp.resolve("empty"));
        e = assertThrows(IllegalArgumentException.class, () -> new RollingBusReader(empty.toString()));
        assertNeedsBothSizes(e, empty.toString(), "(no " + empty.resolve(Layout.META_FILE) + ")");
        assertContains(e.getMessage(), "new RollingBusReader(dir, segmentSize, recordSize)");
        assertThrows(IllegalArgumentException.class, () -> new RollingBusReader(empty.toString(), true));

        // A single-file bus named "bus" has its metadata at DIR/bus.meta: not a rolling bus's.
        Path single = Files.createDirectory(tmp.resolve("single"));
        new MappedBusWriter(single.resolve("bus").toString(), FILE, REC).open().close();
        e = assertThrows(IllegalArgumentException.class, () -> new RollingBusWriter(single.toString()));
        assertNeedsBothSizes(e, single.toString(), "describes a single-file bus, not a rolling one");
        // With sizes, the check of open() stays a mismatch.
        assertThrows(BusMismatchException.class, () -> new RollingBusReader(single.toString(), SEG, REC).open());

        // A regular file in place of the directory: refused as open() refuses it.
        String file = tmp.resolve("file").toString();
        Files.write(Path.of(file), new byte[1]);
        assertThrows(UnsafeBusFileException.class, () -> new RollingBusReader(file));
    }
}
