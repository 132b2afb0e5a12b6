package io.mappedbuspy.internal;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.NoSuchFileException;
import java.nio.file.NotDirectoryException;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.locks.LockSupport;
import io.mappedbuspy.BusReplacedException;
import io.mappedbuspy.BusTruncatedException;
import io.mappedbuspy.Layout;

/**
 * The writers' watch (Python: {@code _watch.h}): is the path still the file this writer writes? A writer whose
 * bus file is removed or replaced would go on writing into the orphaned file, every record after that lost to
 * all readers; a system call per write to look is too dear, so one daemon thread per JVM looks for all writers:
 * every {@link #INTERVAL_NS} it reads each watched path's inode, device and size (links not followed) and marks
 * the entry {@link State#REPLACED} when the path names no file or another one, {@link State#SHRUNK} when the
 * file is shorter than the mapping. A writer loads its entry's state once per write (a volatile load, a plain
 * load on x86) and throws from then on.
 *
 * <p>A rolling bus's segment is watched only while it has room (its limit at or below its last slot): retention
 * may remove a full segment a writer still maps, whose next write must roll, not fail. The thread runs while
 * something is watched and ends with the last entry.
 * <p>Internal: not a supported API. Public only for the library's own packages (io.mappedbuspy and the
 * Spark connector); it may change in any release.
 */
public final class FileWatch {
    /** Nanoseconds between the watch's looks: a write starting this long (plus one look) after the change throws. */
    static final long INTERVAL_NS = 1_000_000;

    /** What the watch found. */
    enum State { INTACT, REPLACED, SHRUNK }

    /** One watched mapping; {@link #state} is what its writer loads on every write. */
    public static final class Entry {
        final String path;
        private final MemoryMappedFile mem;
        private final long last;          // a segment: full once the limit passes this; -1: not a segment
        private volatile State state = State.INTACT;
        private boolean closed;           // under the entry's monitor: the watch reads the limit only before

        private Entry(String path, MemoryMappedFile mem, long last) {
            this.path = path;
            this.mem = mem;
            this.last = last;
        }

        /** The state now: one volatile load. */
        State state() {
            return state;
        }

        /** Throws if the watch found the file removed, replaced or shrunk. */
        public void check() {
            State s = state;
            if (s != State.INTACT) {
                throw failure(s);
            }
        }

        RuntimeException failure(State s) {
            if (s == State.SHRUNK) {
                return new BusTruncatedException(path + " is shorter than this process's mapping (truncated while "
                        + "in use): the bus is gone, nothing more is written to it", null);
            }
            return new UncheckedIOException(new BusReplacedException(path + " was removed or replaced while this "
                    + "process wrote to it (its path names no file or another one): records written to the old "
                    + "file would reach no reader, so nothing more is written"));
        }

        /** Stops watching; before the mapping is unmapped (the watch reads a segment's limit). */
        public void close() {
            synchronized (this) {
                closed = true;
            }
            ENTRIES.remove(this);
        }

        private void look() {
            State found = State.INTACT;
            try {
                Map<String, Object> a = Files.readAttributes(Paths.get(path), "unix:ino,dev,size",
                        LinkOption.NOFOLLOW_LINKS);
                if ((Long) a.get("ino") != mem.inode() || (Long) a.get("dev") != mem.device()) {
                    found = State.REPLACED;
                } else if ((Long) a.get("size") < mem.size()) {
                    found = State.SHRUNK;
                }
            } catch (NoSuchFileException | NotDirectoryException e) {
                found = State.REPLACED;
            } catch (IOException | RuntimeException e) {
                return; // cannot tell (permissions, a file system without unix attributes): no verdict
            }
            if (found == State.INTACT) {
                return;
            }
            synchronized (this) {
                if (closed) {
                    return;
                }
                if (found == State.REPLACED && last >= 0
                        && mem.getLongAcquire(Layout.LIMIT_OFFSET) > last) {
                    return; // a full segment: retention's to remove, its writer rolls
                }
            }
            state = found;
        }
    }

    /** What a writer that is not open holds: never watched, always intact. */
    public static final Entry NONE = new Entry("", null, -1);

    private static final Map<Entry, Boolean> ENTRIES = new ConcurrentHashMap<>();
    private static Thread thread; // under FileWatch.class: the watch's thread while one runs

    private FileWatch() {
    }

    /**
     * Watches {@code mem}, the file at {@code path}.
     *
     * @param path the bus file's path
     * @param mem  its mapping, opened
     * @param last for a rolling bus's segment its last slot's offset (watched only while the limit is at or
     *             below it); -1 for a single-file bus
     * @return the entry its writer loads and closes
     */
    public static Entry watch(String path, MemoryMappedFile mem, long last) {
        Entry e = new Entry(path, mem, last);
        ENTRIES.put(e, Boolean.TRUE);
        synchronized (FileWatch.class) {
            if (thread == null) {
                thread = new Thread(FileWatch::run, "mappedbus-file-watch");
                thread.setDaemon(true);
                thread.start();
            }
        }
        return e;
    }

    private static void run() {
        while (true) {
            synchronized (FileWatch.class) {
                if (ENTRIES.isEmpty()) {
                    thread = null;
                    return;
                }
            }
            for (Entry e : ENTRIES.keySet()) {
                if (e.state == State.INTACT) {
                    e.look();
                }
            }
            LockSupport.parkNanos(INTERVAL_NS);
        }
    }

    /**
     * A file's identity and version (device, inode, size, mtime; links not followed), or null if it cannot be had
     * (gone, no unix attributes): a rolling reader reads {@code bus.meta} again only when it changed.
     */
    static Object key(Path p) {
        try {
            Map<String, Object> a = Files.readAttributes(p, "unix:dev,ino,size,lastModifiedTime",
                    LinkOption.NOFOLLOW_LINKS);
            return List.of(a.get("dev"), a.get("ino"), a.get("size"), a.get("lastModifiedTime"));
        } catch (IOException | UnsupportedOperationException e) {
            return null;
        }
    }

    /** The metadata file at p, or null if there is none (a rolling reader's look at its bus.meta). */
    static BusMeta readMeta(Path p, boolean allowForeign) throws IOException {
        try {
            return BusMeta.read(p, allowForeign);
        } catch (NoSuchFileException e) {
            return null;
        }
    }
}
