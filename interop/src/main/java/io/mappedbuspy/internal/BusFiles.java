package io.mappedbuspy.internal;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFilePermission;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.EnumSet;
import java.security.SecureRandom;
import java.util.List;
import java.util.Set;
import io.mappedbuspy.Layout;
import io.mappedbuspy.UnsafeBusFileException;

/**
 * The files around a bus, checked before they are trusted: never through a symbolic link, nothing but
 * regular files, owner and mode checked; small files (metadata) written atomically. Mirrors
 * {@code mappedbus_py/formats/files.py}.
 * <p>Internal: not a supported API. Public only for the library's own packages (io.mappedbuspy and the
 * Spark connector); it may change in any release.
 */
public final class BusFiles {
    private static final SecureRandom RANDOM = new SecureRandom();
    private static volatile int euid = -2;

    private BusFiles() {
    }

    /**
     * The effective uid of this process (from {@code /proc/self/status}).
     *
     * @return the uid, or -1 if it cannot be read
     */
    public static int effectiveUid() {
        int uid = euid;
        if (uid == -2) {
            uid = -1;
            try {
                for (String line : Files.readAllLines(Path.of("/proc/self/status"))) {
                    if (line.startsWith("Uid:")) {
                        uid = Integer.parseInt(line.substring(4).trim().split("\\s+")[1]);
                        break;
                    }
                }
            } catch (IOException | RuntimeException e) {
                uid = -1;
            }
            euid = uid;
        }
        return uid;
    }

    /**
     * What kind of file {@code path} is, without following a link: "a regular file", "a FIFO", ...
     *
     * @param path a path that exists
     * @return the kind, in words
     * @throws IOException if it cannot be read
     */
    public static String kind(Path path) throws IOException {
        int mode = (Integer) Files.getAttribute(path, "unix:mode", LinkOption.NOFOLLOW_LINKS);
        switch (mode & 0170000) {
            case 0100000: return "a regular file";
            case 0040000: return "a directory";
            case 0010000: return "a FIFO";
            case 0020000: return "a character device";
            case 0060000: return "a block device";
            case 0140000: return "a socket";
            case 0120000: return "a symbolic link";
            default: return "not a regular file";
        }
    }

    /**
     * Refuses (UnsafeBusFileException) anything but a regular file owned by this process's user and not
     * writable by group or others; {@code allowForeign} accepts the last two. Links are not followed.
     *
     * @param path         the file
     * @param allowForeign accept another owner and group/other write permission
     * @throws NoSuchFileException    if it does not exist
     * @throws UnsafeBusFileException if it is not to be trusted
     * @throws IOException            if its attributes cannot be read
     */
    public static void checkTrusted(Path path, boolean allowForeign) throws IOException {
        check(path, allowForeign, false);
    }

    /**
     * As {@link #checkTrusted}, for a rolling bus's directory: refuses a link, anything but a directory, another
     * user's, or one writable by group or others (unless {@code allowForeign}).
     *
     * @param dir          the directory
     * @param allowForeign accept another owner and group/other write permission
     * @throws NoSuchFileException    if it does not exist
     * @throws UnsafeBusFileException if it is not to be trusted
     * @throws IOException            if its attributes cannot be read
     */
    public static void checkTrustedDirectory(Path dir, boolean allowForeign) throws IOException {
        check(dir, allowForeign, true);
    }

    private static void check(Path path, boolean allowForeign, boolean directory) throws IOException {
        String kind = kind(path);
        String want = directory ? "a directory" : "a regular file";
        String harm = directory ? "add or replace its segments" : "read and forge its records";
        if (kind.equals("a symbolic link")) {
            throw new UnsafeBusFileException(path + " is a symbolic link: bus files are never opened through links");
        }
        if (!kind.equals(want)) {
            throw new UnsafeBusFileException(path + " is " + kind + ", not " + want + ": not a "
                    + (directory ? "rolling bus" : "bus"));
        }
        if (allowForeign) {
            return;
        }
        int owner = (Integer) Files.getAttribute(path, "unix:uid", LinkOption.NOFOLLOW_LINKS);
        int me = effectiveUid();
        if (me >= 0 && owner != me) {
            throw new UnsafeBusFileException(path + " is owned by uid " + owner + ", not by this process's user (uid "
                    + me + "): another user could " + harm + " (allowForeign accepts it)");
        }
        Set<PosixFilePermission> perms = Files.getPosixFilePermissions(path, LinkOption.NOFOLLOW_LINKS);
        if (perms.contains(PosixFilePermission.GROUP_WRITE) || perms.contains(PosixFilePermission.OTHERS_WRITE)) {
            throw new UnsafeBusFileException(path + " has mode " + PosixFilePermissions.toString(perms)
                    + ": writable by group or others, who could " + harm + " (allowForeign accepts it)");
        }
    }

