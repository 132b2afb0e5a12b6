package io.mappedbuspy.internal;

import java.io.IOException;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.security.SecureRandom;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import io.mappedbuspy.BusKind;
import io.mappedbuspy.BusMismatchException;
import io.mappedbuspy.ConsumerPolicy;
import io.mappedbuspy.CorruptBusException;
import io.mappedbuspy.Layout;
import io.mappedbuspy.OnConsumerLag;
import io.mappedbuspy.Retention;

/**
 * A bus's metadata file: kind, sizes, identity and creation time, which the Mappedbus 0.5.1 format never
 * stores. The format is in {@code mappedbus_py/formats/layout.py}'s docstring; {@code mappedbus_py/formats/busmeta.py}
 * reads and writes the same files. Immutable.
 * <p>Internal: not a supported API. Public only for the library's own packages (io.mappedbuspy and the
 * Spark connector); it may change in any release.
 */
public final class BusMeta {
    private static final SecureRandom RANDOM = new SecureRandom();
    // The integer keys, in the order encode() writes them after format, kind and id.
    private static final String[] INT_KEYS = {"format", "created_ns", "record_size", "file_size", "inode",
        "segment_size", "retain_segments", "retain_bytes", "retain_age_ms", "max_consumer_lag", "consumer_block_ms"};

    /** A line of a key this version does not know, kept as read so that a rewrite loses nothing. */
    private record Extra(String key, String value) { }

    private final BusKind kind;
    private final String id;
    private final long format;
    private final long createdNs;
    private final int recordSize;
    private final long fileSize;
    private final long inode;
    private final long segmentSize;
    private final Retention retention;
    private final ConsumerPolicy policy;
    private final List<Extra> extra;

    private BusMeta(BusKind kind, String id, long format, long createdNs, int recordSize, long fileSize, long inode,
                    long segmentSize, Retention retention, ConsumerPolicy policy, List<Extra> extra) {
        this.kind = kind;
        this.id = id;
        this.format = format;
        this.createdNs = createdNs;
        this.recordSize = recordSize;
        this.fileSize = fileSize;
        this.inode = inode;
        this.segmentSize = segmentSize;
        this.retention = retention;
        this.policy = policy;
        this.extra = List.copyOf(extra);
    }

    /**
     * A new single-file bus's metadata: a fresh random id and the time now.
     *
     * @param recordSize payload bytes per record
     * @param fileSize   logical file size
     * @param inode      st_ino of the bus file
     * @return the metadata
     */
    public static BusMeta single(int recordSize, long fileSize, long inode) {
        return new BusMeta(BusKind.SINGLE, newId(), Layout.META_FORMAT, nowNs(), recordSize, fileSize, inode, 0,
                Retention.NONE, ConsumerPolicy.DEFAULT, List.of());
    }

    /**
     * A new rolling bus's metadata: a fresh random id and the time now; consumers hold nothing.
     *
     * @param recordSize  payload bytes per record
     * @param segmentSize logical size of every segment
     * @param retention   its retention
     * @return the metadata
     */
    public static BusMeta rolling(int recordSize, long segmentSize, Retention retention) {
        return rolling(recordSize, segmentSize, retention, ConsumerPolicy.DEFAULT);
    }

    /**
     * A new rolling bus's metadata with retention that holds consumers (docs/files-and-rolling.md, "Retention that
     * holds consumers").
     *
     * @param recordSize  payload bytes per record
     * @param segmentSize logical size of every segment
     * @param retention   its retention
     * @param policy      how retention treats registered consumers
     * @return the metadata
     */
    public static BusMeta rolling(int recordSize, long segmentSize, Retention retention, ConsumerPolicy policy) {
        return new BusMeta(BusKind.ROLLING, newId(), Layout.META_FORMAT, nowNs(), recordSize, 0, 0, segmentSize,
                Objects.requireNonNull(retention, "retention"), Objects.requireNonNull(policy, "policy"), List.of());
    }

    private static long nowNs() {
        java.time.Instant now = java.time.Instant.now();
        return now.getEpochSecond() * 1_000_000_000L + now.getNano();
    }

