package io.mappedbuspy;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFilePermission;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;
import java.util.NoSuchElementException;
import java.util.Set;
import io.mappedbuspy.internal.BusMeta;
import io.mappedbuspy.internal.ConsumerEntry;
import io.mappedbuspy.internal.ConsumerHold;
import io.mappedbuspy.internal.ConsumerRegistry;
import io.mappedbuspy.internal.RollingDir;
import io.mappedbuspy.internal.RollingLayout;

/**
 * Named consumers of a bus (docs/files-and-rolling.md, "Consumers: the registry file"): who reads it, where, and how
 * far behind. A reader becomes one with {@code setConsumer(name)} before {@code open()}
 * ({@link MappedBusReader#setConsumer}, {@link RollingBusReader#setConsumer}); its positions are kept in the registry
 * beside the bus ({@code PATH.consumers}, or {@code DIR/bus.consumers}), which the Python side shares.
 */
public final class Consumers {
    /** A consumer's first start: the oldest record (position 8, or a rolling bus's oldest retained). */
    public static final long OLDEST = -1;
    /** A consumer's first start: the end of the bus when it is registered. */
    public static final long END = -2;

    private Consumers() {
    }

    /**
     * Every consumer registered on a bus, in registry order, read without a lock and without writing anything.
     *
     * @param path a single-file bus's path, or a rolling bus's directory
     * @return one entry per consumer (empty when the bus has no registry)
     * @throws CorruptBusException   if the registry holds something else than a registry
     * @throws BusTruncatedException if it was truncated while being read
     * @throws IOException           if it cannot be opened or is not to be trusted
     */
    public static List<ConsumerInfo> consumers(String path) throws IOException {
        Path p = Path.of(path);
        boolean rolling = Files.isDirectory(p, LinkOption.NOFOLLOW_LINKS);
        ConsumerRegistry reg;
        try {
            if (ConsumerRegistry.shortAndEmpty(registryPath(p, rolling))) {
                return List.of(); // never sized by its first opener (killed first): nobody registered
            }
            reg = ConsumerRegistry.open(registryPath(p, rolling), false, "rw-------", false, true);
        } catch (NoSuchFileException e) {
            return List.of();
        }
        List<ConsumerEntry> entries;
        try {
            entries = reg.entries();
        } finally {
            reg.close();
        }
        String[] busId = new String[1];
        Lag lag = rolling ? rollingLag(p, busId) : singleLag(path, busId);
        List<ConsumerInfo> out = new ArrayList<>();
        for (ConsumerEntry e : entries) {
            String id = e.busIdHex();
            boolean stale = busId[0] != null && !busId[0].equals(id); // an entry of a bus since recreated here
            out.add(new ConsumerInfo(e.name, e.position, stale ? -1 : lag.of(e.position), e.alive(), e.pid,
                    e.committedNs, e.createdNs, e.expired(), id));
        }
        return out;
    }

    /**
     * Removes a consumer from a bus's registry (one that will not come back: it no longer holds retention).
     *
     * @param path a single-file bus's path, or a rolling bus's directory
     * @param name the consumer
     * @throws NoSuchElementException if there is no such consumer
     * @throws ConsumerInUseException if a live reader holds it
     * @throws IOException            if the registry cannot be opened or is not to be trusted
     */
    public static void removeConsumer(String path, String name) throws IOException {
        Path p = Path.of(path);
        boolean rolling = Files.isDirectory(p, LinkOption.NOFOLLOW_LINKS);
        ConsumerRegistry reg;
        try {
            reg = ConsumerRegistry.open(registryPath(p, rolling), false, "rw-------", false, false);
        } catch (NoSuchFileException e) {
            throw new NoSuchElementException("no consumer '" + name + "' in " + path + " (it has no registry)");
        }
        try {
            reg.removeConsumer(name);
        } finally {
            reg.close();
        }
    }

    /** The registry of a bus: {@code PATH.consumers} beside a file, {@code DIR/bus.consumers} in a directory. */
    static Path registryPath(Path bus, boolean rolling) {
        return rolling ? bus.resolve(Layout.CONSUMERS_FILE) : Path.of(bus + Layout.CONSUMERS_SUFFIX);
    }

