package io.mappedbuspy;

import io.mappedbuspy.internal.*;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.Paths;

/**
 * Asks a bus's writers file who holds an uncommitted position ({@link SlotHolder}): the public face of
 * {@link WritersFile#holder} over {@link Liveness}, for readers outside this package (the Spark connector's
 * planning) and the bus readers' stalls. The file is opened at the first question, and again whenever its path
 * names another file (made anew by a later writer); one that cannot be opened (none yet: the Java original's bus,
 * or unsafe, or being made) answers {@link SlotHolder#UNKNOWN} and is tried again at the next question.
 *
 * <p>Each question is a scan of the file's slots and, for the slot whose claim holds the position, one system call
 * (an OFD lock probe): ask it of a slot that stayed uncommitted a while (the bus readers wait 1 ms first), not of
 * every slot. Not thread-safe.
 */
public final class SlotHolders implements AutoCloseable {
    private final Path file;
    private final boolean allowForeign;
    private WritersFile writers = WritersFile.NONE;

    SlotHolders(Path file, boolean allowForeign) {
        this.file = file;
        this.allowForeign = allowForeign;
    }

    /** The holders of a single-file bus's positions ({@code PATH.writers}); positions are offsets in the file. */
    public static SlotHolders ofBus(String path) {
        return new SlotHolders(Paths.get(path + Layout.WRITERS_SUFFIX), false);
    }

    /** The holders of a rolling bus's positions ({@code DIR/bus.writers}); positions are the bus's. */
    public static SlotHolders ofRollingBus(String dir) {
        return new SlotHolders(Paths.get(dir, Layout.WRITERS_FILE), false);
    }

    /** Who holds {@code position} (a bus position, reserved and not committed when asked). */
    public SlotHolder holderOf(long position) {
        WritersFile.Holder h = holder(position);
        WritersFile.Claim c = h.claim();
        return switch (h.liveness()) {
            case ALIVE -> new SlotHolder.Alive(writers.pidOf(h.index()), c.begin(), c.end());
            case DEAD -> new SlotHolder.Dead(c.begin(), c.end());
            case UNKNOWN -> SlotHolder.UNKNOWN;
        };
    }

    /** As {@link #holderOf}, with the holder's slot (for {@link #pidOf}). */
    WritersFile.Holder holder(long position) {
        if (!Liveness.available()) {
            return WritersFile.Holder.UNKNOWN;
        }
        try {
            long ino = ((Number) Files.getAttribute(file, "unix:ino", LinkOption.NOFOLLOW_LINKS)).longValue();
            if (writers == WritersFile.NONE || writers.inode() != ino) {
                writers.close();
                writers = WritersFile.NONE;
                writers = WritersFile.forReader(file, allowForeign);
            }
        } catch (IOException | RuntimeException e) {
            return WritersFile.Holder.UNKNOWN; // none yet (the Java original's bus), unsafe, or being made
        }
        return writers.holder(position);
    }

    /** The pid slot {@code index}'s holder recorded (for people: messages). */
    int pidOf(int index) {
        return writers.pidOf(index);
    }

    /** The writers file asked. */
    public Path file() {
        return file;
    }

    /** Closes the writers file (the next question opens it again). Idempotent. */
    @Override
    public void close() {
        writers.close();
        writers = WritersFile.NONE;
    }
}
