package io.mappedbuspy.internal;

import java.io.IOException;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import io.mappedbuspy.CorruptBusException;
import io.mappedbuspy.Layout;

/**
 * The writers file beside a bus ({@code PATH.writers}, or {@code DIR/bus.writers}): who holds an uncommitted slot
 * (layout in {@link Layout}, protocol in {@code mappedbus_py/_core/_writers.h}, design in docs/design/side-files.md, "The
 * writers file"). A writer holds one slot, proved alive by an OFD lock on the slot's first byte ({@link Liveness}),
 * and publishes there the claim {@code [begin, end)} of each reservation: begin, then end, release stores to a line
 * only it writes. A reader that finds a slot uncommitted asks {@link #holder}: {@link Liveness#DEAD} -> roll it back
 * at once, {@link Liveness#ALIVE} -> never, {@link Liveness#UNKNOWN} (no claim holds it: the Java original, or no
 * JNI library) -> its timeout, as before.
 *
 * <p>Opened with the bus files' safe-open rules but without their POSIX open lock, which would conflict with the
 * slots' OFD locks. Each instance opens its own channel (its own open file description), as liveness needs.
 * <p>Internal: not a supported API. Public only for the library's own packages (io.mappedbuspy and the
 * Spark connector); it may change in any release.
 */
public final class WritersFile implements AutoCloseable {
    /** No writers file: publishes nothing, knows no holder. */
    public static final WritersFile NONE = new WritersFile();

    private static final System.Logger LOG = System.getLogger(WritersFile.class.getName());
    private static final Set<String> WARNED = ConcurrentHashMap.newKeySet();
    private static final int LOOKS = 4; // as WRITERS_LOOKS: a live slot's claim moved while probed, look again

    /** A writer's claim {@code [begin, end)} in bus positions; {@code begin >= end}: none. */
    public record Claim(long begin, long end) {
        public boolean empty() {
            return begin >= end;
        }
    }

    /** What {@link #holder} says of a position: its holder's liveness, and (known holder) its slot and claim. */
    public record Holder(Liveness liveness, int index, Claim claim) {
        public static final Holder UNKNOWN = new Holder(Liveness.UNKNOWN, 0, new Claim(0, 0));
    }

    private final MemoryMappedFile mem;
    private final long base;        // the mapping's address (a single window: the file is 16 KiB)
    private final String path;
    private long slotAddress;       // the held slot's address: where claims are published; 0 while none is held
    private int index;              // that slot's index (meaningful while slotAddress != 0)

    private WritersFile() {
        mem = null;
        base = 0;
        path = "<no writers file>";
    }

    private WritersFile(MemoryMappedFile mem, String path) {
        this.mem = mem;
        this.base = mem.baseAddress();
        this.path = path;
    }

    /**
     * The writers file of a bus, opened for a writer (made, all zero, if absent) with a slot held in it; {@link #NONE}
     * (with a warning, once per path) where there is none to hold: every slot has a live writer, no JNI library, the
     * file cannot be made or is not to be trusted. The writer then runs without, and readers time its stalls out.
     */
    public static WritersFile forWriter(Path file, boolean allowForeign) {
        if (!Liveness.available()) {
            return NONE; // no OFD locks without the JNI library: a claim nobody can prove alive is no use
        }
        WritersFile f;
        try {
            MemoryMappedFile.OpenOptions o = new MemoryMappedFile.OpenOptions();
            o.create = true;
            o.grow = true;
            o.lock = false;
            o.allowForeign = allowForeign;
            o.afterMap = WritersFile::init;
            f = new WritersFile(MemoryMappedFile.open(file.toString(), Layout.WRITERS_FILE_SIZE, o), file.toString());
        } catch (IOException | RuntimeException e) {
            warn(file, "no writers file (" + e + ")");
            return NONE;
        }
        Liveness.Hold h = f.take();
        if (h != Liveness.Hold.TAKEN) {
            f.close();
            warn(file, h == Liveness.Hold.BUSY ? "every slot of the writers file has a live writer"
                    : "the file system gives no OFD locks");
            return NONE;
        }
        return f;
    }

    /** The writers file of a bus, opened read-only for a reader's questions; it must exist. */
    public static WritersFile forReader(Path file, boolean allowForeign) throws IOException {
        MemoryMappedFile.OpenOptions o = new MemoryMappedFile.OpenOptions();
        o.readOnly = true;
        o.lock = false;
        o.allowForeign = allowForeign;
        o.lockTimeoutMs = 0; // a file still empty (being made): not yet, ask again at the next stall
        MemoryMappedFile m = MemoryMappedFile.open(file.toString(), Layout.WRITERS_FILE_SIZE, o);
        long magic = m.getLongAcquire(Layout.WRITERS_MAGIC_OFFSET);
        int version = m.getIntAcquire(Layout.WRITERS_VERSION_OFFSET);
        if ((magic != 0 && magic != Layout.WRITERS_MAGIC) || (version != 0 && version != Layout.WRITERS_VERSION)) {
            m.close();
            throw new CorruptBusException(file + " is not a bus writers file: its "
                    + (magic != 0 && magic != Layout.WRITERS_MAGIC ? "magic" : "version") + " is unknown");
        }
        return new WritersFile(m, file.toString());
    }

