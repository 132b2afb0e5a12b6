package io.mappedbuspy.internal;

import io.mappedbuspy.*;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.CharBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CharsetDecoder;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.util.HexFormat;

/**
 * A work group's retention entry on a rolling bus ({@code _open_hold}, {@code _hold} and {@code _commit_hold} of
 * mappedbus_py/groups/_group.pyx): the entry {@link #holdName group:NAME} of the bus's consumer registry, shared by
 * the group's members (Python and Java) and held by none, at the position of the group's start (its oldest record not
 * done). Retention keeps that position's segment as it keeps a named consumer's, under the same
 * {@code max_consumer_lag} and {@code on_consumer_lag}. A member commits the start when it moved: at most every
 * {@link #HOLD_NS} while acking, at once when it waits or closes.
 * <p>Internal: not a supported API. Public only for the library's own packages (io.mappedbuspy and the
 * Spark connector); it may change in any release.
 */
public final class GroupHold implements AutoCloseable {
    /** A member commits the entry at most this often while acking (as HOLD_NS of _group.pyx). */
    public static final long HOLD_NS = 1_000_000;
    private static final int NAME_MAX = Layout.CONSUMER_NAME_MAX;
    private static final int CUT = 41; // bytes of a long group name kept before "~" and its hash

    private final ConsumerRegistry registry;
    private final String name;
    private final String busIdHex;
    private int index;
    private long committed = Long.MIN_VALUE; // the start last committed (a position of g); none yet
    private long next;                       // System.nanoTime() before which an ack does not commit

    private GroupHold(ConsumerRegistry registry, String name, String busIdHex, int index) {
        this.registry = registry;
        this.name = name;
        this.busIdHex = busIdHex;
        this.index = index;
    }

    /**
     * The entry of {@code group} in {@code reg}, the registry of its rolling bus (made if absent, at
     * {@code position}). The hold owns {@code reg} from then on: it closes it, at once if this fails.
     */
    public static GroupHold open(ConsumerRegistry reg, String group, String busIdHex, long position)
            throws IOException {
        try {
            String n = holdName(group);
            return new GroupHold(reg, n, busIdHex, reg.ensureShared(n, busIdHex, position));
        } catch (IOException | RuntimeException e) {
            reg.close();
            throw e;
        }
    }

    /**
     * Commits {@code position} (the record position of the group's start {@code start}) if the start moved since the
     * last commit: {@code now}, or at most every {@link #HOLD_NS}.
     *
     * @return whether it committed
     */
    public boolean hold(long start, long position, boolean now) throws IOException {
        if (start == committed) {
            return false;
        }
        long t = System.nanoTime();
        if (!now && t - next < 0) {
            return false;
        }
        next = t + HOLD_NS;
        committed = start;
        if (!registry.isEntry(index, name)) {
            index = registry.ensureShared(name, busIdHex, position); // removed (removeConsumer): made again here
        }
        registry.commitShared(index, position);
        return true;
    }

    /** The registry name of a group's entry, as {@code hold_name} of _group.pyx: {@code group:NAME}, a name too long
     * for an entry cut and given an 8-byte BLAKE2b hash of the whole group name. */
    public static String holdName(String group) {
        String n = "group:" + group;
        byte[] whole = group.getBytes(StandardCharsets.UTF_8);
        if (n.getBytes(StandardCharsets.UTF_8).length <= NAME_MAX) {
            return n;
        }
        CharsetDecoder d = StandardCharsets.UTF_8.newDecoder().onMalformedInput(CodingErrorAction.IGNORE)
                .onUnmappableCharacter(CodingErrorAction.IGNORE);
        CharBuffer cut;
        try {
            cut = d.decode(ByteBuffer.wrap(whole, 0, Math.min(CUT, whole.length)));
        } catch (CharacterCodingException e) {
            throw new IllegalStateException(e); // never: errors are ignored
        }
        return "group:" + cut + "~" + HexFormat.of().formatHex(blake2b8(whole));
    }

