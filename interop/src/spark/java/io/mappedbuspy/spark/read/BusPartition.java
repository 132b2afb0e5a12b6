package io.mappedbuspy.spark.read;

import io.mappedbuspy.Layout;
import org.apache.spark.SparkContext;
import org.apache.spark.SparkEnv;
import org.apache.spark.sql.connector.read.InputPartition;

import java.net.InetAddress;
import java.net.UnknownHostException;
import java.util.ArrayList;
import java.util.List;
import io.mappedbuspy.spark.BusOptions;

/**
 * A range of record slots {@code [start, end)} of one bus file, read by one task. Every slot in the range
 * was seen committed or rolled back by the driver when it planned the range (statuses never change after
 * that), so re-reading a partition always gives the same rows.
 */
public final class BusPartition implements InputPartition {
    private static final long serialVersionUID = 1L;

    final String path;
    final long fileSize;
    final int recordSize;
    /** Global position of the file's offset 0: a rolling bus's segment index times its size; 0 otherwise. */
    final long base;
    /** File offsets (in {@link #path}) of the first slot and past the last one. */
    final long start;
    final long end;
    /** True when the range may hold slots still uncommitted (uncommitted=wait): they are skipped. */
    final boolean skipUncommitted;
    /** Executor host name for Spark's locality (the node whose memory holds the bus). */
    final String preferredHost;
    /** InetAddress host name of the planning node, checked by the task (null: no check). */
    final String requiredHost;
    /**
     * The file planned: its bus id (from its metadata; null for a file without any), inode and device
     * (-1: not known). A task reads only a file with all three the same, so never another host's bus at
     * the same path, nor one recreated since planning.
     */
    final String busId;
    final long inode;
    final long device;

    BusPartition(String path, long fileSize, int recordSize, long base, long start, long end,
                 boolean skipUncommitted, String preferredHost, String requiredHost) {
        this(path, fileSize, recordSize, base, start, end, skipUncommitted, preferredHost, requiredHost,
                Identity.of(path, base != 0 || isSegment(path)));
    }

    BusPartition(String path, long fileSize, int recordSize, long base, long start, long end,
                 boolean skipUncommitted, String preferredHost, String requiredHost, Identity id) {
        this.busId = id.busId;
        this.inode = id.inode;
        this.device = id.device;
        this.path = path;
        this.fileSize = fileSize;
        this.recordSize = recordSize;
        this.base = base;
        this.start = start;
        this.end = end;
        this.skipUncommitted = skipUncommitted;
        this.preferredHost = preferredHost;
        this.requiredHost = requiredHost;
    }

    @Override
    public String[] preferredLocations() {
        return preferredHost == null ? new String[0] : new String[] {preferredHost};
    }

    static boolean isSegment(String path) {
        return Layout.segmentIndex(java.nio.file.Path.of(path).getFileName().toString()) >= 0;
    }

    /** What identifies a bus file: its bus's id, its inode and device. */
    static final class Identity {
        final String busId;
        final long inode;
        final long device;

        Identity(String busId, long inode, long device) {
            this.busId = busId;
            this.inode = inode;
            this.device = device;
        }

        /**
         * The identity of a bus file now: a single file's id from {@code PATH.meta} (when it describes this
         * inode), a rolling bus segment's from its directory's {@code bus.meta}.
         */
        static Identity of(String path, boolean segment) {
            java.nio.file.Path p = java.nio.file.Path.of(path);
            long ino = -1;
            long dev = -1;
            try {
                ino = ((Number) java.nio.file.Files.getAttribute(p, "unix:ino",
                        java.nio.file.LinkOption.NOFOLLOW_LINKS)).longValue();
                dev = ((Number) java.nio.file.Files.getAttribute(p, "unix:dev",
                        java.nio.file.LinkOption.NOFOLLOW_LINKS)).longValue();
            } catch (java.io.IOException | RuntimeException e) {
                return new Identity(null, -1, -1); // gone or unreadable: opening it reports that
            }
            String id = null;
            try {
                if (segment) {
                    io.mappedbuspy.internal.BusMeta m = io.mappedbuspy.internal.BusMeta.read(p.resolveSibling(Layout.META_FILE), false);
                    id = m == null ? null : m.id();
                } else {
                    io.mappedbuspy.internal.BusMeta m = io.mappedbuspy.internal.BusMeta.read(io.mappedbuspy.internal.BusMeta.metaPath(path), false);
                    id = m != null && m.kind() == io.mappedbuspy.BusKind.SINGLE && m.inode() == ino ? m.id() : null;
                }
            } catch (java.io.IOException | RuntimeException e) {
                id = null;
            }
            return new Identity(id, ino, dev);
        }
    }

