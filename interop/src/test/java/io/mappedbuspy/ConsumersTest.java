package io.mappedbuspy;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.io.Writer;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.NoSuchElementException;
import java.util.Random;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import static io.mappedbuspy.Buses.assertContains;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import io.mappedbuspy.internal.BusMeta;
import io.mappedbuspy.internal.MemoryMappedFile;

/** Named consumers (docs/files-and-rolling.md, "Consumers: the registry file"): the Java port of the registry. */
public final class ConsumersTest {
    private static final long FILE = 1 << 16;
    private static final int REC = 8;
    private static final long SLOT = Layout.slotSize(REC);
    private static final long SEG = 8 + 16 * SLOT; // 16 records per segment
    private static final int PID = (int) ProcessHandle.current().pid();

    @TempDir
    Path tmp;

    private String bus(int records) throws IOException {
        String path = tmp.resolve("bus").toString();
        try (MappedBusWriter w = new MappedBusWriter(path, FILE, REC).open()) {
            for (int i = 0; i < records; i++) {
                w.write(value(i), 0, REC);
            }
        }
        return path;
    }

    private static byte[] value(long v) {
        return ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN).putLong(0, v).array();
    }

    private static long read(MappedBusReader r) throws IOException {
        assertTrue(Buses.await(r, 5_000), "a record");
        byte[] b = new byte[REC];
        r.readBuffer(b, 0);
        return ByteBuffer.wrap(b).order(ByteOrder.LITTLE_ENDIAN).getLong(0);
    }

    private static long read(RollingBusReader r) throws IOException {
        long end = System.nanoTime() + 5_000_000_000L;
        while (!r.next()) {
            assertTrue(System.nanoTime() < end, "a record");
        }
        byte[] b = new byte[REC];
        r.readBuffer(b, 0);
        return ByteBuffer.wrap(b).order(ByteOrder.LITTLE_ENDIAN).getLong(0);
    }

    private static ConsumerInfo info(String path, String name) throws IOException {
        for (ConsumerInfo c : Consumers.consumers(path)) {
            if (c.name().equals(name)) {
                return c;
            }
        }
        return null;
    }

    private static Process child(String... args) throws IOException {
        List<String> cmd = new ArrayList<>();
        cmd.add(ProcessHandle.current().info().command().orElse("java"));
        cmd.add("-cp");
        cmd.add(System.getProperty("java.class.path"));
        cmd.add("io.mappedbuspy.ConsumerChild");
        cmd.addAll(List.of(args));
        return new ProcessBuilder(cmd).redirectError(ProcessBuilder.Redirect.INHERIT).start();
    }

    private static BufferedReader out(Process p) {
        return new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8));
    }

    /** A consumer resumes where it committed; the first time it starts where it was told; lag counts the rest. */
    @Test
    public void resumesByName() throws Exception {
        String path = bus(10);
        try (MappedBusReader r = new MappedBusReader(path).setConsumer("billing").open()) {
            assertEquals(8, r.position(), "first time: the oldest record");
            for (int i = 0; i < 4; i++) {
                assertEquals(i, read(r));
            }
            r.commit();
            ConsumerInfo c = info(path, "billing");
            assertEquals(8 + 4 * SLOT, c.position());
            assertEquals(6, c.lag());
            assertTrue(c.alive());
            assertEquals(PID, c.pid());
            assertFalse(c.expired());
            assertTrue(c.committedAt().isAfter(java.time.Instant.now().minusSeconds(60)));
            assertEquals(new MappedBusReader(path).open().busId(), c.busId());
            read(r); // read but not committed: a restart reads it again
        }
        ConsumerInfo c = info(path, "billing");
        assertFalse(c.alive(), "released at close");
        try (MappedBusReader r = new MappedBusReader(path).setConsumer("billing").open()) {
            assertEquals(4, read(r));
            r.commit(8 + 9 * SLOT);
        }
        try (MappedBusReader r = new MappedBusReader(path).setConsumer("billing").open()) {
            assertEquals(9, read(r));
        }
        try (MappedBusReader r = new MappedBusReader(path).setConsumer("late", Consumers.END).open()) {
            assertEquals(8 + 10 * SLOT, r.position(), "first time at END: after every record");
        }
        assertEquals(0, info(path, "late").lag());
        assertThrows(IllegalStateException.class, () -> new MappedBusReader(path).open().commit());
        assertThrows(IllegalArgumentException.class, () -> new MappedBusReader(path).setConsumer("a\nb"));
        assertThrows(IllegalArgumentException.class, () -> new MappedBusReader(path).setConsumer("x".repeat(65)));
    }

    /** Commit after each record and close: a restart delivers each record exactly once. */
    @Test
    public void commitEachRecordIsExactlyOnceAcrossRestarts() throws Exception {
        String path = bus(100);
        List<Long> seen = new ArrayList<>();
        Random rnd = new Random(23);
        while (seen.size() < 100) {
            try (MappedBusReader r = new MappedBusReader(path).setConsumer("once").open()) {
                int n = 1 + rnd.nextInt(15);
                for (int i = 0; i < n && seen.size() < 100; i++) {
                    seen.add(read(r));
                    r.commit();
                }
            }
        }
        for (int i = 0; i < 100; i++) {
            assertEquals(i, seen.get(i));
        }
    }

    /** A consumer SIGKILLed at random points and restarted by name: every record at least once, a repeat only for
     *  the one record in flight at each kill (printed, not yet committed). */
    @Test
    public void killedConsumerRestartsAtItsCommit() throws Exception {
        final int count = 3000;
        String path = bus(count);
        Map<Long, Integer> seen = new HashMap<>();
        Random rnd = new Random(7);
        int kills = 0;
        for (int round = 0; round < 20; round++) {
            Process p = child("read", path, "killed", Integer.toString(count));
            BufferedReader in = out(p);
            String line = in.readLine();
            assertTrue(line != null && line.startsWith("held "), "child opened: " + line);
            int take = round < 5 ? 1 + rnd.nextInt(400) : Integer.MAX_VALUE;
            boolean done = false;
            for (int i = 0; i < take; i++) {
                line = in.readLine();
                if (line == null || line.equals("done")) {
                    done = true;
                    break;
                }
                assertTrue(line.startsWith("got "), line);
                seen.merge(Long.parseLong(line.substring(4)), 1, Integer::sum);
            }
            if (done) {
                assertTrue(p.waitFor(30, TimeUnit.SECONDS));
                assertEquals(0, p.exitValue());
                break;
            }
            p.toHandle().destroyForcibly(); // SIGKILL; Process.destroyForcibly would close the pipe too
            p.waitFor(30, TimeUnit.SECONDS);
            // What it printed before the kill came through the pipe: count it too.
            boolean finished = false;
            for (String rest; (rest = in.readLine()) != null; ) {
                if (rest.startsWith("got ")) {
                    seen.merge(Long.parseLong(rest.substring(4)), 1, Integer::sum);
                }
                finished |= rest.equals("done"); // it ended before the kill
            }
            if (finished) {
                break;
            }
            kills++;
        }
        assertEquals(count, seen.size(), "every record at least once");
        long repeats = seen.values().stream().mapToLong(v -> v - 1).sum();
        assertTrue(repeats <= kills, repeats + " repeats for " + kills + " kills");
    }

    /** One holder per name: another reader of this process, and another process, are refused naming the pid. */
    @Test
    public void secondHolderIsRefused() throws Exception {
        String path = bus(3);
        try (MappedBusReader r = new MappedBusReader(path).setConsumer("one").open()) {
            ConsumerInUseException e = assertThrows(ConsumerInUseException.class,
                    () -> new MappedBusReader(path).setConsumer("one").open());
            assertEquals(PID, e.holderPid());
            Process p = child("hold", path, "one");
            String line = out(p).readLine();
            assertTrue(p.waitFor(30, TimeUnit.SECONDS));
            assertTrue(line.startsWith("error ConsumerInUseException"), line);
            assertContains(line, "pid " + PID);
            assertEquals(0, read(r));
        }
        Process p = child("hold", path, "one");
        BufferedReader in = out(p);
        String line = in.readLine();
        assertTrue(line.startsWith("held "), line);
        long childPid = Long.parseLong(line.split(" ")[1]);
        try {
            ConsumerInUseException e = assertThrows(ConsumerInUseException.class,
                    () -> new MappedBusReader(path).setConsumer("one").open());
            assertEquals(childPid, e.holderPid());
            assertContains(e.getMessage(), "pid " + childPid);
            ConsumerInfo c = info(path, "one");
            assertTrue(c.alive());
            assertEquals(childPid, c.pid());
            assertThrows(ConsumerInUseException.class, () -> Consumers.removeConsumer(path, "one"));
        } finally {
            p.getOutputStream().close();
            assertTrue(p.waitFor(30, TimeUnit.SECONDS));
        }
        try (MappedBusReader r = new MappedBusReader(path).setConsumer("one").open()) {
            assertEquals(0, read(r), "released by the child at close");
        }
    }

    /** A holder SIGKILLed is replaced by the next claimant; what it committed stays. */
    @Test
    public void deadHolderIsReplaced() throws Exception {
        String path = bus(5);
        Process p = child("hold", path, "d");
        BufferedReader in = out(p);
        assertTrue(in.readLine().startsWith("held "));
        try (Writer w = new OutputStreamWriter(p.getOutputStream(), StandardCharsets.UTF_8)) {
            w.write("commit " + (8 + 2 * SLOT) + "\n");
            w.flush();
            assertEquals("committed", in.readLine());
            p.destroyForcibly();
            assertTrue(p.waitFor(30, TimeUnit.SECONDS));
        } catch (IOException e) {
            // the pipe closed with the child
        }
        assertFalse(info(path, "d").alive());
        try (MappedBusReader r = new MappedBusReader(path).setConsumer("d").open()) {
            assertEquals(2, read(r));
            assertTrue(info(path, "d").alive());
            assertEquals(PID, info(path, "d").pid());
        }
    }

    /** A registry that is something else is a clear error; one truncated under its reader never crashes the JVM. */
    @Test
    public void corruptAndTruncatedRegistries() throws Exception {
        String path = bus(3);
        Path reg = Path.of(path + Layout.CONSUMERS_SUFFIX);
        Files.write(reg, new byte[Layout.CONSUMERS_FILE_SIZE]);
        try (FileChannel ch = FileChannel.open(reg, StandardOpenOption.WRITE)) {
            ch.write(ByteBuffer.wrap("NOTMAGIC".getBytes(StandardCharsets.US_ASCII)), 0);
        }
        CorruptBusException e = assertThrows(CorruptBusException.class,
                () -> new MappedBusReader(path).setConsumer("c").open());
        assertContains(e.getMessage(), "not a consumer registry");
        assertContains(e.getMessage(), reg.toString());
        assertThrows(CorruptBusException.class, () -> Consumers.consumers(path));
        Files.delete(reg);

        // A position off the record grid: named, never used.
        try (MappedBusReader r = new MappedBusReader(path).setConsumer("c").open()) {
            r.commit(8 + SLOT);
        }
        try (FileChannel ch = FileChannel.open(reg, StandardOpenOption.WRITE)) {
            ByteBuffer b = ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN).putLong(0, 8 + SLOT + 3);
            ch.write(b, Layout.CONSUMERS_ENTRIES_OFFSET + Layout.CONSUMER_POSITION_OFFSET);
        }
        e = assertThrows(CorruptBusException.class, () -> new MappedBusReader(path).setConsumer("c").open());
        assertContains(e.getMessage(), "consumer 'c'");
        assertFalse(info(path, "c").alive(), "released after the refused open");

        // Truncated under a holder: commits go on or raise BusTruncatedException, never a crash; close releases what
        // it can; a later open makes it a registry again.
        Files.delete(reg);
        for (long cut : new long[] {0, 100}) {
            MappedBusReader r = new MappedBusReader(path).setConsumer("t").open();
            try (FileChannel ch = FileChannel.open(reg, StandardOpenOption.WRITE)) {
                ch.truncate(cut);
            }
            boolean raised = false;
            try {
                try {
                    for (int i = 0; i < 10_000; i++) {
                        r.commit(8);
                    }
                } catch (BusTruncatedException x) {
                    raised = true;
                    assertContains(x.getMessage(), reg.toString());
                }
                MemoryMappedFile.raiseFaultReports();
            } catch (InternalError x) {
                // The JVM's late report of a commit's fault, raised here between commits (a pending safepoint)
                // before the commit that raises it itself (docs/jvm.md, "Consumers").
                assertTrue(MemoryMappedFile.isMappingFault(x), x.toString());
                raised = true;
            }
            assertTrue(raised, "truncation to " + cut + " noticed");
            r.close();
            if (cut == 0) {
                // all zero: as a first opener killed before sizing it leaves it, an empty registry at once
                assertEquals(List.of(), Consumers.consumers(path));
            } else {
                assertThrows(CorruptBusException.class, () -> Consumers.consumers(path));
            }
            try (MappedBusReader again = new MappedBusReader(path).setConsumer("t").open()) {
                assertEquals(0, read(again), "a registry again, entries gone");
            }
            assertEquals(Layout.CONSUMERS_FILE_SIZE, Files.size(reg));
        }
    }

    /** Registrations racing in threads of this JVM and in other processes all land, each name once. */
    @Test
    public void concurrentRegistrationsAllLand() throws Exception {
        String path = bus(1);
        List<Process> children = new ArrayList<>();
        for (int c = 0; c < 3; c++) {
            children.add(child("hold", path, "proc" + c));
        }
        List<Thread> threads = new ArrayList<>();
        List<Throwable> errors = java.util.Collections.synchronizedList(new ArrayList<>());
        for (int t = 0; t < 8; t++) {
            final int id = t;
            threads.add(new Thread(() -> {
                try {
                    for (int k = 0; k < 8; k++) {
                        try (MappedBusReader r = new MappedBusReader(path).setConsumer("t" + id + "-" + k).open()) {
                            r.commit(8 + SLOT);
                        }
                    }
                } catch (Throwable e) {
                    errors.add(e);
                }
            }));
        }
        threads.forEach(Thread::start);
        for (Thread t : threads) {
            t.join();
        }
        assertTrue(errors.isEmpty(), errors.toString());
        for (Process p : children) {
            String line = out(p).readLine();
            assertTrue(line != null && line.startsWith("held "), line);
            p.getOutputStream().close();
            assertTrue(p.waitFor(30, TimeUnit.SECONDS));
        }
        List<ConsumerInfo> all = Consumers.consumers(path);
        assertEquals(8 * 8 + 3, all.size());
        assertEquals(all.size(), all.stream().map(ConsumerInfo::name).distinct().count());
        assertTrue(all.stream().filter(c -> c.name().startsWith("t")).allMatch(c -> c.position() == 8 + SLOT));
    }

    /**
     * A lock word left by a process that died inside a structural change does not hold anyone (the lock is the
     * kernel's OFD lock on its first byte, gone with its holder; the word shows a pid for people only); a link is
     * refused.
     */
    @Test
    public void deadLockHolderIsReplacedAndLinksRefused() throws Exception {
        String path = bus(1);
        try (MappedBusReader r = new MappedBusReader(path).setConsumer("a").open()) {
            assertEquals(0, read(r));
        }
        Process gone = new ProcessBuilder("true").start();
        assertTrue(gone.waitFor(30, TimeUnit.SECONDS));
        Path reg = Path.of(path + Layout.CONSUMERS_SUFFIX);
        try (FileChannel ch = FileChannel.open(reg, StandardOpenOption.WRITE)) {
            ByteBuffer b = ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN)
                    .putLong(0, gone.pid());
            ch.write(b, Layout.CONSUMERS_LOCK_OFFSET);
        }
        long t0 = System.nanoTime();
        try (MappedBusReader r = new MappedBusReader(path).setConsumer("a").open()) {
            assertEquals(8, r.position(), "nothing committed before");
        }
        assertTrue(System.nanoTime() - t0 < 5_000_000_000L, "taken over well before the lock timeout");
        Path other = tmp.resolve("elsewhere");
        Files.move(reg, other);
        Files.createSymbolicLink(reg, other);
        assertThrows(UnsafeBusFileException.class, () -> new MappedBusReader(path).setConsumer("a").open());
        assertThrows(UnsafeBusFileException.class, () -> Consumers.consumers(path));
    }

    /** A bus deleted and recreated under its path: its consumers' entries are of another bus id (lag -1) and start
     *  anew when opened. */
    @Test
    public void recreatedBusStartsConsumersAnew() throws Exception {
        String path = bus(5);
        try (MappedBusReader r = new MappedBusReader(path).setConsumer("r").open()) {
            r.commit(8 + 3 * SLOT);
        }
        String oldId = info(path, "r").busId();
        Files.delete(Path.of(path));
        Files.delete(BusMeta.metaPath(path));
        bus(2);
        ConsumerInfo stale = info(path, "r");
        assertEquals(-1, stale.lag());
        assertEquals(oldId, stale.busId());
        try (MappedBusReader r = new MappedBusReader(path).setConsumer("r").open()) {
            assertEquals(8, r.position(), "made anew at the start");
            assertEquals(r.busId(), info(path, "r").busId());
        }
    }

    /** removeConsumer: refused while held, unknown names are NoSuchElementException, gone from the listing. */
    @Test
    public void removeConsumer() throws Exception {
        String path = bus(2);
        assertTrue(Consumers.consumers(path).isEmpty(), "no registry yet");
        assertThrows(NoSuchElementException.class, () -> Consumers.removeConsumer(path, "x"));
        try (MappedBusReader r = new MappedBusReader(path).setConsumer("x").open()) {
            r.commit(8 + SLOT);
            assertThrows(ConsumerInUseException.class, () -> Consumers.removeConsumer(path, "x"));
        }
        Consumers.removeConsumer(path, "x");
        assertNull(info(path, "x"));
        assertThrows(NoSuchElementException.class, () -> Consumers.removeConsumer(path, "x"));
        try (MappedBusReader r = new MappedBusReader(path).setConsumer("x").open()) {
            assertEquals(8, r.position(), "made anew");
        }
    }

    // ---- rolling buses ----

    private String rolling(long maxLag, OnConsumerLag policy, long blockMs, long retain) throws IOException {
        String dir = tmp.resolve("rolling").toString();
        new RollingBusWriter(dir, SEG, REC).setRetention(retain, 0, 0).setMaxConsumerLag(maxLag)
                .setOnConsumerLag(policy).setConsumerBlockTimeout(blockMs, TimeUnit.MILLISECONDS).open().close();
        return dir;
    }

    private static boolean exists(String dir, long segment) {
        return Files.exists(Path.of(dir, Layout.segmentName(segment)));
    }

    /** A rolling consumer resumes across segments; retention keeps what it needs within the bound, then expires it. */
    @Test
    public void expirePolicyHoldsThenExpires() throws Exception {
        String dir = rolling(2, OnConsumerLag.EXPIRE, 1000, 1);
        BusMeta m = BusMeta.read(Path.of(dir, Layout.META_FILE), false);
        assertEquals(2, m.maxConsumerLag());
        assertEquals(OnConsumerLag.EXPIRE, m.onConsumerLag());
        try (RollingBusReader r = new RollingBusReader(dir).setConsumer("slow").open()) {
            assertEquals(8, r.position());
        }
        try (RollingBusWriter w = new RollingBusWriter(dir).open()) {
            long v = 0;
            while (w.segment() < 2) {
                w.write(value(v++), 0, REC);
            }
            for (int i = 0; i < 10; i++) {
                w.write(value(v++), 0, REC); // still in segment 2 (16 records a segment), look-aheads done
            }
            assertEquals(2, w.segment());
            assertTrue(exists(dir, 0), "held: the consumer lags 2 segments, within the bound");
            assertFalse(info(dir, "slow").expired());
            assertEquals(v, info(dir, "slow").lag());
            while (w.segment() < 4) {
                w.write(value(v++), 0, REC);
            }
            for (int i = 0; i < 20; i++) {
                w.write(value(v++), 0, REC);
            }
        }
        assertTrue(info(dir, "slow").expired(), "lagged more than max_consumer_lag");
        assertFalse(exists(dir, 0), "its segments went");
        try (RollingBusReader r = new RollingBusReader(dir).setConsumer("slow").open()) {
            BusGapException gap = assertThrows(BusGapException.class, r::next);
            assertEquals(8, gap.lostFrom());
        }
        try (RollingBusReader r = new RollingBusReader(dir).setConsumer("slow").setFailOnGap(false).open()) {
            read(r);
            assertTrue(r.lost() > 0);
            r.commit();
        }
        assertFalse(info(dir, "slow").expired(), "a commit clears the flag");
    }

    /** Under block, a writer about to roll too far ahead of a consumer waits, then throws naming it; it goes on once
     *  the consumer commits. */
    @Test
    public void blockPolicyWaitsThenThrows() throws Exception {
        String dir = rolling(1, OnConsumerLag.BLOCK, 200, 1);
        try (RollingBusReader r = new RollingBusReader(dir).setConsumer("held").open();
             RollingBusWriter w = new RollingBusWriter(dir).open()) {
            long v = 0;
            BusBackPressureException e = null;
            while (e == null) {
                try {
                    w.write(value(v), 0, REC);
                    v++;
                } catch (BusBackPressureException x) {
                    e = x;
                }
            }
            assertEquals(1, w.segment(), "blocked before rolling into segment 2");
            assertEquals(32, v, "two segments written");
            assertEquals("held", e.consumer());
            assertEquals(8, e.position());
            assertEquals(32, e.lag());
            assertContains(e.getMessage(), "'held'");
            assertTrue(exists(dir, 0), "never expired under block");
            assertFalse(info(dir, "held").expired());
            for (int i = 0; i < 16; i++) {
                assertEquals(i, read(r));
            }
            r.commit();
            assertTrue(w.write(value(v++), 0, REC), "the retried write goes through");
            assertEquals(2, w.segment());
            for (int i = 0; i < 4; i++) {
                w.write(value(v++), 0, REC); // the roll's deferred retention runs at a look-ahead
            }
            assertFalse(exists(dir, 0), "segment 0 released to retention");
        }
    }

    /** bus.meta: the consumer policy's keys round-trip; an unknown on_consumer_lag is refused. */
    @Test
    public void consumerPolicyInMetadata() throws Exception {
        BusMeta m = BusMeta.rolling(REC, SEG, Retention.NONE, new ConsumerPolicy(3, OnConsumerLag.BLOCK, 1234));
        BusMeta back = BusMeta.decode(m.encode(), "mem");
        assertEquals(m, back);
        assertEquals(3, back.maxConsumerLag());
        assertEquals(1234, back.consumerBlockMs());
        String text = new String(m.encode(), StandardCharsets.UTF_8);
        assertContains(text, "max_consumer_lag=3\nconsumer_block_ms=1234\non_consumer_lag=block\n");
        CorruptBusException e = assertThrows(CorruptBusException.class, () -> BusMeta.decode(
                text.replace("on_consumer_lag=block", "on_consumer_lag=wait").getBytes(StandardCharsets.UTF_8), "x"));
        assertContains(e.getMessage(), "on_consumer_lag");
        BusMeta old = BusMeta.decode(text.replaceAll("(max_consumer_lag|consumer_block_ms|on_consumer_lag)=.*\n", "")
                .getBytes(StandardCharsets.UTF_8), "x");
        assertEquals(0, old.maxConsumerLag());
        assertEquals(Layout.DEFAULT_CONSUMER_BLOCK_MS, old.consumerBlockMs());
        assertEquals(OnConsumerLag.EXPIRE, old.onConsumerLag());
        String dir = rolling(2, OnConsumerLag.EXPIRE, 500, 0);
        assertThrows(IllegalArgumentException.class,
                () -> new RollingBusWriter(dir).setMaxConsumerLag(3).open());
        assertThrows(IllegalArgumentException.class, () -> new RollingBusWriter(dir).setOnConsumerLag("wait"));
    }

    /**
     * A registry that cannot be read (garbage, a link) on a rolling bus whose consumers hold retention or block: an
     * error at the writer's open, and at a write that rolls when it went bad after the open (nothing written, the
     * writer still in its segment, never stuck); once it reads again the write rolls.
     */
    @Test
    public void unreadableRegistryFailsTheWritersOpenAndEveryRoll() throws Exception {
        for (OnConsumerLag policy : OnConsumerLag.values()) {
            for (boolean link : new boolean[] {false, true}) {
                String dir = tmp.resolve("bad-" + policy + "-" + link).toString();
                new RollingBusWriter(dir, SEG, REC).setRetention(1, 0, 0).setMaxConsumerLag(2)
                        .setOnConsumerLag(policy).open().close();
                Path reg = Path.of(dir, Layout.CONSUMERS_FILE);
                Class<? extends IOException> expected = link ? UnsafeBusFileException.class : CorruptBusException.class;
                Runnable plant = () -> {
                    try {
                        if (link) {
                            Path other = tmp.resolve("elsewhere-" + policy);
                            Files.write(other, new byte[Layout.CONSUMERS_FILE_SIZE]);
                            Files.createSymbolicLink(reg, other);
                        } else {
                            byte[] junk = new byte[Layout.CONSUMERS_FILE_SIZE];
                            new Random(7).nextBytes(junk);
                            Files.write(reg, junk);
                        }
                    } catch (IOException e) {
                        throw new RuntimeException(e);
                    }
                };
                plant.run();
                assertThrows(expected, () -> new RollingBusWriter(dir).open());
                Files.delete(reg);
                try (RollingBusWriter w = new RollingBusWriter(dir).open()) {
                    long v = 0;
                    while (v < 16) { // segment 0 full (16 records a segment)
                        w.write(value(v++), 0, REC);
                    }
                    plant.run();
                    for (int attempt = 0; attempt < 3; attempt++) {
                        final long x = v;
                        IOException e = assertThrows(expected, () -> w.write(value(x), 0, REC));
                        assertContains(e.getMessage(), Layout.CONSUMERS_FILE);
                        assertEquals(0, w.segment());
                    }
                    Files.delete(reg);
                    w.write(value(v), 0, REC);
                    assertEquals(1, w.segment());
                }
            }
        }
    }
}