    private static String newId() {
        byte[] b = new byte[16];
        RANDOM.nextBytes(b);
        StringBuilder s = new StringBuilder(32);
        for (byte x : b) {
            s.append(Character.forDigit((x >> 4) & 15, 16)).append(Character.forDigit(x & 15, 16));
        }
        return s.toString();
    }

    /**
     * The value of a key this class does not read itself (those of other features: the journal's
     * {@code archive_*} keys), as the file holds it.
     *
     * @param key the key
     * @return its value, or null when the file has no such key
     */
    public String extra(String key) {
        for (Extra kv : extra) {
            if (kv.key().equals(key)) {
                return kv.value();
            }
        }
        return null;
    }

    /**
     * This metadata with one more key of another feature's (replacing its value if present): what a writer that turns
     * a feature on (the journal's {@code time_index=1}) writes back, under the same id.
     *
     * @param key   the key
     * @param value its value
     * @return the new metadata
     */
    public BusMeta withExtra(String key, String value) {
        List<Extra> more = new ArrayList<>();
        for (Extra kv : extra) {
            if (!kv.key().equals(key)) {
                more.add(kv);
            }
        }
        more.add(new Extra(key, value));
        return new BusMeta(kind, id, format, createdNs, recordSize, fileSize, inode, segmentSize, retention, policy,
                more);
    }

    /** @return single-file or rolling */
    public BusKind kind() {
        return kind;
    }

    /** @return the bus's id: 32 hex digits, new for every bus created */
    public String id() {
        return id;
    }

    /** @return creation time, Unix epoch nanoseconds */
    public long createdNs() {
        return createdNs;
    }

    /** @return payload bytes per record */
    public int recordSize() {
        return recordSize;
    }

    /** @return the logical file size of a single-file bus (0 for a rolling one) */
    public long fileSize() {
        return fileSize;
    }

    /** @return st_ino of the file a single-file bus's metadata describes */
    public long inode() {
        return inode;
    }

    /** @return the logical size of every segment of a rolling bus (0 for a single file) */
    public long segmentSize() {
        return segmentSize;
    }

    /** @return the size every file of the bus has: the file size or the segment size */
    public long size() {
        return kind == BusKind.SINGLE ? fileSize : segmentSize;
    }

    /** @return the retention of a rolling bus ({@link Retention#NONE} for a single file) */
    public Retention retention() {
        return retention;
    }

    /** @return most segments retained, 0 for no limit */
    public long retainSegments() {
        return retention.segments();
    }

    /** @return most bytes of segments retained, 0 for no limit */
    public long retainBytes() {
        return retention.bytes();
    }

    /** @return oldest data retained in milliseconds, 0 for no limit */
    public long retainAgeMs() {
        return retention.ageMs();
    }

    /** @return how retention treats registered consumers */
    public ConsumerPolicy consumerPolicy() {
        return policy;
    }

    /** @return segments a registered consumer may lag behind the writers and still hold from retention; 0: none */
    public long maxConsumerLag() {
        return policy.maxConsumerLag();
    }

    /** @return how long a writer waits for a lagging consumer under {@link OnConsumerLag#BLOCK}, in milliseconds */
    public long consumerBlockMs() {
        return policy.consumerBlockMs();
    }

    /** @return what happens to a consumer past {@link #maxConsumerLag()} */
    public OnConsumerLag onConsumerLag() {
        return policy.onConsumerLag();
    }

    /**
     * Whether the bus is framed: messages of any size and topics (docs/design/frames.md): {@code frames=1}.
     *
     * @return true for a framed bus
     */
    public boolean frames() {
        for (Extra kv : extra) {
            if (kv.key().equals(Layout.META_FRAMES_KEY)) {
                return kv.value().equals("1");
            }
        }
        return false;
    }

    /**
     * This metadata with {@code frames=1} (framed) or without the key (not framed), as Python writes it.
     *
     * @param frames whether the bus is framed
     * @return the metadata
     */
    public BusMeta withFrames(boolean frames) {
        List<Extra> rest = new ArrayList<>();
        for (Extra kv : extra) {
            if (!kv.key().equals(Layout.META_FRAMES_KEY)) {
                rest.add(kv);
            }
        }
        if (frames) {
            rest.add(new Extra(Layout.META_FRAMES_KEY, "1"));
        }
        return new BusMeta(kind, id, format, createdNs, recordSize, fileSize, inode, segmentSize, retention, policy,
                rest);
    }

