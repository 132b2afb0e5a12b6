package io.mappedbuspy.internal;

import java.io.IOException;
import java.nio.file.Path;
import java.util.TreeMap;

/**
 * What an archiver knows of its archive's segments, for the archive's retention (Python's {@code ArchiveListing} in
 * {@code mappedbus_py/rolling/archive.py}): the archive listed in full at most every {@code everyNs} (and at the first
 * use), and between, the archiver's own moves and removals applied. Only the holder of the archiver's lock adds or
 * removes archived segments; a file removed by hand is seen at the next full listing. A look then costs no listing of
 * an archive of any length. Not thread-safe: its archiver's thread uses it.
 */
public final class ArchiveListing {
    private final ArchiveFiles.Config cfg;
    private final long everyNs;
    private TreeMap<Long, ArchiveFiles.Archived> segments; // as of the last listing, with the changes since
    private long listNextNs;                                 // System.nanoTime of the next full listing
    private boolean listed;

    /**
     * @param cfg     the archive
     * @param everyNs the longest time between two full listings
     */
    public ArchiveListing(ArchiveFiles.Config cfg, long everyNs) {
        this.cfg = cfg;
        this.everyNs = everyNs;
    }

    /**
     * The archive as it stands after this archiver moved {@code moved} since the last call.
     *
     * @param moved the segments moved since
     * @param nowNs System.nanoTime now
     * @return the archived segments by index (the caller removes from it only through {@link #removed})
     * @throws IOException if the archive cannot be listed
     */
    public TreeMap<Long, ArchiveFiles.Archived> current(long[] moved, long nowNs) throws IOException {
        if (!listed || nowNs - listNextNs >= 0) {
            segments = ArchiveFiles.list(cfg.dir());
            listNextNs = nowNs + everyNs;
            listed = true;
        } else {
            for (long k : moved) {
                Path p = cfg.dir().resolve(ArchiveFiles.name(k, cfg.compress()));
                segments.put(k, new ArchiveFiles.Archived(k, p, cfg.compress()));
            }
        }
        return segments;
    }

    /**
     * The archive's retention removed {@code indices}.
     *
     * @param indices the segments removed
     */
    public void removed(long[] indices) {
        for (long i : indices) {
            segments.remove(i);
        }
    }
}