    /**
     * Fails unless the file a task opened is the one planned (see {@link #busId}).
     *
     * @param opened the mapping the task opened at {@link #path}
     * @throws java.io.IOException naming the path, the host and what differs
     */
    void checkIdentity(io.mappedbuspy.internal.MemoryMappedFile opened) throws java.io.IOException {
        if (inode < 0) {
            return;
        }
        if (!opened.path().equals(path)) {
            // The segment moved to its bus's archive since planning (ArchiveFiles.mapForRead): the same bytes; its
            // bus is the one planned if the hot directory's bus.meta still holds the planned id.
            io.mappedbuspy.internal.BusMeta m = io.mappedbuspy.internal.BusMeta.read(
                    java.nio.file.Path.of(path).resolveSibling(Layout.META_FILE), false);
            if (busId != null && (m == null || !busId.equals(m.id()))) {
                throw new java.io.IOException("mappedbus: " + path + " moved to its archive (" + opened.path()
                        + ") and the bus is no longer the one this task was planned on (bus id "
                        + (m == null ? null : m.id()) + ", planned " + busId + "); nothing was read");
            }
            return;
        }
        Identity now = Identity.of(path, base != 0 || isSegment(path));
        String why = null;
        if (opened.inode() != inode || opened.device() != device) {
            why = "inode/device " + opened.inode() + "/" + opened.device() + ", planned " + inode + "/" + device;
        } else if (busId != null && !busId.equals(now.busId)) {
            why = "bus id " + now.busId + ", planned " + busId;
        }
        if (why != null) {
            throw new java.io.IOException("mappedbus: " + path + " on host " + localHostName() + " (executor host "
                    + executorHost() + ") is not the bus "
                    + "this task was planned on (" + why + "): another host's bus at the same path, or a bus "
                    + "recreated since planning; nothing was read");
        }
    }

    long records() {
        return (end - start) / Layout.slotSize(recordSize);
    }

    @Override
    public String toString() {
        return "BusPartition[" + path + " " + start + ".." + end + (base == 0 ? "" : " at " + base) + "]";
    }

    /**
     * Splits {@code [start, end)} into partitions by record count.
     *
     * @param o        options (recordsPerPartition, numPartitions, checkHost)
     * @param path     the file (a rolling bus's segment: partitions never span segments)
     * @param fileSize the logical file size
     * @param base     the global position of the file's offset 0
     * @param start    first slot offset
     * @param end      offset past the last slot
     * @param skipUncommitted see {@link #skipUncommitted}
     * @return the partitions, in file order (none for an empty range)
     */
    public static BusPartition[] split(BusOptions o, String path, long fileSize, long base, long start, long end,
                                boolean skipUncommitted) {
        return split(o, path, fileSize, base, start, end, skipUncommitted, false);
    }

    /**
     * As {@link #split(BusOptions, String, long, long, long, long, boolean)}; {@code local}: planned by a
     * task on its own host (per-host reads), as one partition per file, with no host to prefer or check.
     */
    public static BusPartition[] split(BusOptions o, String path, long fileSize, long base, long start, long end,
                                boolean skipUncommitted, boolean local) {
        long slot = Layout.slotSize(o.recordSize);
        long n = (end - start) / slot;
        if (n <= 0) {
            return new BusPartition[0];
        }
        long per;
        if (local) {
            per = n;
        } else if (o.numPartitions > 0) {
            per = (n + o.numPartitions - 1) / o.numPartitions;
        } else if (o.recordsPerPartition > 0) {
            per = o.recordsPerPartition;
        } else {
            int par = Math.max(1, SparkContext.getOrCreate().defaultParallelism());
            per = Math.max(4096, (n + par - 1) / par);
        }
        String preferred = local ? null : executorHost();
        String required = o.checkHost && !local ? localHostName() : null;
        List<BusPartition> parts = new ArrayList<>();
        for (long k = 0; k < n; k += per) {
            long s = start + k * slot;
            long e = start + Math.min(n, k + per) * slot;
            parts.add(new BusPartition(path, fileSize, o.recordSize, base, s, e, skipUncommitted, preferred, required));
        }
        return parts.toArray(new BusPartition[0]);
    }

    /** The host name Spark's scheduler knows this (driver) node's executor by, or null. */
    public static String executorHost() {
        SparkEnv env = SparkEnv.get();
        return env == null ? null : env.blockManager().blockManagerId().host();
    }

    /** This machine's host name, for the same-node check. */
    public static String localHostName() {
        try {
            return InetAddress.getLocalHost().getHostName();
        } catch (UnknownHostException e) {
            return "localhost";
        }
    }

    /**
     * Fails when a task runs on another machine than the one that planned it: the bus is a node-local
     * memory-mapped file, and a file at the same path elsewhere is a different bus.
     *
     * @param path         bus path, for the message
     * @param requiredHost host name of the planning node, or null to skip the check
     * @throws java.io.IOException on another node
     */
    public static void checkHost(String path, String requiredHost) throws java.io.IOException {
        if (requiredHost == null) {
            return;
        }
        String here = localHostName();
        if (!here.equals(requiredHost)) {
            throw new java.io.IOException("mappedbus: bus " + path + " is node-local to " + requiredHost
                    + " but this task runs on " + here + " (run executors on the bus node and raise spark.locality.wait; "
                    + "to read every host's own bus, use option hosts: a per-host read)");
        }
    }
}
