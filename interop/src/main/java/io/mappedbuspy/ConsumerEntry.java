package io.mappedbuspy;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * One entry of a consumer registry as read lock-free, between two equal odd generations ({@link
 * ConsumerRegistry#entries()}), with what its fields mean: a name's and a bus id's bytes, and the liveness of a holder
 * (its pid, and its start time from /proc/PID/stat field 22: the rule of {@code _wake.h}'s {@code wake_alive}, in
 * plain Java).
 */
final class ConsumerEntry {
    final int index;
    final int gen;
    final int flags;
    final int pid;
    final long start;
    final long position;
    final long committedNs;
    final long createdNs;
    final byte[] busId;
    final String name;

    ConsumerEntry(int index, int gen, int flags, int pid, long start, long position, long committedNs, long createdNs,
                  byte[] busId, String name) {
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
    }

    boolean expired() {
        return (flags & Layout.CONSUMER_FLAG_EXPIRED) != 0;
    }

    /** Whether its holder is a live process (pid and start time). */
    boolean alive() {
        return pid > 0 && alive(pid, start);
    }

    /** @return the bus id as 32 hex digits, or null for zeros (a bus file without metadata) */
    String busIdHex() {
        StringBuilder s = new StringBuilder(32);
        boolean zero = true;
        for (byte x : busId) {
            zero &= x == 0;
            s.append(Character.forDigit((x >> 4) & 15, 16)).append(Character.forDigit(x & 15, 16));
        }
        return zero ? null : s.toString();
    }

    /** The UTF-8 bytes of a consumer name: 1 to CONSUMER_NAME_MAX of them, no NUL or control characters. */
    static byte[] nameBytes(String name) {
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

    /** wake_proc_start: the start time of process {@code pid} (clock ticks since boot), or -1 if there is none. */
    static long procStart(int pid) {
        String s;
        try {
            s = Files.readString(Path.of("/proc/" + pid + "/stat"), StandardCharsets.ISO_8859_1);
        } catch (IOException | RuntimeException e) {
            return -1;
        }
        int close = s.lastIndexOf(')');  // the command name may hold spaces and parentheses
        if (close < 0) {
            return -1;
        }
        String[] f = s.substring(close + 1).trim().split(" ");
        try {
            return f.length > 19 ? Long.parseLong(f[19]) : -1;  // f[0] is field 3: field 22 is f[19]
        } catch (NumberFormatException e) {
            return -1;
        }
    }

    /** wake_alive: false if there is no process {@code pid}, or its start time is known and another now (reused). */
    static boolean alive(int pid, long start) {
        if (!ProcessHandle.of(pid).isPresent()) {
            return false;
        }
        if (start > 0) {
            long now = procStart(pid);
            return now < 0 || now == start;
        }
        return true;
    }

    /** @return Unix epoch nanoseconds now */
    static long nowNs() {
        java.time.Instant now = java.time.Instant.now();
        return now.getEpochSecond() * 1_000_000_000L + now.getNano();
    }

    // consumers_lock_word
    static long lockWord(int pid, long start) {
        return (pid & 0xFFFFFFFFL) | ((start & 0xFFFFFFFFL) << 32);
    }

    // consumers_word_alive: whether the holder a lock word names is still there (its pid, with the same start).
    static boolean wordAlive(long word) {
        int pid = (int) (word & 0xFFFFFFFFL);
        long start32 = word >>> 32;
        if (pid <= 0 || !ProcessHandle.of(pid).isPresent()) {
            return false;
        }
        long now = procStart(pid);
        return now < 0 || (now & 0xFFFFFFFFL) == start32; // another start: the pid was reused
    }
}
