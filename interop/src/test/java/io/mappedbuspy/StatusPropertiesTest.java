package io.mappedbuspy;

import java.io.EOFException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.TreeMap;
import java.util.stream.Stream;

import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;
import org.junit.jupiter.params.provider.ValueSource;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;
import io.mappedbuspy.internal.MemoryMappedFile;

/**
 * Record statuses over generated cases (each a seed, see {@link Seeds}), at every record size 1..64, so
 * most statuses sit off 4-byte alignment: any sequence of writes, slots left uncommitted, commits that come
 * late and rollbacks by readers ends with readers delivering exactly the committed records in order, never
 * a rolled-back one; and status reads and swaps at any alignment touch only the status.
 */
public final class StatusPropertiesTest {
    @TempDir
    Path tmp;

    static Stream<String> seeds() {
        return Seeds.seeds();
    }

    private enum Op { WRITE, ALLOCATE, COMMIT, ROLLBACK, READ, OTHER_READER }

    /** What a reader delivered: position, metadata and the payload bytes the metadata counts. */
    private static String record(long pos, int meta, byte[] payload) {
        StringBuilder s = new StringBuilder().append(pos).append(':').append(meta).append(':');
        for (byte b : payload) {
            s.append(String.format("%02x", b));
        }
        return s.toString();
    }

    /**
     * Polls until caught up with the limit (or the end of the file), collecting what it delivers; slots left
     * uncommitted are rolled back (or skipped) after the readers' timeout, the shortest allowed.
     */
    private static boolean drain(MappedBusReader r, MemoryMappedFile mem, int recordSize, List<String> out)
            throws Exception {
        byte[] buf = new byte[recordSize];
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (System.nanoTime() - deadline < 0) {
            boolean got;
            try {
                got = r.next();
            } catch (EOFException e) {
                return true;
            }
            if (got) {
                int n = r.readBuffer(buf, 0);
                out.add(record(r.recordPosition(), r.readType(), Arrays.copyOf(buf, n)));
            } else if (r.position() >= mem.getLongAcquire(Layout.LIMIT_OFFSET)) {
                return false;
            }
        }
        return fail("reader at " + r.position() + " did not catch up with limit " + mem.getLongAcquire(0));
    }

