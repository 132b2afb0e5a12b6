package io.mappedbuspy.internal;

import java.nio.channels.FileChannel;

/**
 * Whether the holder of a side file's slot is alive, as the kernel keeps it: an open-file-description
 * (OFD) write lock on one byte of the file, the slot's first byte (mappedbus_py/_core/_liveness.h; design in
 * docs/design/side-files.md, "Liveness"). The kernel drops the lock when its holder dies, and any
 * process sharing the file sees it, in any pid namespace; a pid is no proof across containers, and a
 * zombie's pid looks alive.
 *
 * <p>The locks are taken through the project's JNI library ({@link WakeLibrary}) on the descriptor of a
 * {@link FileChannel} the holder opened itself (its own open file description). {@code FileChannel.lock}
 * is not used: its POSIX locks belong to the whole JVM, do not conflict within it, and are dropped when
 * any channel of the file in the JVM closes. Without the library every answer is {@link #UNKNOWN}, and
 * callers do what they did before liveness (the reader's timeout).
 * <p>Internal: not a supported API. Public only for the library's own packages (io.mappedbuspy and the
 * Spark connector); it may change in any release.
 */
public enum Liveness {
    /** Some other open file description holds the byte: its holder is alive. */
    ALIVE,
    /** Nobody holds the byte: its last holder is gone. */
    DEAD,
    /** No answer: no JNI library, no descriptor, or a file system without OFD locks. */
    UNKNOWN;

    /** The outcome of {@link #hold}. */
    public enum Hold {
        /** The byte is this channel's now (or already was). */
        TAKEN,
        /** A live holder has it. */
        BUSY,
        /** No answer (see {@link Liveness#UNKNOWN}). */
        UNKNOWN
    }

    // _liveness.h's return codes.
    private static final int LIVE_TAKEN = 0;
    private static final int LIVE_BUSY = 1;
    private static final int LIVE_DEAD = 0;
    private static final int LIVE_ALIVE = 1;

    /** Takes the liveness byte at {@code byteOffset} of {@code ch}'s file for as long as {@code ch} stays open. */
    public static Hold hold(FileChannel ch, long byteOffset) {
        int fd = descriptor(ch);
        if (fd < 0) {
            return Hold.UNKNOWN;
        }
        int r = nHold(fd, byteOffset);
        return r == LIVE_TAKEN ? Hold.TAKEN : r == LIVE_BUSY ? Hold.BUSY : Hold.UNKNOWN;
    }

    /** Gives the byte back (closing the channel does it too); false without an answer. */
    public static boolean release(FileChannel ch, long byteOffset) {
        int fd = descriptor(ch);
        return fd >= 0 && nRelease(fd, byteOffset) == 0;
    }

    /**
     * Whether some other open file description holds the byte. Through the holder's own channel this says
     * {@link #DEAD} (a lock does not conflict with its own description): probe through another channel.
     */
    public static Liveness probe(FileChannel ch, long byteOffset) {
        int fd = descriptor(ch);
        if (fd < 0) {
            return UNKNOWN;
        }
        int r = nProbe(fd, byteOffset);
        return r == LIVE_ALIVE ? ALIVE : r == LIVE_DEAD ? DEAD : UNKNOWN;
    }

    /** Whether locks can be taken at all here (the JNI library is loaded). */
    public static boolean available() {
        return WakeLibrary.LOADED;
    }

    private static int descriptor(FileChannel ch) {
        return WakeLibrary.LOADED ? UnsafeAccess.descriptor(ch) : -1;
    }

    static native int nHold(int fd, long byteOffset);

    static native int nRelease(int fd, long byteOffset);

    static native int nProbe(int fd, long byteOffset);
}
