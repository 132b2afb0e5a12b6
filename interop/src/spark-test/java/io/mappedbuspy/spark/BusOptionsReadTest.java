package io.mappedbuspy.spark;

import io.mappedbuspy.MappedBusWriter;
import io.mappedbuspy.RollingBusWriter;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The batch-read options of issue 15: position bounds, per-host reads, several buses, exactlyOnce. */
public final class BusOptionsReadTest {
    @TempDir
    Path dir;

    private static Map<String, String> opts(String... kv) {
        Map<String, String> m = new HashMap<>();
        for (int i = 0; i < kv.length; i += 2) {
            m.put(kv[i], kv[i + 1]);
        }
        return m;
    }

    private String single(String name) throws IOException {
        String p = dir.resolve(name).toString();
        new MappedBusWriter(p, 4096, 12).open().close();
        return p;
    }

    @Test
    public void batchPositionsAreRecordBoundariesAndLatestIsNotAStart() throws IOException {
        String p = single("a");
        BusOptions o = BusOptions.parse(opts("path", p, "recordSize", "12", "startingPosition", "28",
                "endingPosition", "88"));
        assertEquals(28, o.batchStart());
        assertEquals(88, o.batchEnd());
        BusOptions d = BusOptions.parse(opts("path", p, "recordSize", "12"));
        assertEquals(Long.MIN_VALUE, d.batchStart());
        assertEquals(Long.MAX_VALUE, d.batchEnd());
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> BusOptions.parse(opts("path", p, "recordSize", "12", "endingPosition", "30")));
        assertTrue(e.getMessage().contains("endingPosition must be latest or a record offset (8 + k * 20) of " + p),
                e.getMessage());
        BusOptions latest = BusOptions.parse(opts("path", p, "recordSize", "12", "startingPosition", "latest"));
        e = assertThrows(IllegalArgumentException.class, latest::batchStart);
        assertTrue(e.getMessage().contains("for streaming reads"), e.getMessage());
    }

    @Test
    public void hostsAreAListOrEvery() throws IOException {
        String p = single("a");
        assertArrayEquals(new String[] {"h1", "h2"},
                BusOptions.parse(opts("path", p, "recordSize", "12", "hosts", " h1, h2,h1 ")).hosts);
        assertArrayEquals(new String[] {"*"}, BusOptions.parse(opts("path", p, "recordSize", "12", "hosts", "*")).hosts);
        assertNull(BusOptions.parse(opts("path", p, "recordSize", "12")).hosts);
    }

    @Test
    public void aListOrAPatternNamesSeveralBusesButNotTheirMetadata() throws IOException {
        String a = single("prices-a");
        String b = single("prices-b");
        String other = single("other");
        Files.writeString(dir.resolve("prices-z.commits"), "");
        BusOptions o = BusOptions.parse(opts("path", dir.resolve("prices-*") + "," + other, "recordSize", "12"));
        assertArrayEquals(new String[] {a, b, other}, o.buses);
        assertEquals(a, o.path);
        assertTrue(o.readSchema().fieldNames()[o.readSchema().fieldNames().length - 1].equals("bus"));
        assertNull(BusOptions.parse(opts("path", a, "recordSize", "12")).buses);
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> BusOptions.parse(opts("path", dir.resolve("none-*").toString(), "recordSize", "12")));
        assertTrue(e.getMessage().contains("matches no bus"), e.getMessage());
    }

    @Test
    public void exactlyOnceIsAcceptedOnARollingBus() throws IOException {
        String r = dir.resolve("roll").toString();
        new RollingBusWriter(r, 4096, 8).open().close();
        assertTrue(BusOptions.parse(opts("path", r, "exactlyOnce", "true")).exactlyOnce);
        assertNull(BusOptions.parse(opts("path", r)).exactlyOnce);
    }
}