    @ParameterizedTest(name = "seed={0}")
    @MethodSource("seeds")
    public void readersDeliverExactlyTheCommittedRecordsInOrder(String seed) throws Exception {
        SplittableRandom r = Seeds.random(seed);
        int rs = r.nextInt(1, 65);
        long slot = Layout.slotSize(rs);
        int nOps = r.nextInt(1, 50);
        // Sometimes the file holds fewer slots than the case allocates: the writes past the end fail and
        // readers end with EOF instead of waiting.
        long capacity = r.nextInt(4) == 0 ? r.nextLong(1, nOps + 1) : nOps + 1;
        long fileSize = Math.max(16 + rs, Layout.FIRST_RECORD_OFFSET + capacity * slot + r.nextLong(0, slot));
        capacity = (fileSize - Layout.FIRST_RECORD_OFFSET) / slot;
        String path = tmp.resolve("status.bus").toString();
        Op[] ops = Op.values();
        // Slot states of the model; pending ones were allocated but not committed.
        TreeMap<Long, String> committed = new TreeMap<>();
        Map<Long, String> pendingRecord = new HashMap<>();
        List<Long> pending = new ArrayList<>();
        long allocated = 0;
        List<String> got = new ArrayList<>();
        List<String> other = new ArrayList<>();
        try (MappedBusWriter w = new MappedBusWriter(path, fileSize, rs).open();
             MemoryMappedFile mem = new MemoryMappedFile(path, fileSize);
             MappedBusReader reader = new MappedBusReader(path, fileSize, rs).open();
             MappedBusReader otherReader = new MappedBusReader(path, fileSize, rs).open()) {
            reader.setTimeout(Layout.MIN_ROLLBACK_TIMEOUT_MS);
            otherReader.setTimeout(Layout.MIN_ROLLBACK_TIMEOUT_MS);
            for (int i = 0; i < nOps; i++) {
                Op op = ops[r.nextInt(ops.length)];
                byte[] payload = new byte[r.nextInt(0, rs + 1)];
                r.nextBytes(payload);
                long pos = Layout.recordOffset(allocated, rs);
                switch (op) {
                    case WRITE:
                        allocated++;
                        if (allocated > capacity) {
                            assertThrows(EOFException.class, () -> w.write(payload, 0, payload.length), "full");
                        } else {
                            assertTrue(w.write(payload, 0, payload.length), "a new slot commits");
                            committed.put(pos, record(pos, payload.length, payload));
                        }
                        break;
                    case ALLOCATE: // a writer that allocated and filled its slot, and stalls or crashed
                        assertEquals(pos, mem.getAndAddLong(Layout.LIMIT_OFFSET, slot), "allocation order");
                        allocated++;
                        if (allocated <= capacity) {
                            mem.putInt(pos + Layout.METADATA_OFFSET, payload.length);
                            mem.putBytes(pos + Layout.PAYLOAD_OFFSET, payload, 0, payload.length);
                            pending.add(pos);
                            pendingRecord.put(pos, record(pos, payload.length, payload));
                        }
                        break;
                    case COMMIT: // the stalled writer comes back: it commits unless a reader rolled it back
                    case ROLLBACK: // a reader whose timeout ran out on the slot
                        if (pending.isEmpty()) {
                            break;
                        }
                        long p = pending.remove(r.nextInt(pending.size()));
                        boolean wasOpen = mem.getStatus(p) == Layout.STATUS_NOT_SET;
                        int desired = op == Op.COMMIT ? Layout.STATUS_COMMITTED : Layout.STATUS_ROLLED_BACK;
                        assertEquals(wasOpen, mem.casStatus(p, Layout.STATUS_NOT_SET, desired),
                                "the swap succeeds exactly when the slot is still uncommitted");
                        if (wasOpen && op == Op.COMMIT) {
                            committed.put(p, pendingRecord.get(p));
                        }
                        break;
                    case READ:
                        drain(reader, mem, rs, got);
                        break;
                    default:
                        drain(otherReader, mem, rs, other);
                }
                // Whatever a reader rolled back can no longer commit: no committed slot is in the model's
                // rolled-back part, and every delivered record is a committed one.
                for (String g : got) {
                    assertTrue(committed.containsValue(g), "delivered " + g + " that never committed");
                }
            }
            boolean eof = drain(reader, mem, rs, got);
            drain(otherReader, mem, rs, other);
            assertEquals(allocated >= capacity, eof, "EOF exactly when every slot of the file was allocated");
            List<String> expected = new ArrayList<>(committed.values());
            assertEquals(expected, got, "the reader's records");
            assertEquals(expected, other, "another reader's records");
            long settled = Math.min(allocated, capacity);
            for (long k = 0; k < settled; k++) {
                long p = Layout.recordOffset(k, rs);
                int status = mem.getStatus(p);
                assertEquals(committed.containsKey(p) ? Layout.STATUS_COMMITTED : Layout.STATUS_ROLLED_BACK, status,
                        "final status of slot " + k + " at " + p);
            }
            assertEquals(settled - committed.size(), reader.rolledBackSkipped(), "rolled-back slots skipped");
            // A read-only reader sees the same records and writes nothing.
            byte[] before = Buses.bytes(path);
            List<String> readOnly = new ArrayList<>();
            try (MappedBusReader ro = new MappedBusReader(path, fileSize, rs, true).open()) {
                ro.setTimeout(Layout.MIN_ROLLBACK_TIMEOUT_MS);
                drain(ro, mem, rs, readOnly);
            }
            assertEquals(expected, readOnly, "a read-only reader's records");
            assertArrayEquals(before, Buses.bytes(path), "a read-only reader wrote to the file");
        }
    }

