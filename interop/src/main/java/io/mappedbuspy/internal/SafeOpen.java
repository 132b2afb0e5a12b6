package io.mappedbuspy.internal;

import java.io.IOException;
import java.io.InterruptedIOException;
import java.nio.channels.FileChannel;
import java.nio.channels.FileLock;
import java.nio.channels.OverlappingFileLockException;
import java.nio.file.AccessDeniedException;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.FileSystemException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFileAttributeView;
import java.nio.file.attribute.PosixFilePermission;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.Map;
import java.util.Set;
import io.mappedbuspy.BusLockTimeoutException;
import io.mappedbuspy.Layout;
import io.mappedbuspy.UnsafeBusFileException;

/**
 * Opening a bus file safely, as {@code docs/files-and-rolling.md} says: never through a symbolic link, nothing but
 * regular files (checked before opening, so a FIFO never blocks), owner and mode checked ({@link BusFiles}),
 * created only by writers (exclusively, with exact permissions), under a bounded open lock (the POSIX record lock
 * the Python side's {@code fcntl} takes; its holder named from {@code /proc/locks} when it is not let go). A writer
 * grows the file to the mapping size ({@link DiskSpace}), never shrinks it; a reader never creates or grows one. A
 * path replaced while it is being opened is opened again.
 * <p>Internal: not a supported API.
 */
final class SafeOpen {
    /** Serialises the open lock among the threads of this JVM (see {@link #lockFile}). */
    private static final Object OPEN_LOCK = new Object();

    private SafeOpen() {
    }

    /** An empty file found by an open that may not grow it: a bus being created. */
    private static final class NotYet extends RuntimeException {
        private static final long serialVersionUID = 1L;

        NotYet() {
            super(null, null, false, false);
        }
    }

    /** Restart of an open whose path changed under it. */
    private static final class Retry extends RuntimeException {
        private static final long serialVersionUID = 1L;

        Retry() {
            super(null, null, false, false);
        }
    }

    /**
     * Opens and maps {@code m.path()} into {@code m}, as the options say.
     *
     * @param m        the instance to map the file into (its path and read-only flag are set)
     * @param fileSize logical file size; the mapping is this rounded up to {@link Layout#PAGE_SIZE}
     * @param o        how to open it
     * @throws IOException if the file cannot be opened, grown or mapped ({@link UnsafeBusFileException} if it is
     *                     not to be trusted, {@link BusLockTimeoutException} if the open lock is not let go)
     */
    static void open(MemoryMappedFile m, long fileSize, MemoryMappedFile.OpenOptions o) throws IOException {
        String path = m.path();
        long want = Layout.mappedSize(fileSize);
        Path p = Paths.get(path);
        long emptyDeadline = 0;
        for (int attempt = 0; ; attempt++) {
            boolean made = false;
            FileChannel ch = null;
            long inode = 0;
            long device = 0;
            try {
                FileId id = statTrusted(p, o.allowForeign); // refuses links, FIFOs, devices before opening
                if (id == null) {
                    if (!o.create) {
                        throw new NoSuchFileException(path, null, "no such bus file (readers never create one)");
                    }
                    ch = createExclusive(p, o.perms);
                    if (ch == null) {
                        continue; // another process created it first: open theirs
                    }
                    made = true;
                } else {
                    ch = openExisting(p, o.readOnly);
                }
                FileId opened = statTrusted(p, o.allowForeign);
                if (opened == null || (id != null && !opened.equals(id))) {
                    throw new Retry(); // replaced between the checks and the open
                }
                inode = opened.inode();
                device = opened.device();
                m.identify(inode, device);
                FileLock lock = o.lock ? lockFile(ch, path, o, inode) : null;
                try {
                    FileId now = statTrusted(p, o.allowForeign);
                    if (now == null || !now.equals(opened)) {
                        throw new Retry(); // the creator removed a failed file meanwhile
                    }
                    mapLocked(m, ch, fileSize, want, o);
                } finally {
                    if (lock != null && lock.isValid()) {
                        lock.release();
                    }
                }
                m.opened(ch, made);
                return;
            } catch (NotYet r) {
                // A writer created the file and has not sized it yet (it creates, then locks): not a bus
                // yet. Wait for it, bounded like the lock, as the Python reader does.
                close0(ch);
                long now = System.nanoTime();
                if (emptyDeadline == 0) {
                    emptyDeadline = now + o.lockTimeoutMs * 1_000_000L;
                }
                if (now - emptyDeadline >= 0) {
                    throw new NoSuchFileException(path, null, "an empty file, still not made a bus by any writer after "
                            + o.lockTimeoutMs + " ms (readers never create one)");
                }
                attempt--;
                try {
                    Thread.sleep(1);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    throw new InterruptedIOException("interrupted while waiting for " + path + " to become a bus");
                }
            } catch (Retry r) {
                close0(ch);
                if (made) {
                    deleteIfSame(p, inode, device);
                }
                if (attempt >= 100) {
                    throw new IOException("cannot open " + path + ": it keeps being replaced while opening");
                }
            } catch (IOException | RuntimeException | Error e) {
                m.dropWindows();
                close0(ch);
                if (made) {
                    deleteIfSame(p, inode, device);
                    try {
                        Files.deleteIfExists(BusMeta.metaPath(path));
                    } catch (IOException ignored) {
                        // best effort: the metadata of a file that no longer exists is ignored anyway
                    }
                }
                throw e;
            }
        }
    }

