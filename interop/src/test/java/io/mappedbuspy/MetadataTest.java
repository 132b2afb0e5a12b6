package io.mappedbuspy;

import io.mappedbuspy.messages.PriceUpdate;

import java.nio.file.Files;
import java.nio.file.Path;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import static io.mappedbuspy.Buses.assertContains;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import io.mappedbuspy.internal.BusMeta;

/** A single-file bus's metadata (PATH.meta): sizes on record, checked by everyone; an id per bus. */
public class MetadataTest {
    /** Scratch directory, new for each test. */
    @TempDir
    Path tmp;

    /** The first writer records its sizes, the file's inode and a fresh id; reader and writer report that id. */
    @Test
    public void firstWriterRecordsSizesInodeAndId() throws Exception {
        String path = tmp.resolve("a.bus").toString();
        try (MappedBusWriter w = new MappedBusWriter(path, 100_000, 12).open();
             MappedBusReader r = new MappedBusReader(path, 100_000, 12).open()) {
            BusMeta m = BusMeta.read(BusMeta.metaPath(path), false);
            assertNotNull(m);
            assertEquals(BusKind.SINGLE, m.kind());
            assertEquals(12, m.recordSize());
            assertEquals(100_000, m.fileSize());
            assertEquals(((Number) Files.getAttribute(Path.of(path), "unix:ino")).longValue(), m.inode());
            assertEquals(m.id(), w.busId());
            assertEquals(m.id(), r.busId());
        }
    }

    /**
     * A reader with another record size is refused before it writes anything: it can no longer take a committed
     * record's type for a status and "roll it back" (the reported bug). Nor can another writer or file size.
     */
    @Test
    public void otherSizesAreRefusedBeforeAnythingIsWritten() throws Exception {
        String path = tmp.resolve("b.bus").toString();
        try (MappedBusWriter w = new MappedBusWriter(path, 100_000, 12).open()) {
            w.write(new PriceUpdate(1, 2, 3));
        }
        byte[] before = Buses.bytes(path);
        BusMismatchException e = assertThrows(BusMismatchException.class,
                () -> new MappedBusReader(path, 100_000, 16).open());
        assertContains(e.getMessage(), "recordSize 12, not 16");
        assertThrows(BusMismatchException.class, () -> new MappedBusWriter(path, 100_000, 16).open());
        assertThrows(BusMismatchException.class, () -> new MappedBusReader(path, 200_000, 12).open());
        assertThrows(BusMismatchException.class, () -> new MappedBusWriter(path, 50_000, 12).open());
        assertArrayEquals(before, Buses.bytes(path));
    }

    /** A bus deleted and recreated under the same path has another id; a file without metadata has none. */
    @Test
    public void recreatedBusHasANewIdAndAFileWithoutMetadataHasNone() throws Exception {
        String path = tmp.resolve("c.bus").toString();
        String first;
        try (MappedBusWriter w = new MappedBusWriter(path, 100_000, 12).open()) {
            first = w.busId();
        }
        Files.delete(Path.of(path));
        String second;
        try (MappedBusWriter w = new MappedBusWriter(path, 100_000, 12).open()) {
            second = w.busId();
            w.write(new PriceUpdate(4, 5, 6));
        }
        assertNotNull(first);
        assertNotEquals(first, second);
        // What the Java original leaves: a bus file and no metadata (here: metadata removed).
        Files.delete(BusMeta.metaPath(path));
        try (MappedBusReader r = new MappedBusReader(path, 100_000, 12).open()) {
            assertNull(r.busId());
            assertTrue(r.next());
        }
    }

    /** Python writes the metadata Java reads, and the other way round: one format. */
    @Test
    public void metadataRoundTripsThroughItsText() throws Exception {
        BusMeta m = BusMeta.rolling(12, 1 << 20, new Retention(4, 0, 60_000));
        BusMeta back = BusMeta.decode(m.encode(), "mem");
        assertEquals(m, back);
        assertEquals(4, back.retainSegments());
        assertEquals(60_000, back.retainAgeMs());
        CorruptBusException bad = assertThrows(CorruptBusException.class,
                () -> BusMeta.decode("# mappedbus bus metadata\nformat=1\nkind=single\n".getBytes(), "x.meta"));
        assertContains(bad.getMessage(), "x.meta");
    }
}