    /**
     * Throws unless the bus is framed as asked (docs/design/frames.md: a framed bus is opened framed, an unframed one
     * unframed).
     *
     * @param frames whether the caller opens it framed
     * @param path   the bus, for the message
     * @throws BusMismatchException if it is not
     */
    public void checkFrames(boolean frames, String path) throws BusMismatchException {
        if (frames != frames()) {
            throw new BusMismatchException(path + (frames() ? " is a framed bus (frames=1 in its metadata, bus " + id
                    + "): open it with setFrames(true)" : " is not a framed bus (bus " + id + ", made without frames): "
                    + "open it without setFrames(true), or make a new bus with frames"));
        }
    }

    /**
     * The file's bytes (byte for byte what {@code busmeta.py}'s {@code BusMeta.encode} writes).
     *
     * @return UTF-8 text, one key=value per line
     */
    public byte[] encode() {
        long[] values = {format, createdNs, recordSize, fileSize, inode, segmentSize, retention.segments(),
            retention.bytes(), retention.ageMs(), policy.maxConsumerLag(), policy.consumerBlockMs()};
        StringBuilder s = new StringBuilder(Layout.META_MAGIC).append('\n');
        s.append("format=").append(format).append('\n');
        s.append("kind=").append(kind.text()).append('\n');
        s.append("id=").append(id).append('\n');
        for (int i = 1; i < INT_KEYS.length; i++) {
            s.append(INT_KEYS[i]).append('=').append(values[i]).append('\n');
        }
        s.append("on_consumer_lag=").append(policy.onConsumerLag().text()).append('\n');
        for (Extra kv : extra) {
            s.append(kv.key()).append('=').append(kv.value()).append('\n');
        }
        return s.toString().getBytes(StandardCharsets.UTF_8);
    }

    /**
     * Parses a metadata file's bytes.
     *
     * @param data the bytes
     * @param path the file, for messages
     * @return the metadata
     * @throws CorruptBusException if they are not a metadata file of this format
     */
    public static BusMeta decode(byte[] data, String path) throws CorruptBusException {
        if (data.length > Layout.META_MAX_BYTES) {
            throw bad(path, data.length + " bytes, more than " + Layout.META_MAX_BYTES);
        }
        String text;
        try {
            text = StandardCharsets.UTF_8.newDecoder().onMalformedInput(CodingErrorAction.REPORT)
                    .onUnmappableCharacter(CodingErrorAction.REPORT).decode(java.nio.ByteBuffer.wrap(data)).toString();
        } catch (CharacterCodingException e) {
            throw bad(path, "not UTF-8 text");
        }
        String[] lines = text.split("\r?\n|\r", -1);
        if (!lines[0].equals(Layout.META_MAGIC)) {
            throw bad(path, "the first line is not '" + Layout.META_MAGIC + "'");
        }
        // Integer keys by their index in INT_KEYS; absent ones are 0, consumer_block_ms its default.
        long[] ints = new long[INT_KEYS.length];
        ints[10] = Layout.DEFAULT_CONSUMER_BLOCK_MS;
        String onConsumerLag = OnConsumerLag.EXPIRE.text();
        java.util.Set<String> seen = new java.util.HashSet<>();
        String kindText = null;
        String id = null;
        List<Extra> extra = new ArrayList<>();
        for (int i = 1; i < lines.length; i++) {
            String line = lines[i];
            if (line.isEmpty() || line.startsWith("#")) {
                continue;
            }
            int eq = line.indexOf('=');
            if (eq < 0) {
                throw bad(path, "line '" + line + "' is not key=value");
            }
            String key = line.substring(0, eq);
            String value = line.substring(eq + 1);
            if (!seen.add(key)) {
                throw bad(path, "key '" + key + "' appears twice");
            }
            int at = java.util.Arrays.asList(INT_KEYS).indexOf(key);
            if (at >= 0) {
                if (value.isEmpty() || !value.chars().allMatch(c -> c >= '0' && c <= '9')) {
                    throw bad(path, key + "='" + value + "' is not a non-negative integer");
                }
                try {
                    ints[at] = Long.parseLong(value);
                } catch (NumberFormatException e) {
                    throw bad(path, key + "='" + value + "' is too large");
                }
            } else if (key.equals("kind")) {
                kindText = value;
            } else if (key.equals("id")) {
                id = value;
            } else if (key.equals("on_consumer_lag")) {
                onConsumerLag = value;
            } else if (key.equals(Layout.META_FRAMES_KEY) && !value.equals("0") && !value.equals("1")) {
                throw bad(path, key + "='" + value + "' is not 0 or 1");
            } else {
                extra.add(new Extra(key, value));
            }
        }
        for (String k : new String[] {"format", "kind", "id", "created_ns", "record_size"}) {
            if (!seen.contains(k)) {
                throw bad(path, "no " + k);
            }
        }
        if (ints[0] != Layout.META_FORMAT) {
            throw bad(path, "format " + ints[0] + ", this version reads " + Layout.META_FORMAT);
        }
        BusKind kind = BusKind.ofText(kindText);
        if (kind == null) {
            throw bad(path, "kind '" + kindText + "' (known: single, rolling)");
        }
        OnConsumerLag lag;
        try {
            lag = OnConsumerLag.of(onConsumerLag);
        } catch (IllegalArgumentException e) {
            throw bad(path, "on_consumer_lag '" + onConsumerLag + "' (known: expire, block)");
        }
        if (!id.matches("[0-9a-f]{32}")) {
            throw bad(path, "id '" + id + "' is not 32 lowercase hex digits");
        }
        long recordSize = ints[2];
        long size = kind == BusKind.SINGLE ? ints[3] : ints[5];
        if (recordSize <= 0 || recordSize > Integer.MAX_VALUE || size <= 0) {
            throw bad(path, "record_size and " + (kind == BusKind.SINGLE ? "file_size" : "segment_size")
                    + " must be positive");
        }
        return new BusMeta(kind, id, ints[0], ints[1], (int) recordSize, ints[3], ints[4], ints[5],
                new Retention(ints[6], ints[7], ints[8]), new ConsumerPolicy(ints[9], lag, ints[10]), extra);
    }