    private static void mapLocked(MemoryMappedFile m, FileChannel ch, long fileSize, long want,
                                  MemoryMappedFile.OpenOptions o) throws IOException {
        String path = m.path();
        if (o.beforeGrow != null) {
            o.beforeGrow.run(m);
        }
        long have = ch.size();
        long mapLen = want;
        if (have < want) {
            if (o.grow) {
                DiskSpace.checkSpace(path, want - have);
                try {
                    if (o.lock) {
                        DiskSpace.preallocate(ch, path, have, want); // serialised by the open lock
                    } else {
                        DiskSpace.growShared(ch, path, want); // racing openers: never a byte written over
                    }
                } catch (IOException e) {
                    throw new IOException("cannot grow " + path + " to " + want + " bytes: " + e.getMessage(), e);
                }
            } else if (have == 0) {
                throw new NotYet();
            } else if (o.allowShort) {
                mapLen = have;
            } else {
                throw new IOException(path + " is " + have + " bytes, shorter than the " + want
                        + " bytes fileSize=" + fileSize + " maps; a reader never grows a bus file "
                        + "(wrong fileSize, or no writer has opened the bus yet)");
            }
        }
        m.mapWindows(ch, mapLen);
        if (o.afterMap != null) {
            o.afterMap.run(m);
        }
    }

    /** A file's identity: its st_ino and st_dev. */
    private record FileId(long inode, long device) { }

    // The identity of a trusted regular file at p (links are not followed), or null if there is none.
    private static FileId statTrusted(Path p, boolean allowForeign) throws IOException {
        Map<String, Object> a;
        try {
            a = Files.readAttributes(p, "unix:ino,dev", LinkOption.NOFOLLOW_LINKS);
        } catch (NoSuchFileException e) {
            return null;
        }
        try {
            BusFiles.checkTrusted(p, allowForeign);
        } catch (NoSuchFileException e) {
            return null;
        }
        return new FileId((Long) a.get("ino"), (Long) a.get("dev"));
    }

    // A new file, exactly `mode` (rw-------) whatever the umask; null if it exists already.
    private static FileChannel createExclusive(Path p, String mode) throws IOException {
        Set<PosixFilePermission> perms = PosixFilePermissions.fromString(mode);
        FileChannel ch;
        try {
            ch = FileChannel.open(p, Set.of(StandardOpenOption.CREATE_NEW, StandardOpenOption.READ,
                    StandardOpenOption.WRITE, LinkOption.NOFOLLOW_LINKS), PosixFilePermissions.asFileAttribute(perms));
        } catch (FileAlreadyExistsException e) {
            return null;
        } catch (NoSuchFileException e) {
            throw new NoSuchFileException(p.toString(), null, "cannot create the bus file: no such directory");
        } catch (AccessDeniedException e) {
            throw new AccessDeniedException(p.toString(), null, "cannot create the bus file: permission denied");
        }
        try {
            Files.getFileAttributeView(p, PosixFileAttributeView.class, LinkOption.NOFOLLOW_LINKS)
                    .setPermissions(perms);
        } catch (IOException | RuntimeException e) {
            close0(ch);
            throw e;
        }
        return ch;
    }

