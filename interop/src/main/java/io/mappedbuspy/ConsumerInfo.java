package io.mappedbuspy;

import java.time.Instant;

/**
 * One named consumer of a bus as {@link Consumers#consumers(String)} saw it (Python: an entry of
 * {@code mappedbus_py.consumers(path)}). Immutable.
 */
public final class ConsumerInfo {
    private final String name;
    private final long position;
    private final long lag;
    private final boolean alive;
    private final int pid;
    private final Instant committedAt;
    private final Instant createdAt;
    private final boolean expired;
    private final String busId;

    ConsumerInfo(String name, long position, long lag, boolean alive, int pid, long committedNs, long createdNs,
                 boolean expired, String busId) {
        this.name = name;
        this.position = position;
        this.lag = lag;
        this.alive = alive;
        this.pid = pid;
        this.committedAt = Instant.ofEpochSecond(0, committedNs);
        this.createdAt = Instant.ofEpochSecond(0, createdNs);
        this.expired = expired;
        this.busId = busId;
    }

    /**
     * The bus the consumer was registered for: another id than the bus's own means the bus was deleted and recreated
     * since (its lag is then -1, and the entry starts anew when a reader opens it).
     *
     * @return 32 hex digits, or null (a bus file without metadata)
     */
    public String busId() {
        return busId;
    }

    /** @return the consumer's name */
    public String name() {
        return name;
    }

    /** @return the committed position: where it goes on reading (a position as readers use them) */
    public long position() {
        return position;
    }

    /**
     * How far behind the bus's end (now) the committed position is.
     *
     * @return record slots, or -1 when it cannot be known (a single-file bus without metadata: no record size; an entry
     *         of a bus since recreated)
     */
    public long lag() {
        return lag;
    }

    /** @return whether a live process holds the consumer now (a reader opened with its name) */
    public boolean alive() {
        return alive;
    }

    /** @return the pid of its holder, 0 when nobody holds it (the last holder's pid if it died) */
    public int pid() {
        return pid;
    }

    /** @return when it was last committed (or made), from the Unix-epoch nanoseconds stored (a coarse clock) */
    public Instant committedAt() {
        return committedAt;
    }

    /** @return when the entry was made */
    public Instant createdAt() {
        return createdAt;
    }

    /** @return whether a writer's retention expired it (cleared by its next commit) */
    public boolean expired() {
        return expired;
    }

    @Override
    public String toString() {
        return "ConsumerInfo[" + name + ", position=" + position + ", lag=" + lag + ", alive=" + alive + ", pid=" + pid
                + ", committedAt=" + committedAt + (expired ? ", expired" : "") + "]";
    }
}
