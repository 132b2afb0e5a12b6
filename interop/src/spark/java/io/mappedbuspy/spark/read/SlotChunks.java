package io.mappedbuspy.spark.read;

import io.mappedbuspy.internal.ArchiveFiles;
import io.mappedbuspy.CorruptBusException;
import io.mappedbuspy.Layout;
import io.mappedbuspy.internal.MemoryMappedFile;

import java.io.IOException;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteOrder;

/**
 * Walks a {@link BusPartition} in chunks of up to {@code batchSize} slots: the statuses are read with
 * acquire loads (pairing with the writers' commit CAS), then the chunk's bytes are copied into one heap
 * array in a single bulk copy and decoded from there. The file is mapped read-only.
 */
abstract class SlotChunks implements AutoCloseable {
    static final VarHandle SHORT = MethodHandles.byteArrayViewVarHandle(short[].class, ByteOrder.LITTLE_ENDIAN);
    static final VarHandle INT = MethodHandles.byteArrayViewVarHandle(int[].class, ByteOrder.LITTLE_ENDIAN);
    static final VarHandle LONG = MethodHandles.byteArrayViewVarHandle(long[].class, ByteOrder.LITTLE_ENDIAN);
    static final VarHandle FLOAT = MethodHandles.byteArrayViewVarHandle(float[].class, ByteOrder.LITTLE_ENDIAN);
    static final VarHandle DOUBLE = MethodHandles.byteArrayViewVarHandle(double[].class, ByteOrder.LITTLE_ENDIAN);

    final BusReaderFactory f;
    final BusPartition p;
    final int slot;
    final byte[] buf;
    /** Slot indices (within the chunk) of the committed records, and their number. */
    final int[] rows;
    int nRows;
    /** File offset of the chunk's first slot. */
    long chunkStart;
    private long next;
    private MemoryMappedFile mem;

    SlotChunks(BusReaderFactory f, BusPartition p) throws IOException {
        this.f = f;
        this.p = p;
        this.slot = (int) Layout.slotSize(p.recordSize);
        int n = (int) Math.max(1, Math.min(f.batchSize, p.records()));
        this.buf = new byte[Math.multiplyExact(n, slot)];
        this.rows = new int[n];
        this.next = p.start;
        BusPartition.checkHost(p.path, p.requiredHost);
        this.mem = ArchiveFiles.mapForRead(p.path, p.fileSize); // a segment moved since planning: the archive's
        try {
            p.checkIdentity(mem);
        } catch (IOException e) {
            mem.close();
            throw e;
        }
        if (mem.size() < p.end) {
            throw new IOException("mappedbus: " + p.path + " is shorter (" + mem.size() + " bytes) than the "
                    + "planned range ending at " + p.end);
        }
    }

    /** Loads the next chunk; false at the end of the partition. A chunk may hold no committed record. */
    final boolean loadChunk() throws CorruptBusException {
        if (next >= p.end) {
            return false;
        }
        int k = (int) Math.min(rows.length, (p.end - next) / slot);
        chunkStart = next;
        int n = 0;
        for (int i = 0; i < k; i++) {
            long pos = next + (long) i * slot;
            if (isRow(mem, p, f.metas, pos)) {
                rows[n++] = i;
            }
        }
        nRows = n;
        if (f.kinds.length > 0) { // count() needs only the statuses
            mem.getBytes(next, buf, 0, k * slot);
        }
        next += (long) k * slot;
        return true;
    }

    /**
     * Whether the slot at {@code pos} of a planned partition is one of its rows: committed (acquire load) and
     * its metadata in {@code metas} (sorted; null: any). An uncommitted slot in a range planned as settled,
     * or an invalid status, is an error.
     */
    static boolean isRow(MemoryMappedFile mem, BusPartition p, int[] metas, long pos) throws CorruptBusException {
        int status = mem.getStatus(pos);
        if (status == Layout.STATUS_COMMITTED) {
            return metas == null || java.util.Arrays.binarySearch(metas, mem.getInt(pos + Layout.METADATA_OFFSET)) >= 0;
        }
        if (status == Layout.STATUS_NOT_SET && !p.skipUncommitted) {
            throw new IllegalStateException("mappedbus: record at " + pos + " in " + p.path
                    + " is uncommitted inside a range planned as settled");
        }
        if (status != Layout.STATUS_ROLLED_BACK && status != Layout.STATUS_NOT_SET) {
            throw BusScan.invalidStatus(p.path, pos, status, p.recordSize);
        }
        return false;
    }

    /** Payload length of a trimmed payload column: the metadata, checked against the record size. */
    final int trimmedLength(int base) throws CorruptBusException {
        int len = (int) INT.get(buf, base + Layout.METADATA_OFFSET);
        if (len < 0 || len > p.recordSize) {
            throw new CorruptBusException("record at position " + (chunkStart + base) + " in " + p.path
                    + " has length " + len + " outside 0.." + p.recordSize + " (trimPayload needs byte-array records)");
        }
        return len;
    }

    @Override
    public void close() {
        if (mem != null) {
            mem.close();
            mem = null;
        }
    }
}