    private static CorruptBusException bad(String path, String why) {
        return new CorruptBusException(path + " is not a bus metadata file: " + why);
    }

    /**
     * Throws unless this bus was created with these sizes.
     *
     * @param recordSize the record size given, or -1 for any
     * @param size       the file (or segment) size given, or -1 for any
     * @param path       the bus, for the message
     * @throws BusMismatchException if a size differs
     */
    public void check(int recordSize, long size, String path) throws BusMismatchException {
        String what = kind == BusKind.SINGLE ? "fileSize" : "segmentSize";
        if (recordSize >= 0 && recordSize != recordSize()) {
            throw mismatch(path, "recordSize", recordSize(), recordSize, what);
        }
        if (size >= 0 && size != size()) {
            throw mismatch(path, what, size(), size, what);
        }
    }

    private BusMismatchException mismatch(String path, String name, long recorded, long given, String what) {
        return new BusMismatchException(path + " was created with " + name + " " + recorded + ", not " + given
                + " (bus " + id + ", recordSize " + recordSize() + ", " + what + " " + size()
                + "): every process must open a bus with the sizes it was created with");
    }

    /**
     * The metadata file of a single-file bus.
     *
     * @param busPath the bus file
     * @return {@code busPath + META_SUFFIX}
     */
    public static Path metaPath(String busPath) {
        return Path.of(busPath + Layout.META_SUFFIX);
    }