    private static void warn(Path file, String why) {
        if (WARNED.add(file.toString())) {
            LOG.log(System.Logger.Level.WARNING, file + ": " + why + ": readers that find this writer's records "
                    + "uncommitted wait their timeout before rolling them back, whether it is alive or not");
        }
    }

    // writers_init: the magic and the version set by compare-and-swap from 0.
    private static void init(MemoryMappedFile f) throws IOException {
        if (!f.compareAndSetLong(Layout.WRITERS_MAGIC_OFFSET, 0, Layout.WRITERS_MAGIC)
                && f.getLongAcquire(Layout.WRITERS_MAGIC_OFFSET) != Layout.WRITERS_MAGIC) {
            throw new CorruptBusException(f.path() + " is not a bus writers file: its magic is not a writers file's");
        }
        if (!f.compareAndSetInt(Layout.WRITERS_VERSION_OFFSET, 0, Layout.WRITERS_VERSION)
                && f.getIntAcquire(Layout.WRITERS_VERSION_OFFSET) != Layout.WRITERS_VERSION) {
            throw new CorruptBusException(f.path() + " is not a bus writers file: its version is unknown");
        }
    }

    // Holds the first free slot (its pid and time written for people).
    private Liveness.Hold take() {
        FileChannel ch = mem.channel();
        for (int i = 0; i < Layout.WRITER_SLOT_COUNT; i++) {
            Liveness.Hold h = Liveness.hold(ch, Layout.writerSlotOffset(i));
            if (h == Liveness.Hold.BUSY) {
                continue;
            }
            if (h == Liveness.Hold.TAKEN) {
                index = i;
                slotAddress = base + Layout.writerSlotOffset(i);
                MemoryMappedFile.putIntVolatileAt(slotAddress + Layout.WRITER_PID_OFFSET, WakeFile.PID);
                MemoryMappedFile.putLongReleaseAt(slotAddress + Layout.WRITER_TAKEN_NS_OFFSET,
                        System.currentTimeMillis() * 1_000_000L);
            }
            return h;
        }
        return Liveness.Hold.BUSY;
    }

    /** Whether this instance holds a slot (a writer's that {@link #forWriter} gave). */
    boolean holds() {
        return slotAddress != 0;
    }

    /** The claim of a reservation: begin, then end (see the class comment). Nothing without a slot. */
    public void publish(long begin, long end) {
        long s = slotAddress;
        if (s != 0) {
            MemoryMappedFile.putLongReleaseAt(s + Layout.WRITER_BEGIN_OFFSET, begin);
            MemoryMappedFile.putLongReleaseAt(s + Layout.WRITER_END_OFFSET, end);
        }
    }

    /** The claim in the held slot: right after opening, what its last holder, dead, left there. */
    public Claim claimLeft() {
        return slotAddress == 0 ? new Claim(0, 0) : load(slotAddress);
    }

    /** Empties the held slot's claim: end first, so no reader ever sees a larger range than the claim was. */
    public void clear() {
        if (slotAddress != 0) {
            MemoryMappedFile.putLongReleaseAt(slotAddress + Layout.WRITER_END_OFFSET, 0);
            MemoryMappedFile.putLongReleaseAt(slotAddress + Layout.WRITER_BEGIN_OFFSET, 0);
        }
    }

    // A slot's claim as a reader loads it: end, then begin.
    private static Claim load(long slot) {
        long end = MemoryMappedFile.getLongVolatileAt(slot + Layout.WRITER_END_OFFSET);
        long begin = MemoryMappedFile.getLongVolatileAt(slot + Layout.WRITER_BEGIN_OFFSET);
        return new Claim(begin, end);
    }

    /**
     * Who holds {@code position} (writers_holder): the slot whose claim holds it, probed through this instance's own
     * channel. A live slot whose claim moved while probed is looked at again.
     */
    public Holder holder(long position) {
        if (mem == null || mem.channel() == null) {
            return Holder.UNKNOWN;
        }
        for (int look = 0; look < LOOKS; look++) {
            boolean moved = false;
            for (int i = 0; i < Layout.WRITER_SLOT_COUNT; i++) {
                long s = base + Layout.writerSlotOffset(i);
                Claim c = load(s);
                if (!(c.begin <= position && position < c.end)) {
                    continue;
                }
                Liveness l = Liveness.probe(mem.channel(), Layout.writerSlotOffset(i));
                if (l != Liveness.ALIVE) {
                    return l == Liveness.DEAD ? new Holder(l, i, c) : Holder.UNKNOWN;
                }
                if (load(s).equals(c)) {
                    return new Holder(l, i, c);
                }
                moved = true;
                break;
            }
            if (!moved) {
                return Holder.UNKNOWN;
            }
        }
        return Holder.UNKNOWN;
    }

    /** The pid slot {@code i}'s holder recorded (for people: messages). */
    public int pidOf(int i) {
        return mem == null ? 0 : mem.getIntAcquire(Layout.writerSlotOffset(i) + Layout.WRITER_PID_OFFSET);
    }

    /** The file's identity, to notice it was made anew under its path. */
    public long inode() {
        return mem == null ? 0 : mem.inode();
    }

    String path() {
        return path;
    }

    /** Clears the claim and gives the slot back (closing the channel drops the lock). Idempotent. */
    @Override
    public void close() {
        if (mem == null) {
            return;
        }
        if (slotAddress != 0) {
            clear();
            slotAddress = 0;
        }
        mem.close();
    }
}
