package io.mappedbuspy.internal;

import io.mappedbuspy.*;

import java.io.IOException;
import java.nio.channels.FileChannel;
import java.nio.file.LinkOption;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;

/**
 * A {@link RollingBusWriter}'s durability (docs/design/journal.md, "Sync policies"): {@link #sync()} sends to the disk
 * every segment the writer wrote since the last sync and their time indexes, the consumers' registry and the work
 * groups' files ({@code fdatasync}), then the bus's
 * directory and its index directory ({@code fsync}: the segments and index files made or renamed there). It works on
 * descriptors of its own, opened for each sync, so the policies' thread never touches the writer's mappings: a
 * segment gone meanwhile (moved to the archive, whose archiver syncs its copy; or removed by retention) is skipped.
 * Under {@link SyncPolicy#SEGMENT} a full segment is synced when the writer rolls out of it, under
 * {@link SyncPolicy#INTERVAL} everything every interval: both on one daemon thread of this writer, off its writes. A
 * failure there is kept and thrown by the next {@link #sync()} (or {@link #close()}'s caller's sync).
 * <p>Internal: not a supported API. Public only for the library's own packages (io.mappedbuspy and the
 * Spark connector); it may change in any release.
 */
public final class WriterSync implements AutoCloseable {
    private final Path dir;
    private final SyncPolicy policy;
    private final long intervalNs;
    // The segment the writer writes now (set at its open and at every roll).
    private volatile long current;
    // The first segment written since the last sync (guarded by this).
    private long from;
    private ScheduledExecutorService thread;
    private volatile IOException failed;
    /** sync() calls completed, for tests and the benchmark. */
    private volatile long syncs;

    public WriterSync(Path dir, SyncPolicy policy, long intervalNs, long segment) {
        this.dir = dir;
        this.policy = policy;
        this.intervalNs = intervalNs;
        this.current = segment;
        this.from = segment;
        if (policy == SyncPolicy.INTERVAL) {
            thread().scheduleWithFixedDelay(this::syncQuietly, intervalNs, intervalNs, TimeUnit.NANOSECONDS);
        }
    }

    private ScheduledExecutorService thread() {
        if (thread == null) {
            thread = Executors.newSingleThreadScheduledExecutor(r -> {
                Thread t = new Thread(r, "mappedbus-sync " + dir.getFileName());
                t.setDaemon(true);
                return t;
            });
        }
        return thread;
    }

    /** The writer moved from segment {@code full} (full now) to {@code segment}. */
    public void rolled(long full, long segment) {
        current = segment;
        if (policy == SyncPolicy.SEGMENT) {
            thread().execute(() -> {
                try {
                    synchronized (this) {
                        force(dir.resolve(Layout.segmentName(full)));
                        force(TimeIndex.path(dir, full));
                        forceDirs();
                    }
                } catch (IOException e) {
                    failed = e;
                }
            });
        }
    }

    /**
     * Every segment written since the last sync, their indexes, then the directories, to the disk.
     *
     * @throws IOException if a file or directory cannot be synced (or the policy's thread failed to)
     */
    public void sync() throws IOException {
        IOException e = failed;
        if (e != null) {
            failed = null;
            throw new IOException("mappedbus: an earlier sync of " + dir + " on the writer's sync thread failed: " + e,
                    e);
        }
        synchronized (this) {
            long to = current;
            for (long k = from; k <= to; k++) {
                force(dir.resolve(Layout.segmentName(k)));
                force(TimeIndex.path(dir, k));
            }
            forceSideFiles();
            forceDirs();
            from = to; // the current one again next time: it fills on
            syncs++;
        }
    }

    private void syncQuietly() {
        try {
            sync();
        } catch (IOException e) {
            failed = e;
        }
    }

    // The consumers' registry and the work groups' files, memory-mapped side files the bus may have (docs/journal.md,
    // "Durability": they follow the same rules as the segments).
    private void forceSideFiles() throws IOException {
        force(dir.resolve(Layout.CONSUMERS_FILE));
        try (java.nio.file.DirectoryStream<Path> groups = java.nio.file.Files.newDirectoryStream(
                dir.resolve(Layout.GROUP_DIR), "*" + Layout.GROUP_SUFFIX)) {
            for (Path g : groups) {
                force(g);
            }
        } catch (NoSuchFileException e) {
            // no work group on this bus
        }
    }

    private void forceDirs() throws IOException {
        forceDir(dir);
        forceDir(dir.resolve(Layout.TIME_INDEX_DIR));
    }

    // fdatasync of a file, through a descriptor of our own; nothing if it is gone.
    private static void force(Path p) throws IOException {
        try (FileChannel ch = FileChannel.open(p, StandardOpenOption.READ, LinkOption.NOFOLLOW_LINKS)) {
            ch.force(false);
        } catch (NoSuchFileException e) {
            // moved to the archive (its archiver synced it there) or removed by retention
        }
    }

    // fsync of a directory (its entries: files made, linked, renamed or removed there); nothing if it is gone.
    public static void forceDir(Path d) throws IOException {
        try (FileChannel ch = FileChannel.open(d, StandardOpenOption.READ)) {
            ch.force(true);
        } catch (NoSuchFileException e) {
            // no index directory yet
        }
    }

    /** Stops the policy's thread (after a sync under way). */
    @Override
    public void close() {
        ScheduledExecutorService t = thread;
        thread = null;
        if (t != null) {
            t.shutdown();
            try {
                t.awaitTermination(10, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
    }

    public SyncPolicy policy() {
        return policy;
    }

    public long intervalNs() {
        return intervalNs;
    }
}
