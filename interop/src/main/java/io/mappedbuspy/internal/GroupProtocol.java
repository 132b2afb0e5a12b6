package io.mappedbuspy.internal;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Arrays;
import io.mappedbuspy.BusTruncatedException;
import io.mappedbuspy.GroupReader;
import io.mappedbuspy.Layout;

/**
 * The work-group protocol of {@code mappedbus_py/groups/_group.h}, called through the project's JNI library
 * ({@code interop/native/wake_jni.c}, {@link WakeLibrary}) so that Python and Java members run one implementation
 * of it: acquiring a new record, redelivery, ack/release/reject by compare-and-swap on the exact acquired word,
 * advancing the group's start and taking over a dead member's slot.
 *
 * <p>These calls read and write the group file's mapping from native code, where a page past the end of a
 * truncated file is a SIGBUS, not an exception. Each native call therefore checks the file's length first (an
 * fstat of the member's descriptor, in C: {@code FileChannel.size()} would cost more than the member's work per
 * record) and touches nothing if it shrank: {@link BusTruncatedException} here. A truncation between that check
 * and the call's loads (well under a microsecond) is the one residual risk; the library never truncates a group
 * file.
 * <p>Internal: not a supported API. Public only for the library's own packages (io.mappedbuspy and the
 * Spark connector); it may change in any release.
 */
public final class GroupProtocol {
    /** Whether the library is loaded and has the group functions, built from this {@code _group.h}. */
    public static final boolean LOADED;
    /** Why not, when not. */
    public static final String WHY;

    public static final long FULL = -1;
    static final long CORRUPT = -2;
    static final long NONE = -1;
    /** wake_jni.c's answer when the group file is shorter than its mapping (nothing was touched). */
    static final long TRUNCATED = -3;
    /**
     * A framed bus's call found a message whose slot count is to be read from the bus ({@code _group_frames.h}'s
     * GROUP_ASK, which wake_jni.c answers as -4: -3 is TRUNCATED's): its first slot in {@link #askedSlot()}. Never
     * met by the calls of an unframed bus.
     */
    public static final long ASK = -4;

    static {
        boolean ok = false;
        String why;
        if (!WakeLibrary.LOADED) {
            why = "no JNI library (" + WakeLibrary.WHAT + "): build it with interop/build_native.sh";
        } else {
            try {
                ok = Arrays.equals(nativeConstants(), expectedConstants());
                why = ok ? "" : "the JNI library was built from another _group.h (interop/build_native.sh rebuilds it)";
            } catch (UnsatisfiedLinkError e) {
                why = "the JNI library has no group functions (built before them: interop/build_native.sh rebuilds "
                        + "it): " + e.getMessage();
            }
        }
        LOADED = ok;
        WHY = why;
    }

    private final MemoryMappedFile mem;
    private final long base;
    private final long size;
    private final int fd;
    private final long window;
    private final int shift;
    // 8 bytes of native memory for group_find_redelivery's word seen (not in the mapping).
    private final ByteBuffer seen = ByteBuffer.allocateDirect(8).order(ByteOrder.nativeOrder());
    private final long seenAddress = MemoryMappedFile.addressOf(seen);
    // 8 more for a framed bus's GROUP_ASK: the first slot of the message whose slot count is to be read from the bus.
    private final ByteBuffer ask = ByteBuffer.allocateDirect(8).order(ByteOrder.nativeOrder());
    private final long askAddress = MemoryMappedFile.addressOf(ask);

    /**
     * @param mem    the group file, mapped whole
     * @param fd     the member's own descriptor of the same file (its liveness lock's): the native calls check the
     *               file's length through it, and probe other members' locks through it
     * @param window the group's window
     */
    public GroupProtocol(MemoryMappedFile mem, int fd, long window) {
        this.mem = mem;
        this.base = mem.baseAddress();
        this.size = mem.size();
        this.fd = fd;
        this.window = window;
        this.shift = Long.numberOfTrailingZeros(window);
    }

    // The native call found the file shorter than the mapping (and touched nothing).
    private long checked(long r) {
        if (r == TRUNCATED) {
            mem.checkLength();
            throw mem.truncated(null); // fstat failed, or the file grew back since: the mapping is not to be trusted
        }
        return r;
    }

    public long nextNew() {
        return checked(nNextNew(base, fd, size, window, shift));
    }

    public long takeNew(long g, int owner, long leaseDeadline, long position) {
        return checked(nTakeNew(base, fd, size, window, shift, g, owner, leaseDeadline, position));
    }

    public void skip(long g) {
        checked(nSkip(base, fd, size, window, shift, g));
    }

    public long advance() {
        return checked(nAdvance(base, fd, size, window, shift));
    }

    public boolean finish(long g, long acquired, int state) {
        return checked(nFinish(base, fd, size, window, g, acquired, state)) == 1;
    }

    /** An ack of the delivery {@code acquired} of record g, and (if it was still current) the start moved on. */
    public boolean ack(long g, long acquired) {
        return checked(nAck(base, fd, size, window, shift, g, acquired)) == 1;
    }

    public long redeliver(long g, long seenWord, int owner, long leaseDeadline) {
        return checked(nRedeliver(base, fd, size, window, g, seenWord, owner, leaseDeadline));
    }

    /** The first record another member may take now (its word then in {@link #seenWord()}), or {@link #NONE}. */
    public long findRedelivery(long now, int me) {
        return checked(nFindRedelivery(base, fd, size, window, shift, now, me, seenAddress));
    }

    public long seenWord() {
        return seen.getLong(0);
    }

    // -- a framed bus (_group_frames.h): a message's first slot is the unit; `end` and `start` move by its slots --

