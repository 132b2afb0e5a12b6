package io.mappedbuspy.internal;

import java.nio.charset.StandardCharsets;
import io.mappedbuspy.Layout;

/**
 * One entry of a consumer registry as read lock-free, between two equal odd generations ({@link
 * ConsumerRegistry#entries()}), with what its fields mean: a name's and a bus id's bytes, and whether a live process
 * holds it ({@link Liveness}, probed when it was read; the pid is for people only).
 * <p>Internal: not a supported API. Public only for the library's own packages (io.mappedbuspy and the
 * Spark connector); it may change in any release.
 */
public final class ConsumerEntry {
    final int index;
    final int gen;
    final int flags;
    public final int pid;
    final long start;
    public final long position;
    public final long committedNs;
    public final long createdNs;
    final byte[] busId;
    public final String name;
    /** Whether a live process holds the name ({@link Liveness}: the kernel's lock on the entry, never its pid). */
    final Liveness holder;

    public ConsumerEntry(int index, int gen, int flags, int pid, long start, long position, long committedNs, long createdNs,
                  byte[] busId, String name, Liveness holder) {
        this.index = index;
        this.gen = gen;
        this.flags = flags;
        this.pid = pid;
        this.start = start;
        this.position = position;
        this.committedNs = committedNs;
        this.createdNs = createdNs;
        this.busId = busId;
        this.name = name;
        this.holder = holder;
    }

    public boolean expired() {
        return (flags & Layout.CONSUMER_FLAG_EXPIRED) != 0;
    }

    /** Whether a live process holds it (its liveness byte is locked; in any pid namespace). */
    public boolean alive() {
        return holder == Liveness.ALIVE;
    }

    /** @return the bus id as 32 hex digits, or null for zeros (a bus file without metadata) */
    public String busIdHex() {
        StringBuilder s = new StringBuilder(32);
        boolean zero = true;
        for (byte x : busId) {
            zero &= x == 0;
            s.append(Character.forDigit((x >> 4) & 15, 16)).append(Character.forDigit(x & 15, 16));
        }
        return zero ? null : s.toString();
    }

    /** The UTF-8 bytes of a consumer name: 1 to CONSUMER_NAME_MAX of them, no NUL or control characters. */
    public static byte[] nameBytes(String name) {
        if (name == null || name.isEmpty() || name.chars().anyMatch(c -> c < 32 || c == 127)) {
            throw new IllegalArgumentException("a consumer name is 1 to " + Layout.CONSUMER_NAME_MAX + " bytes of UTF-8"
                    + " without NUL or control characters, got " + (name == null ? "null" : "'" + name + "'"));
        }
        byte[] b = name.getBytes(StandardCharsets.UTF_8);
        if (b.length > Layout.CONSUMER_NAME_MAX) {
            throw new IllegalArgumentException("consumer name '" + name + "' is " + b.length + " bytes of UTF-8, more "
                    + "than " + Layout.CONSUMER_NAME_MAX);
        }
        return b;
    }

    /** A bus id of 32 hex digits as its 16 bytes; zeros for null (a file without metadata). */
    static byte[] busIdBytes(String hex) {
        byte[] b = new byte[Layout.CONSUMER_BUS_ID_SIZE];
        if (hex != null) {
            for (int i = 0; i < b.length; i++) {
                b[i] = (byte) Integer.parseInt(hex.substring(2 * i, 2 * i + 2), 16);
            }
        }
        return b;
    }

    /** @return Unix epoch nanoseconds now */
    static long nowNs() {
        java.time.Instant now = java.time.Instant.now();
        return now.getEpochSecond() * 1_000_000_000L + now.getNano();
    }
}
