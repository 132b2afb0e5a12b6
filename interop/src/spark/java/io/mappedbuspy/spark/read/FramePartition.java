package io.mappedbuspy.spark.read;

import io.mappedbuspy.spark.*;

import io.mappedbuspy.CorruptBusException;
import io.mappedbuspy.Layout;
import io.mappedbuspy.internal.MemoryMappedFile;
import io.mappedbuspy.internal.TopicsFile;
import org.apache.spark.SparkContext;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.unsafe.types.UTF8String;

import java.io.IOException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * A range of whole messages {@code [start, end)} of one file of a framed bus (docs/design/frames.md), read by one task
 * as rows (position, topic, payload of any size). Planned by {@link #plan}: the driver walks the messages' first slots
 * (a message's count is final once its status is, so every walk skips the same) and cuts the ranges at first slots.
 * Every message in a range was settled when planned, so re-reading a partition gives the same rows.
 */
public final class FramePartition implements InputPartition {
    private static final long serialVersionUID = 1L;

    final String path;
    final long fileSize;
    final int recordSize;
    /** Global position of the file's offset 0 (a rolling bus's segment), 0 otherwise. */
    final long base;
    final long start;
    final long end;
    /** Topic names by id as the driver read them after its walk (every topic of a settled message is published). */
    final String[] topicNames;
    /** Topic ids delivered (sorted), or null for every message. */
    final int[] topicIds;
    final String preferredHost;

    FramePartition(String path, long fileSize, int recordSize, long base, long start, long end, String[] topicNames,
                   int[] topicIds, String preferredHost) {
        this.path = path;
        this.fileSize = fileSize;
        this.recordSize = recordSize;
        this.base = base;
        this.start = start;
        this.end = end;
        this.topicNames = topicNames;
        this.topicIds = topicIds;
        this.preferredHost = preferredHost;
    }

    @Override
    public String[] preferredLocations() {
        return preferredHost == null ? new String[0] : new String[] {preferredHost};
    }

    @Override
    public String toString() {
        return "FramePartition[" + path + " " + start + ".." + end + (base == 0 ? "" : " at " + base) + "]";
    }

    /** A range of whole messages {@code [start, end)} of one file, cut by the planning walk. */
    private record Range(long start, long end) { }

    /** Where the walk of one file ended: its partitions, and whether it stopped at an uncommitted message. */
    record Planned(List<FramePartition> parts, boolean stopped) { }

    /**
     * Plans one file: walks its messages from the first slot up to the limit (uncommitted=stop: up to the first
     * uncommitted message; wait: each waited for up to timeoutMs, then passed over locally by its count, or one slot),
     * cutting a partition every {@code recordsPerPartition} slots (or an even share) at a message's first slot.
     *
     * @param topics the topic names delivered (null: all), mapped to ids after the walk
     */
    static Planned plan(BusOptions o, String path, long fileSize, long base, String topicsFile, String[] topics)
            throws IOException {
        long slot = Layout.slotSize(o.recordSize);
        List<Range> cuts = new ArrayList<>();
        boolean stopped = false;
        long pos = Layout.FIRST_RECORD_OFFSET;
        try (MemoryMappedFile m = new MemoryMappedFile(path, fileSize, true)) {
            long usable = Math.min(fileSize, m.size());
            long limit = m.getLongAcquire(Layout.LIMIT_OFFSET);
            long allocated = Math.min(limit, usable);
            long slots = Math.max(0, (allocated - Layout.FIRST_RECORD_OFFSET) / slot);
            long per;
            if (o.recordsPerPartition > 0) {
                per = o.recordsPerPartition;
            } else if (o.numPartitions > 0) {
                per = Math.max(1, (slots + o.numPartitions - 1) / o.numPartitions);
            } else {
                int par = Math.max(1, SparkContext.getOrCreate().defaultParallelism());
                per = Math.max(4096, (slots + par - 1) / par);
            }
            long partStart = pos;
            while (pos <= usable - slot && pos < limit) {
                int status = m.getStatus(pos);
                if (status == Layout.STATUS_NOT_SET) {
                    if (!o.waitUncommitted) {
                        stopped = true;
                        break;
                    }
                    long deadline = System.nanoTime() + o.timeoutMs * 1_000_000L;
                    while ((status = m.getStatus(pos)) == Layout.STATUS_NOT_SET && System.nanoTime() - deadline < 0) {
                        try {
                            Thread.sleep(1);
                        } catch (InterruptedException e) {
                            Thread.currentThread().interrupt();
                            throw new IOException("interrupted while waiting for a commit", e);
                        }
                    }
                }
                long n;
                if (status == Layout.STATUS_COMMITTED) {
                    n = committedSlots(m, path, pos, fileSize, slot);
                } else if (status == Layout.STATUS_ROLLED_BACK || status == Layout.STATUS_NOT_SET) {
                    int meta = m.getIntAcquire(pos + Layout.METADATA_OFFSET);
                    n = Layout.frameMetaSlots(meta) >= 1 ? Layout.frameMetaSlots(meta) : 1;
                } else {
                    throw BusScan.invalidStatus(path, pos, status, o.recordSize);
                }
                if (pos > partStart && (pos - partStart) / slot >= per) {
                    cuts.add(new Range(partStart, pos));
                    partStart = pos;
                }
                pos += n * slot;
            }
            if (pos > partStart) {
                cuts.add(new Range(partStart, pos));
            }
        }
        String[] names = TopicsFile.names(java.nio.file.Path.of(topicsFile), false);
        int[] ids = topicIds(names, topics);
        String host = BusPartition.executorHost();
        List<FramePartition> parts = new ArrayList<>();
        for (Range c : cuts) {
            parts.add(new FramePartition(path, fileSize, o.recordSize, base, c.start(), c.end(), names, ids, host));
        }
        return new Planned(parts, stopped);
    }

    /** The ids of {@code topics} among {@code names} (by id), sorted; null when {@code topics} is (every message). */
    private static int[] topicIds(String[] names, String[] topics) {
        if (topics == null) {
            return null;
        }
        List<Integer> want = new ArrayList<>();
        for (int id = 1; id < names.length; id++) {
            if (names[id] != null && Arrays.asList(topics).contains(names[id])) {
                want.add(id);
            }
        }
        return want.stream().mapToInt(Integer::intValue).sorted().toArray();
    }

    /**
     * The partition of the messages {@code [start, end)} of one file (offsets in it, first slots), every one of them
     * settled (a stream's driver reader went past them: committed, or rolled back with its count final), delivering
     * {@code topics} (null: all). The topics file is read now: every topic of a committed message is in it.
     */
    public static FramePartition settled(BusOptions o, String path, long fileSize, long base, long start, long end,
                                         String[] topics) {
        String[] names;
        try {
            names = TopicsFile.names(java.nio.file.Path.of(o.topicsFile()), false);
        } catch (IOException e) {
            throw new java.io.UncheckedIOException("mappedbus: cannot read the topics of " + o.path + ": "
                    + e.getMessage(), e);
        }
        return new FramePartition(path, fileSize, o.recordSize, base, start, end, names, topicIds(names, topics),
                BusPartition.executorHost());
    }

    /** The slots of the committed message at pos, its meta and length checked. */
    static long committedSlots(MemoryMappedFile m, String path, long pos, long fileSize, long slot)
            throws CorruptBusException {
        int meta = m.getInt(pos + Layout.METADATA_OFFSET);
        long length = m.getLong(pos + Layout.PAYLOAD_OFFSET + Layout.FRAME_LENGTH_OFFSET);
        int n = Layout.frameMetaSlots(meta);
        long left = pos > fileSize - slot ? 0 : (fileSize - pos) / slot;
        if (n < 1 || n > left || length < 0 || length > n * slot - Layout.FRAME_PAYLOAD_OFFSET) {
            throw new CorruptBusException("mappedbus: framed message at position " + pos + " in " + path + " has meta "
                    + meta + " and length " + length + ": not a frame within the file (a bus without frames read as "
                    + "framed, a wrong recordSize, or a corrupt file)");
        }
        return n;
    }

    /** Reads a partition's messages as rows: position, topic, payload (the columns the scan kept). */
    static final class Reader implements PartitionReader<InternalRow> {
        private final FramePartition p;
        private final int[] kinds;
        private final long slot;
        private MemoryMappedFile mem;
        private long pos;
        private InternalRow row;

        Reader(BusReaderFactory f, FramePartition p) throws IOException {
            this.p = p;
            this.kinds = f.kinds;
            this.slot = Layout.slotSize(p.recordSize);
            this.pos = p.start;
            this.mem = new MemoryMappedFile(p.path, p.fileSize, true);
        }

        @Override
        public boolean next() throws IOException {
            while (pos < p.end && pos <= p.fileSize - slot) {
                long at = pos;
                int status = mem.getStatus(at);
                if (status != Layout.STATUS_COMMITTED) {
                    int meta = mem.getIntAcquire(at + Layout.METADATA_OFFSET);
                    pos += (Layout.frameMetaSlots(meta) >= 1 ? Layout.frameMetaSlots(meta) : 1) * slot;
                    continue;
                }
                pos += committedSlots(mem, p.path, at, p.fileSize, slot) * slot;
                int topic = mem.getInt(at + Layout.PAYLOAD_OFFSET + Layout.FRAME_TOPIC_OFFSET);
                if (p.topicIds != null && Arrays.binarySearch(p.topicIds, topic) < 0) {
                    continue;
                }
                Object[] values = new Object[kinds.length];
                for (int c = 0; c < kinds.length; c++) {
                    switch (kinds[c]) {
                        case BusReaderFactory.POSITION:
                            values[c] = p.base + at;
                            break;
                        case BusReaderFactory.TOPIC:
                            String name = topic > 0 && topic < p.topicNames.length ? p.topicNames[topic] : null;
                            if (topic != Layout.FRAME_TOPIC_NONE && name == null) {
                                throw new CorruptBusException("mappedbus: framed message at position " + at + " in "
                                        + p.path + " carries topic id " + topic + ", which its topics file does not name");
                            }
                            values[c] = name == null ? null : UTF8String.fromString(name);
                            break;
                        default: // the payload
                            int length = (int) mem.getLong(at + Layout.PAYLOAD_OFFSET + Layout.FRAME_LENGTH_OFFSET);
                            byte[] b = new byte[length];
                            mem.getBytes(at + Layout.FRAME_PAYLOAD_OFFSET, b, 0, length);
                            values[c] = b;
                    }
                }
                row = new GenericInternalRow(values);
                return true;
            }
            return false;
        }

        @Override
        public InternalRow get() {
            return row;
        }

        @Override
        public void close() {
            if (mem != null) {
                mem.close();
                mem = null;
            }
        }
    }
}