    // Record slots from a position to the bus's end now.
    private interface Lag {
        long of(long position);
    }

    private static Lag singleLag(String path, String[] busId) throws IOException {
        BusMeta m;
        try {
            m = BusMeta.read(BusMeta.metaPath(path), true);
        } catch (NoSuchFileException e) {
            m = null;
        }
        if (m == null || m.kind() != BusKind.SINGLE) {
            return position -> -1; // no record size: the Java original's file
        }
        busId[0] = m.id();
        long slot = Layout.slotSize(m.recordSize());
        long last = Layout.FIRST_RECORD_OFFSET + (m.fileSize() - Layout.FIRST_RECORD_OFFSET) / slot * slot;
        long limit = readLimit(Path.of(path));
        long end = Math.min(Math.max(limit, Layout.FIRST_RECORD_OFFSET), last);
        return position -> Math.max(0, (end - position) / slot);
    }

    private static Lag rollingLag(Path dir, String[] busId) throws IOException {
        BusMeta m = BusMeta.read(dir.resolve(Layout.META_FILE), true);
        if (m == null || m.kind() != BusKind.ROLLING) {
            return position -> -1;
        }
        busId[0] = m.id();
        RollingDir bus = RollingDir.forReader(dir.toString(), m.segmentSize(), m.recordSize(), true);
        RollingDir.Current c = bus.chooseCurrent();
        long head = c == null ? 0 : c.segment();
        long limit = c == null ? Layout.FIRST_RECORD_OFFSET : c.limit();
        return position -> RollingLayout.recordsBetween(position, head, limit, m.segmentSize(), m.recordSize());
    }

    private static long readLimit(Path file) throws IOException {
        ByteBuffer b = ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN);
        try (FileChannel ch = FileChannel.open(file, StandardOpenOption.READ, LinkOption.NOFOLLOW_LINKS)) {
            ch.read(b, Layout.LIMIT_OFFSET);
        } catch (NoSuchFileException e) {
            return Layout.FIRST_RECORD_OFFSET;
        }
        return b.getLong(0);
    }

    /**
     * The registry a reader of {@code bus} holds its consumer in, created if absent with the read and write bits of
     * {@code permsOf} (a bus file, or bus.meta).
     */
    static ConsumerRegistry openFor(Path bus, boolean rolling, boolean allowForeign) throws IOException {
        Path permsOf = rolling ? bus.resolve(Layout.META_FILE) : bus;
        return ConsumerRegistry.open(registryPath(bus, rolling), allowForeign, perms(permsOf), true, false);
    }

    // The read and write bits of a file (a group-shared bus gets a group-shared registry), at least rw for the owner.
    private static String perms(Path beside) {
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

    /**
     * Opens consumer {@code name} for a reader: the registry (created if absent), the hold (made at {@code start} the
     * first time). The caller closes the hold (which closes the registry).
     */
    static ConsumerHold hold(Path bus, boolean rolling, boolean allowForeign, String name, String busId,
                                      long start) throws IOException {
        ConsumerRegistry reg = openFor(bus, rolling, allowForeign);
        try {
            return reg.acquire(name, busId, start);
        } catch (IOException | RuntimeException e) {
            reg.close();
            throw e;
        }
    }

    /** Releases a reader's hold at its close: a failure is logged (the next claimant replaces a holder that is gone). */
    static void release(ConsumerHold h) {
        try {
            h.close();
        } catch (IOException | RuntimeException e) {
            System.getLogger(Consumers.class.getName()).log(System.Logger.Level.WARNING, "mappedbus: consumer '"
                    + h.name + "' of " + h.registryPath() + " not released (" + e.getMessage() + "): it is held by "
                    + "this process until it ends");
        }
    }

    /** The error for a stored position a reader cannot go to (off the record grid, or past the end). */
    static CorruptBusException badPosition(ConsumerHold h, long position, String why) {
        return new CorruptBusException(h.registryPath() + ": consumer '" + h.name + "' has position " + position
                + ", " + why + " (a corrupt registry)");
    }
}