    @Override
    public void close() {
        registry.close();
    }

    // ---- BLAKE2b (RFC 7693) with an 8-byte digest, no key, of at most one block (a group name: at most 64 bytes) ----

    private static final long[] IV = {
        0x6a09e667f3bcc908L, 0xbb67ae8584caa73bL, 0x3c6ef372fe94f82bL, 0xa54ff53a5f1d36f1L,
        0x510e527fade682d1L, 0x9b05688c2b3e6c1fL, 0x1f83d9abfb41bd6bL, 0x5be0cd19137e2179L,
    };
    private static final byte[][] SIGMA = {
        {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
        {14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3},
        {11, 8, 12, 0, 5, 2, 15, 13, 10, 14, 3, 6, 7, 1, 9, 4},
        {7, 9, 3, 1, 13, 12, 11, 14, 2, 6, 5, 10, 4, 0, 15, 8},
        {9, 0, 5, 7, 2, 4, 10, 15, 14, 1, 11, 12, 6, 8, 3, 13},
        {2, 12, 6, 10, 0, 11, 8, 3, 4, 13, 7, 5, 15, 14, 1, 9},
        {12, 5, 1, 15, 14, 13, 4, 10, 0, 7, 6, 3, 9, 2, 8, 11},
        {13, 11, 7, 14, 12, 1, 3, 9, 5, 0, 15, 4, 8, 6, 2, 10},
        {6, 15, 14, 9, 11, 3, 0, 8, 12, 2, 13, 7, 1, 4, 10, 5},
        {10, 2, 8, 4, 7, 6, 1, 5, 15, 11, 9, 14, 3, 12, 13, 0},
    };

    public static byte[] blake2b8(byte[] data) {
        if (data.length > 128) {
            throw new IllegalArgumentException("one block at most");
        }
        long[] h = IV.clone();
        h[0] ^= 0x01010000L ^ 8; // no key, 8-byte digest
        long[] m = new long[16];
        ByteBuffer b = ByteBuffer.allocate(128).order(java.nio.ByteOrder.LITTLE_ENDIAN).put(data);
        for (int i = 0; i < 16; i++) {
            m[i] = b.getLong(i * 8);
        }
        long[] v = new long[16];
        System.arraycopy(h, 0, v, 0, 8);
        System.arraycopy(IV, 0, v, 8, 8);
        v[12] ^= data.length; // the byte count (below 2^64)
        v[14] = ~v[14];       // the last block
        for (int r = 0; r < 12; r++) {
            byte[] s = SIGMA[r % 10];
            g(v, 0, 4, 8, 12, m[s[0]], m[s[1]]);
            g(v, 1, 5, 9, 13, m[s[2]], m[s[3]]);
            g(v, 2, 6, 10, 14, m[s[4]], m[s[5]]);
            g(v, 3, 7, 11, 15, m[s[6]], m[s[7]]);
            g(v, 0, 5, 10, 15, m[s[8]], m[s[9]]);
            g(v, 1, 6, 11, 12, m[s[10]], m[s[11]]);
            g(v, 2, 7, 8, 13, m[s[12]], m[s[13]]);
            g(v, 3, 4, 9, 14, m[s[14]], m[s[15]]);
        }
        long h0 = h[0] ^ v[0] ^ v[8];
        return ByteBuffer.allocate(8).order(java.nio.ByteOrder.LITTLE_ENDIAN).putLong(h0).array();
    }

    private static void g(long[] v, int a, int b, int c, int d, long x, long y) {
        v[a] = v[a] + v[b] + x;
        v[d] = Long.rotateRight(v[d] ^ v[a], 32);
        v[c] = v[c] + v[d];
        v[b] = Long.rotateRight(v[b] ^ v[c], 24);
        v[a] = v[a] + v[b] + y;
        v[d] = Long.rotateRight(v[d] ^ v[a], 16);
        v[c] = v[c] + v[d];
        v[b] = Long.rotateRight(v[b] ^ v[c], 63);
    }
}
