package io.mappedbuspy.internal;

import io.mappedbuspy.*;

import java.nio.ByteBuffer;

/**
 * The steps of the frame protocol on a mapped file (docs/design/frames.md; layout in {@link Layout}, FRAME_*), written
 * once for the writers ({@link MappedBusWriter}, the Spark connector), the readers ({@code io.mappedbuspy.SlotScan})
 * and the writer that takes over a dead one's claim. Positions are offsets in the file; the caller checked they lie
 * on the grid.
 * <p>Internal: not a supported API. Public only for the library's own packages (io.mappedbuspy and the
 * Spark connector); it may change in any release.
 */
public final class Frames {
    private Frames() {
    }

    /** A framed bus's record size: a multiple of {@link Layout#FRAME_RECORD_ALIGN}, at least the frame header. */
    public static void checkRecordSize(int recordSize) {
        if (recordSize < Layout.FRAME_MIN_RECORD_SIZE || recordSize % Layout.FRAME_RECORD_ALIGN != 0) {
            throw new IllegalArgumentException("a framed bus's recordSize must be a multiple of "
                    + Layout.FRAME_RECORD_ALIGN + " and at least " + Layout.FRAME_MIN_RECORD_SIZE + ", got " + recordSize);
        }
    }

    /** The slots of the file from {@code pos} on (pos a slot boundary). */
    public static long slotsLeft(long pos, long fileSize, long slot) {
        return pos > fileSize - slot ? 0 : (fileSize - pos) / slot;
    }

    /**
     * Steps 5 to 8 of the writer protocol for the {@code n} slots reserved at {@code pos}: the count (CAS of the meta
     * from 0), the frame header, the payload (from {@code src} at {@code offset}, or from {@code buf}'s remaining
     * bytes when {@code src} is null), then the commit (CAS of the status 0 -> 1).
     *
     * @return true if committed; false if a reader had rolled the message back first (nothing more was written
     *         after a lost count CAS)
     */
    public static boolean fill(MemoryMappedFile m, long pos, long n, int length, int topic, int flags, byte[] src, int offset,
                        ByteBuffer buf) {
        if (n == 1) {
            // One slot: a plain store will do, as a reader's rollback writes the same count (docs/design/frames.md).
            m.putIntInRecord(pos + Layout.METADATA_OFFSET, Layout.FRAME_META_FLAG | 1);
        } else if (!m.compareAndSetInt(pos + Layout.METADATA_OFFSET, 0, Layout.frameMeta(n))) {
            return false; // a reader gave the message up before its count was written
        }
        long h = pos + Layout.PAYLOAD_OFFSET;
        m.putLong(h + Layout.FRAME_LENGTH_OFFSET, length);
        m.putInt(h + Layout.FRAME_TOPIC_OFFSET, topic);
        m.putInt(h + Layout.FRAME_FLAGS_OFFSET, flags);
        if (src != null) {
            m.putBytes(pos + Layout.FRAME_PAYLOAD_OFFSET, src, offset, length);
        } else {
            m.putBytes(pos + Layout.FRAME_PAYLOAD_OFFSET, buf);
        }
        return m.commitInRecord(pos);
    }

    /**
     * A reservation at {@code pos} that runs past the end of the file: the slots inside it become a padding, a
     * rolled-back frame of the slots left (meta CAS, then status CAS 0 -> 2).
     */
    public static void pad(MemoryMappedFile m, long pos, long fileSize, long slot) {
        long left = slotsLeft(pos, fileSize, slot);
        m.compareAndSetInt(pos + Layout.METADATA_OFFSET, 0, Layout.frameMeta(Math.min(left, Layout.FRAME_MAX_SLOTS)));
        m.casStatus(pos, Layout.STATUS_NOT_SET, Layout.STATUS_ROLLED_BACK);
    }

    /**
     * Gives up the uncommitted message at {@code pos}: its count set to {@code k} slots if still unwritten, then its
     * status 0 -> 2. Every reader then skips by the meta, the same for all.
     *
     * @return true if this call rolled it back (false: the writer committed, or another reader rolled it back)
     */
    public static boolean giveUp(MemoryMappedFile m, long pos, long k) {
        m.compareAndSetInt(pos + Layout.METADATA_OFFSET, 0, Layout.frameMeta(Math.max(1, Math.min(k,
                Layout.FRAME_MAX_SLOTS))));
        return m.casStatus(pos, Layout.STATUS_NOT_SET, Layout.STATUS_ROLLED_BACK);
    }

    /** The slots a rolled-back frame (status 2) takes: its count, or 1 when the meta holds none. */
    public static long skipSlots(int meta) {
        int n = Layout.frameMetaSlots(meta);
        return n >= 1 ? n : 1;
    }

    /**
     * The slots of the committed frame at {@code pos} whose meta is {@code meta} and length {@code length}, checked:
     * a frame's flag and count, within the file, the length within its slots.
     *
     * @throws CorruptBusException naming the position otherwise
     */
    public static long committedSlots(String path, long pos, int meta, long length, long fileSize, long slot)
            throws CorruptBusException {
        int n = Layout.frameMetaSlots(meta);
        if (n < 1 || n > slotsLeft(pos, fileSize, slot)) {
            throw new CorruptBusException("framed message at position " + pos + " in " + path + " has metadata "
                    + meta + ": not a frame of 1.." + slotsLeft(pos, fileSize, slot) + " slots (a bus without frames"
                    + " read as framed, a wrong recordSize, or a corrupt file)");
        }
        if (length < 0 || length > n * slot - Layout.FRAME_PAYLOAD_OFFSET) {
            throw new CorruptBusException("framed message at position " + pos + " in " + path + " has length "
                    + length + " outside 0.." + (n * slot - Layout.FRAME_PAYLOAD_OFFSET) + " of its " + n + " slots"
                    + " (a corrupt file)");
        }
        return n;
    }
}