    /**
     * The metadata a single-file bus opened without sizes takes them from: {@code PATH.meta}, which must
     * describe this file (kind single, the file's inode). Read without the owner and mode check (a link or
     * anything but a regular file is still refused): it only supplies the sizes, and {@code open()} checks
     * both files again with the reader's or writer's own {@code allowForeign}.
     *
     * @param path the bus file
     * @param type the class opening it, for the message
     * @return the metadata
     * @throws IllegalArgumentException if the file or its metadata is missing, or the metadata describes
     *                                  another file or a rolling bus: such a bus needs both sizes
     * @throws IOException              if a file cannot be read, or is not a metadata file
     */
    public static BusMeta ofFile(String path, String type) throws IOException {
        Path p = Path.of(Objects.requireNonNull(path, "path"));
        Path mp = metaPath(path);
        long ino;
        try {
            BusFiles.checkTrusted(p, true); // a link, FIFO or directory is refused here as open() refuses it
            ino = (Long) Files.getAttribute(p, "unix:ino", LinkOption.NOFOLLOW_LINKS);
        } catch (NoSuchFileException e) {
            ino = -1;
        }
        BusMeta m = ino < 0 ? null : read(mp, true);
        String why;
        if (ino < 0) {
            why = "the file does not exist";
        } else if (m == null) {
            why = "it has no metadata file (" + mp + ")";
        } else if (m.kind != BusKind.SINGLE) {
            why = mp + " describes a " + m.kind + " bus";
        } else if (m.inode() != ino) {
            why = mp + " describes another file (inode " + m.inode() + ", this one's is " + ino
                    + "): a bus since deleted";
        } else {
            return m;
        }
        throw new IllegalArgumentException(path + ": no sizes given and " + why + ": a bus made by the Java"
                + " original, or not made yet, needs both sizes, new " + type + "(path, fileSize, recordSize)");
    }

    /**
     * The metadata a rolling bus opened without sizes takes them from: {@code DIR/bus.meta}, of kind rolling.
     * Read without the owner and mode check, as {@link #ofFile}: {@code open()} checks again.
     *
     * @param dir  the bus directory
     * @param type the class opening it, for the message
     * @return the metadata
     * @throws IllegalArgumentException if there is no such directory or bus.meta, or it describes a
     *                                  single-file bus: a rolling bus not made yet needs both sizes
     * @throws IOException              if the directory is a link or not a directory, or bus.meta cannot be
     *                                  read or is not a metadata file
     */
    public static BusMeta ofRollingDir(String dir, String type) throws IOException {
        Path d = Path.of(Objects.requireNonNull(dir, "dir"));
        Path mp = d.resolve(Layout.META_FILE);
        BusMeta m;
        try {
            BusFiles.checkTrustedDirectory(d, true);
            m = read(mp, true);
        } catch (NoSuchFileException e) {
            m = null;
        }
        String why;
        if (m == null) {
            why = "there is no rolling bus here (no " + mp + ")";
        } else if (m.kind != BusKind.ROLLING) {
            why = mp + " describes a single-file bus, not a rolling one";
        } else {
            return m;
        }
        throw new IllegalArgumentException(dir + ": no sizes given and " + why + " to take them from: a rolling"
                + " bus not made yet needs both sizes, new " + type + "(dir, segmentSize, recordSize)");
    }

    /**
     * Reads a metadata file (no links, regular files only, owner and mode checked).
     *
     * @param path         the file
     * @param allowForeign accept another owner or group/other write permission
     * @return the metadata, or null if there is no such file
     * @throws IOException if it cannot be read, is not trusted or is not a metadata file
     */
    public static BusMeta read(Path path, boolean allowForeign) throws IOException {
        byte[] data = BusFiles.readSmall(path, Layout.META_MAX_BYTES, allowForeign);
        return data == null ? null : decode(data, path.toString());
    }

    /**
     * Writes this metadata atomically.
     *
     * @param path      the file
     * @param perms     its permissions, e.g. "rw-------"
     * @param exclusive create only if absent (false returned when another process got there first)
     * @return true if written
     * @throws IOException if it cannot be written
     */
    public boolean write(Path path, String perms, boolean exclusive) throws IOException {
        return BusFiles.writeAtomic(path, encode(), perms, exclusive);
    }

    @Override
    public boolean equals(Object o) {
        if (!(o instanceof BusMeta m)) {
            return false;
        }
        return kind == m.kind && Objects.equals(id, m.id) && format == m.format && createdNs == m.createdNs
                && recordSize == m.recordSize && fileSize == m.fileSize && inode == m.inode
                && segmentSize == m.segmentSize && retention.equals(m.retention) && policy.equals(m.policy);
    }

    @Override
    public int hashCode() {
        return Objects.hash(kind, id, createdNs, recordSize, fileSize, inode, segmentSize, retention, policy);
    }

    @Override
    public String toString() {
        return "BusMeta[" + kind + " " + id + ", recordSize=" + recordSize() + ", size=" + size() + "]";
    }
}