    private static FileChannel openExisting(Path p, boolean readOnly) throws IOException {
        try {
            return readOnly ? FileChannel.open(p, StandardOpenOption.READ, LinkOption.NOFOLLOW_LINKS)
                    : FileChannel.open(p, StandardOpenOption.READ, StandardOpenOption.WRITE, LinkOption.NOFOLLOW_LINKS);
        } catch (FileSystemException e) {
            if (e.getMessage() != null && e.getMessage().contains("Too many levels of symbolic links")) {
                throw new UnsafeBusFileException(p + " is a symbolic link: bus files are never opened through links");
            }
            throw e;
        }
    }

    // The POSIX record lock (what the Python side's fcntl takes), polled up to the lock timeout. A file
    // lock is held per JVM, not per thread, so threads of one JVM take turns on a monitor first instead
    // of failing with OverlappingFileLockException.
    private static FileLock lockFile(FileChannel ch, String path, MemoryMappedFile.OpenOptions o, long inode)
            throws IOException {
        long deadline = System.nanoTime() + o.lockTimeoutMs * 1_000_000L;
        long sleepMs = 1;
        synchronized (OPEN_LOCK) {
            for (;;) {
                FileLock lock;
                try {
                    lock = o.lockOffset < 0 ? ch.tryLock(0, Long.MAX_VALUE, !o.exclusive)
                            : ch.tryLock(o.lockOffset, 1, !o.exclusive);
                } catch (OverlappingFileLockException e) {
                    lock = null; // held by this JVM outside this monitor (a rolling bus's own lock): wait
                }
                if (lock != null) {
                    return lock;
                }
                if (System.nanoTime() - deadline >= 0) {
                    long pid = lockHolder(inode);
                    throw new BusLockTimeoutException("the open lock of " + path + " is held by "
                            + (pid > 0 ? "process " + pid : "another process") + " for more than " + o.lockTimeoutMs
                            + " ms (a process stopped while opening it? setLockTimeout changes the bound)", pid);
                }
                try {
                    Thread.sleep(sleepMs);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    throw new InterruptedIOException("interrupted while waiting for the open lock of " + path);
                }
                sleepMs = Math.min(sleepMs * 2, 50);
            }
        }
    }

    /**
     * The pid of a process holding a POSIX lock on the file with this inode, from {@code /proc/locks}.
     *
     * @param inode st_ino of the file
     * @return the pid, or -1 if none is found
     */
    static long lockHolder(long inode) {
        try {
            for (String line : Files.readAllLines(Paths.get("/proc/locks"))) {
                String[] f = line.trim().split("\\s+");
                // "1: POSIX  ADVISORY  WRITE 1234 00:1a:5678 0 EOF"; waiters have a "->" field
                if (f.length < 6 || f[1].equals("->")) {
                    continue;
                }
                String[] id = f[5].split(":");
                if (id.length == 3 && id[2].equals(Long.toString(inode))) {
                    long pid = Long.parseLong(f[4]);
                    if (pid > 0) {
                        return pid;
                    }
                }
            }
        } catch (IOException | RuntimeException e) {
            return -1;
        }
        return -1;
    }

    static void close0(FileChannel ch) {
        if (ch != null) {
            try {
                ch.close();
            } catch (IOException ignored) {
                // closing a channel we only read: nothing to lose
            }
        }
    }

    // Removes the file this open created, unless the path names another file by now.
    private static void deleteIfSame(Path p, long inode, long device) {
        try {
            Map<String, Object> a = Files.readAttributes(p, "unix:ino,dev", LinkOption.NOFOLLOW_LINKS);
            if ((Long) a.get("ino") == inode && (Long) a.get("dev") == device) {
                Files.deleteIfExists(p);
            }
        } catch (IOException ignored) {
            // gone already
        }
    }
}