    /**
     * A status anywhere in a file of random bytes, read and swapped at random: only its 4 bytes change,
     * a swap happens exactly when the whole int32 equals the expected value, and reads give that int32.
     */
    @ParameterizedTest(name = "seed={0}")
    @MethodSource("seeds")
    public void statusReadsAndSwapsTouchOnlyTheStatus(String seed) throws Exception {
        SplittableRandom r = Seeds.random(seed);
        int rs = r.nextInt(1, 65);
        long pos = Layout.recordOffset(r.nextInt(0, 40), rs);
        long fileSize = pos + 2 * Layout.slotSize(rs);
        String path = tmp.resolve("statuses.bus").toString();
        try (MemoryMappedFile mem = new MemoryMappedFile(path, fileSize)) {
            byte[] image = new byte[(int) mem.size()];
            r.nextBytes(image);
            // A valid status (0..2) mostly; sometimes a corrupt one whose upper bytes are set.
            int status = r.nextInt(4) == 0 ? r.nextInt() | (1 << (8 + r.nextInt(24))) : r.nextInt(3);
            java.nio.ByteBuffer.wrap(image).order(java.nio.ByteOrder.LITTLE_ENDIAN).putInt((int) pos, status);
            mem.putBytes(0, image, 0, image.length);
            for (int i = 0; i < 20; i++) {
                assertEquals(status, mem.getStatus(pos), "status at " + pos);
                int expected = r.nextBoolean() ? status & 0xFF : r.nextInt(256);
                int desired = r.nextInt(256);
                boolean swapped = mem.casStatus(pos, expected, desired);
                assertEquals(status == expected, swapped, "swap " + expected + " -> " + desired + " on " + status);
                if (swapped) {
                    status = desired;
                }
                java.nio.ByteBuffer.wrap(image).order(java.nio.ByteOrder.LITTLE_ENDIAN).putInt((int) pos, status);
                byte[] now = new byte[image.length];
                mem.getBytes(0, now, 0, now.length);
                assertArrayEquals(image, now, "bytes after swap " + i + " at " + pos + " (recordSize " + rs + ")");
            }
        }
    }

    /**
     * While another thread keeps changing the bytes before an unaligned status in the int32 word holding
     * its low byte (the previous record's payload), status swaps neither fail nor undo those changes.
     */
    @ParameterizedTest(name = "status at word offset {0}")
    @ValueSource(ints = {1, 2, 3})
    public void unalignedSwapsKeepConcurrentChangesToTheirNeighbours(int misalignment) throws Exception {
        long pos = 64 + misalignment;
        long word = pos & ~3L;
        String path = tmp.resolve("neighbours.bus").toString();
        try (MemoryMappedFile mem = new MemoryMappedFile(path, 4096)) {
            int rounds = 200_000;
            byte[] last = new byte[4];
            Thread neighbour = new Thread(() -> {
                for (int i = 1; i <= rounds; i++) {
                    for (long b = word; b < pos; b++) {
                        mem.putByte(b, (byte) (i + b));
                    }
                }
            });
            neighbour.start();
            int status = 0;
            int swaps = 0;
            while (neighbour.isAlive() || swaps < 1000) {
                int next = status == 0 ? 1 : 0;
                assertTrue(mem.casStatus(pos, status, next), "swap " + status + " -> " + next + " failed");
                status = next;
                swaps++;
            }
            neighbour.join();
            for (long b = word; b < word + 4; b++) {
                last[(int) (b - word)] = b < pos ? (byte) (rounds + b) : b == pos ? (byte) status : 0;
            }
            byte[] now = new byte[4];
            mem.getBytes(word, now, 0, 4);
            assertArrayEquals(last, now, "the word after " + swaps + " swaps");
            assertEquals(status, mem.getStatus(pos), "status");
            assertFalse(mem.casStatus(pos, status ^ 1, 2), "a swap from the wrong status");
        }
    }
}