    /**
     * The next message's first slot to take as new (its entry's word then in {@link #seenWord()}), {@link #FULL},
     * {@link #CORRUPT} or {@link #ASK} (the message at {@link #askedSlot()} was taken: its slot count is to be read
     * from the bus and passed to {@link #passEnd}).
     */
    public long nextNewFramed() {
        return checked(nFNextNew(base, fd, size, window, shift, seenAddress, askAddress));
    }

    /** Takes message g of n slots, its entry seen as {@code seenWord}: the acquired word, or 0 if another took it. */
    public long takeNewFramed(long g, long seenWord, long n, int owner, long leaseDeadline, long position) {
        return checked(nFTakeNew(base, fd, size, window, shift, g, seenWord, n, owner, leaseDeadline, position));
    }

    /** Message g of n slots, its entry seen as {@code seenWord}, goes to no member (rolled back, another topic). */
    public void skipFramed(long g, long seenWord, long n) {
        checked(nFSkip(base, fd, size, window, shift, g, seenWord, n));
    }

    /** Moves {@code start} over done messages: the new start, or {@link #ASK} (see {@link #passStart}). */
    public long advanceFramed() {
        return checked(nFAdvance(base, fd, size, window, shift, askAddress));
    }

    /**
     * An ack of the delivery {@code acquired} of message g, and (if it was still current) the start moved on: 1 or
     * 0 as {@link #ack}, or {@link #ASK} when it was acked and moving the start needs a slot count from the bus.
     */
    public long ackFramed(long g, long acquired) {
        return checked(nFAck(base, fd, size, window, shift, g, acquired, askAddress));
    }

    /** The message whose slot count the last {@link #ASK} asked for. */
    public long askedSlot() {
        return ask.getLong(0);
    }

    /** Moves {@code end} from g past its message of n slots (read from the bus after an {@link #ASK}). */
    public void passEnd(long g, long n) {
        checked(nFPass(base, fd, size, 0, g, n));
    }

    /** Moves {@code start} from s past its done message of n slots (read from the bus after an {@link #ASK}). */
    public void passStart(long s, long n) {
        checked(nFPass(base, fd, size, 1, s, n));
    }

    public long releaseOwner(int owner) {
        return checked(nReleaseOwner(base, fd, size, window, shift, owner));
    }

    // -- an entry word: tag (32 bits), state (8), deliveries (8), owner (16) --

    public long tag(long g) {
        return g >>> shift;
    }

    public static long wordTag(long w) {
        return w & 0xFFFFFFFFL;
    }

    static int wordState(long w) {
        return (int) ((w >>> 32) & 0xFF);
    }

    public static int wordDeliveries(long w) {
        return (int) ((w >>> 40) & 0xFF);
    }

    public static int wordOwner(long w) {
        return (int) ((w >>> 48) & 0xFFFF);
    }

    public static long word(long tag, int state, int deliveries, int owner) {
        return (tag & 0xFFFFFFFFL) | ((long) (state & 0xFF) << 32) | ((long) (deliveries & 0xFF) << 40)
                | ((long) (owner & 0xFFFF) << 48);
    }

    /** The constants of {@code _group.h} as the library was compiled, in {@link #expectedConstants()}'s order. */
    public static long[] nativeConstants() {
        long[] c = new long[19];
        for (int i = 0; i < c.length; i++) {
            c[i] = nConstant(i);
        }
        return c;
    }

    /** What this class and {@link GroupReader} use: Layout.java's constants and the protocol's codes. */
    public static long[] expectedConstants() {
        return new long[] {Layout.GROUP_START_OFFSET, Layout.GROUP_END_OFFSET, Layout.GROUP_HINT_OFFSET,
            Layout.GROUP_MEMBERS_OFFSET, Layout.GROUP_MEMBER_SIZE, Layout.GROUP_MEMBER_COUNT,
            Layout.GROUP_ENTRIES_OFFSET, Layout.GROUP_ENTRY_SIZE, Layout.GROUP_ACQUIRED, Layout.GROUP_RELEASED,
            Layout.GROUP_ACKED, Layout.GROUP_DEAD, Layout.GROUP_SKIP, FULL, CORRUPT, NONE, TRUNCATED,
            Layout.GROUP_ENTRY_SLOTS_OFFSET, ASK};
    }

    private static native long nNextNew(long base, int fd, long size, long window, int shift);

    private static native long nTakeNew(long base, int fd, long size, long window, int shift, long g, int owner,
                                        long lease, long position);

    private static native long nSkip(long base, int fd, long size, long window, int shift, long g);

    private static native long nAdvance(long base, int fd, long size, long window, int shift);

    private static native long nFinish(long base, int fd, long size, long window, long g, long acquired, int state);

    private static native long nAck(long base, int fd, long size, long window, int shift, long g, long acquired);

    private static native long nRedeliver(long base, int fd, long size, long window, long g, long seen, int owner,
                                          long lease);

    private static native long nFindRedelivery(long base, int fd, long size, long window, int shift, long now,
                                               int me, long seenAddress);

    private static native long nReleaseOwner(long base, int fd, long size, long window, int shift, int owner);

    private static native long nFNextNew(long base, int fd, long size, long window, int shift, long seenAddress,
                                         long askAddress);

    private static native long nFTakeNew(long base, int fd, long size, long window, int shift, long g, long seen,
                                         long n, int owner, long lease, long position);

    private static native long nFSkip(long base, int fd, long size, long window, int shift, long g, long seen, long n);

    private static native long nFAdvance(long base, int fd, long size, long window, int shift, long askAddress);

    private static native long nFPass(long base, int fd, long size, int which, long g, long n);

    private static native long nFAck(long base, int fd, long size, long window, int shift, long g, long acquired,
                                     long askAddress);

    private static native long nConstant(int i);
}
