package io.mappedbuspy;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

import static io.mappedbuspy.Buses.assertContains;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** Writers in other JVM processes (BusTool), as the cross-language tests use them. */
public final class CrossProcessTest {
    /** Scratch directory, new for each test and deleted after it. */
    @TempDir
    Path tmp;

    private static Process busTool(String... args) throws IOException {
        List<String> cmd = new ArrayList<>();
        cmd.add(ProcessHandle.current().info().command().orElse("java"));
        cmd.add("-cp");
        cmd.add(System.getProperty("java.class.path"));
        cmd.add("io.mappedbuspy.tools.BusTool");
        cmd.addAll(List.of(args));
        // stderr apart: a JVM may warn there (JDK 24+ on sun.misc.Unsafe), and the tests read stdout by line.
        return new ProcessBuilder(cmd).redirectError(ProcessBuilder.Redirect.INHERIT).start();
    }

    private static BufferedReader lines(Process p) {
        return new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.US_ASCII));
    }

    private static String finish(Process p) throws Exception {
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.US_ASCII);
        assertTrue(p.waitFor(30, TimeUnit.SECONDS), "exited");
        assertEquals(0, p.exitValue(), "exit code, output: " + out);
        return out;
    }

    /** Two writer processes interleave; a reader gets every record once, each writer's in order. */
    @Test
    @Timeout(120)
    public void twoWriterProcessesInterleave() throws Exception {
        String path = tmp.resolve("xp.bus").toString();
        int n = 5000;
        long fileSize = Layout.recordOffset(2L * n, 8);
        new MappedBusWriter(path, fileSize, 8).open().close(); // readers never create the bus
        try (MappedBusReader r = new MappedBusReader(path, fileSize, 8).open()) {
            r.setTimeout(30_000);
            Process a = busTool("write-bytes", path, "" + fileSize, "8", "" + n, "1");
            Process b = busTool("write-bytes", path, "" + fileSize, "8", "" + n, "2");
            int[] next = new int[3];
            byte[] buf = new byte[8];
            for (int k = 0; k < 2 * n; k++) {
                assertTrue(Buses.await(r, 30_000), "record " + k);
                assertEquals(8, r.readBuffer(buf, 0), "length");
                int id = buf[0];
                int i = (buf[4] & 0xFF) | (buf[5] & 0xFF) << 8 | (buf[6] & 0xFF) << 16 | (buf[7] & 0xFF) << 24;
                assertEquals(next[id], i, "order of writer " + id);
                next[id]++;
            }
            assertContains(finish(a), "wrote 5000 committed 5000");
            assertContains(finish(b), "wrote 5000 committed 5000");
        }
    }

    /** A writer process that allocates and hangs costs readers one timeout, not the later records. */
    @Test
    @Timeout(60)
    public void hungWriterProcessIsRolledBack() throws Exception {
        String path = tmp.resolve("hang.bus").toString();
        Process p = busTool("allocate-and-hang", path, "4096", "12");
        try {
            assertEquals("allocated 8", lines(p).readLine(), "first line");
            try (MappedBusWriter w = new MappedBusWriter(path, 4096, 12).open();
                 MappedBusReader r = new MappedBusReader(path, 4096, 12).open()) {
                r.setTimeout(100);
                assertTrue(w.write(new byte[] {42}, 0, 1), "write");
                assertFalse(r.next(), "waiting");
                assertTrue(Buses.await(r, 5000), "delivered after the rollback");
                assertEquals(28, r.recordPosition(), "position");
                assertEquals(1, r.rollbacks(), "rollbacks");
            }
        } finally {
            p.destroy();
            p.waitFor(10, TimeUnit.SECONDS);
        }
    }

    /** A writer process slower than the reader's timeout learns its record was rolled back. */
    @Test
    @Timeout(60)
    public void slowWriterProcessGetsFalse() throws Exception {
        String path = tmp.resolve("slowxp.bus").toString();
        // The writer sleeps 4 s: long enough for this reader to open and time out on a loaded machine.
        Process p = busTool("slow-write", path, "4096", "12", "4000");
        BufferedReader out = lines(p);
        assertEquals("allocated 8", out.readLine(), "first line");
        try (MappedBusReader r = new MappedBusReader(path, 4096, 12).open()) {
            r.setTimeout(50);
            long end = System.nanoTime() + 5_000_000_000L;
            while (r.rollbacks() == 0 && System.nanoTime() < end) {
                assertFalse(r.next(), "nothing delivered");
            }
            assertEquals(1, r.rollbacks(), "rollbacks");
        }
        assertEquals("committed false", out.readLine(), "writer's result");
        assertTrue(p.waitFor(30, TimeUnit.SECONDS), "exited");
        assertEquals(0, p.exitValue(), "exit code");
    }
}