    /**
     * Writes {@code data} so that nobody ever sees part of it: into a temporary file beside {@code path}, then
     * linked into place ({@code exclusive}: false if {@code path} exists, nothing changed) or moved over it.
     *
     * @param path      the file to write
     * @param data      its whole content
     * @param perms     its permissions, e.g. "rw-------"
     * @param exclusive create only if absent
     * @return true if written
     * @throws IOException if it cannot be written
     */
    public static boolean writeAtomic(Path path, byte[] data, String perms, boolean exclusive) throws IOException {
        Path tmp = path.resolveSibling(Layout.TMP_PREFIX + path.getFileName() + "-" + ProcessHandle.current().pid()
                + "-" + Integer.toHexString(RANDOM.nextInt()));
        Set<PosixFilePermission> p = PosixFilePermissions.fromString(perms);
        try (FileChannel ch = FileChannel.open(tmp, Set.of(StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE,
                LinkOption.NOFOLLOW_LINKS), PosixFilePermissions.asFileAttribute(p))) {
            Files.setPosixFilePermissions(tmp, p); // exactly perms, whatever the umask
            ByteBuffer buf = ByteBuffer.wrap(data);
            while (buf.hasRemaining()) {
                ch.write(buf);
            }
            ch.force(true);
        }
        try {
            if (exclusive) {
                try {
                    Files.createLink(path, tmp);
                } catch (FileAlreadyExistsException e) {
                    return false;
                }
            } else {
                Files.move(tmp, path, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
            }
            return true;
        } finally {
            Files.deleteIfExists(tmp);
        }
    }

    /**
     * Reads a small file (at most {@code max} bytes) after {@link #checkTrusted}, without following links.
     *
     * @param path         the file
     * @param max          the most bytes accepted
     * @param allowForeign as for {@link #checkTrusted}
     * @return its bytes, or null if it does not exist
     * @throws IOException if it cannot be read, is not trusted, or is longer than {@code max}
     */
    public static byte[] readSmall(Path path, int max, boolean allowForeign) throws IOException {
        try {
            checkTrusted(path, allowForeign);
            try (FileChannel ch = FileChannel.open(path, List.of(StandardOpenOption.READ,
                    LinkOption.NOFOLLOW_LINKS).toArray(new java.nio.file.OpenOption[0]))) {
                ByteBuffer buf = ByteBuffer.allocate(max + 1);
                while (buf.hasRemaining() && ch.read(buf) > 0) {
                    // read until EOF or one byte past max
                }
                byte[] out = new byte[buf.position()];
                buf.flip();
                buf.get(out);
                return out;
            }
        } catch (NoSuchFileException e) {
            return null;
        }
    }

    // The read and write bits of the file a wake file goes beside (a group-shared bus gets a group-shared wake
    // file), at least rw for the owner; rw------- when it cannot be read.
    static String permsBeside(Path beside) {
        Set<PosixFilePermission> p = EnumSet.of(PosixFilePermission.OWNER_READ, PosixFilePermission.OWNER_WRITE);
        try {
            for (PosixFilePermission q : Files.getPosixFilePermissions(beside, LinkOption.NOFOLLOW_LINKS)) {
                if (q != PosixFilePermission.OWNER_EXECUTE && q != PosixFilePermission.GROUP_EXECUTE
                        && q != PosixFilePermission.OTHERS_EXECUTE) {
                    p.add(q);
                }
            }
        } catch (IOException | UnsupportedOperationException | SecurityException e) {
            // rw-------
        }
        return PosixFilePermissions.toString(p);
    }
}
