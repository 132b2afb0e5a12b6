package io.mappedbuspy;

import java.io.EOFException;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.LongBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.util.HashSet;
import java.util.HexFormat;
import java.util.Objects;
import java.util.OptionalInt;
import java.util.OptionalLong;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import io.mappedbuspy.internal.ArchiveFiles;
import io.mappedbuspy.internal.BusFiles;
import io.mappedbuspy.internal.BusMeta;
import io.mappedbuspy.internal.Frames;
import io.mappedbuspy.internal.GroupHold;
import io.mappedbuspy.internal.GroupProtocol;
import io.mappedbuspy.internal.Liveness;
import io.mappedbuspy.internal.MemoryMappedFile;
import io.mappedbuspy.internal.RollingDir;
import io.mappedbuspy.internal.RollingLayout;
import io.mappedbuspy.internal.TopicsFile;
import io.mappedbuspy.internal.UnsafeAccess;
import io.mappedbuspy.internal.WakeFile;

/**
 * A member of a work group of a bus, in a JVM: each record of the bus from the group's start goes to one member at a
 * time, is acknowledged once, and comes back to another member (Python or Java) if its holder dies, releases it or
 * lets its lease pass. The Java port of {@code mappedbus_py.groups.GroupReader} (docs/groups.md, "Java members"):
 * same group file, same protocol, run by the same C code ({@code _group.h}, through the project's JNI library:
 * without the library {@link #open()} fails).
 *
 * <pre>
 * try (GroupReader member = new GroupReader("/dev/shm/jobs", "resize").open()) {
 *     byte[] buf = new byte[member.recordSize()];
 *     while (member.waitNext(1, TimeUnit.SECONDS)) {
 *         int n = member.readBuffer(buf, 0);
 *         handle(buf, n);
 *         member.ack();
 *     }
 * }
 * </pre>
 *
 * <p>{@link #next()} takes the next record for this member if there is one now (a new one, or one taken back from a
 * dead, late or releasing member), {@link #waitNext} waits for one; the record is then current: {@link #readBuffer},
 * {@link #readMessage}, {@link #readType}, {@link #position()}, {@link #deliveries()}, and {@link #ack()},
 * {@link #release()} or {@link #reject()} settle it (true if it was still this member's delivery). {@link #current()}
 * gives it as a {@link GroupRecord} to settle later, for a member holding several. After {@code maxDeliveries}
 * deliveries a record goes to the group's dead-letter bus instead, as {@link #reject()} sends it (a rolling bus,
 * {@link #deadLetterPath()}). The member's liveness is an OFD lock on its member slot's byte: the kernel drops it when
 * the JVM dies, and the other members take its records back at once.
 *
 * <p><b>Framed buses</b> (docs/groups.md, "Framed buses"; protocol {@code _group_frames.h}): a message, whatever its
 * slot count, is what a member takes, acks, releases or rejects whole; its continuation slots are never handed out.
 * Read it with {@link #readPayload()} (any size), {@link #topic()}, {@link #flags()} or {@link #message()} (or a
 * batch's {@link GroupBatch#message}); {@link GroupRecord#topic()} names its topic. A dead letter carries the whole
 * message, with its topic, on a framed dead-letter bus. {@link #setTopics} hands out only some topics' messages.
 *
 * <pre>
 * try (GroupReader member = new GroupReader("/dev/shm/jobs-framed", "resizers").setTopics("resize").open()) {
 *     while (member.waitNext(1, TimeUnit.SECONDS)) {
 *         handle(member.topic(), member.readPayload());
 *         member.ack();
 *     }
 * }
 * </pre>
 *
 * <p><b>Archived segments</b> (docs/journal.md): on a rolling bus with an archive, a record whose segment moved there
 * (as it was, zstd or LZ4) is read from it, framed or not, and settled as any other (the group's state is in its file,
 * not in the segment). Records whose segments retention removed from both tiers before they were done are skipped,
 * once, with a {@link BusGapException} naming them; reading goes on after them.
 *
 * <p>One member per instance; an instance is used by one thread at a time.
 */
public final class GroupReader implements AutoCloseable {
    private static final long SCAN_NS = 1_000_000;        // a waiting member looks for redeliveries every 1 ms
    private static final long SPIN_NS = 20_000;           // then spins this long before sleeping
    private static final long SLEEP_MIN_NS = 20_000;      // sleeps back off from here
    private static final long SLEEP_MAX_NS = 1_000_000;   // to here
    private static final long FIRST = Layout.FIRST_RECORD_OFFSET;

    /** Where a new group starts (the first member's choice). */
    private enum Start { FIRST_RECORD, END, POSITION }

    /** What one attempt to take a record found. */
    private enum Found { TAKEN, NONE, END }

    /**
     * Where the segment of a record is, for {@link #select} (a rolling bus): read from the hot directory or the
     * archive; not made yet; or gone from both tiers (retention removed it: a later segment exists).
     */
    private enum Segment { READY, NOT_YET, GONE }

    // Looks at a segment not made yet between listings of the hot directory (for a segment gone meanwhile).
    private static final int LIST_EVERY = 64;

    private final String path;
    private final String group;
    private final byte[] groupName;
    private Start start = Start.FIRST_RECORD;
    private long startPosition;
    private OptionalInt window = OptionalInt.empty();
    private OptionalLong leaseNs = OptionalLong.empty();
    private OptionalInt maxDeliveries = OptionalInt.empty();
    private OptionalInt maxInFlight = OptionalInt.empty();
    private OptionalInt timeoutMs = OptionalInt.empty();
    private boolean allowForeign;
    private String name = "";
    private Set<String> topics;         // setTopics: the topics handed out (null in it: untagged); null: all

    // the bus
    private boolean rolling;
    private boolean framed;             // a framed bus: a message's first slot is the unit (_group_frames.h)
    private RollingDir dir;
    private String writersPath;
    private MappedBusReader r;          // the reader of segment k (or the file)
    private long k = -1;
    private MappedBusReader prev;       // a rolling bus's: the reader of the segment read before k (or null)
    private long prevK = -1;
    private long newest = -1;           // a rolling bus's: the newest segment seen (select)
    private int absentPolls;            // select's looks at a segment not made yet since the last listing
    private BusGapException pendingGap; // a gap met by readBatch after it took records: thrown by the next take
    private long sps;
    private long slot;
    private long segmentSize;
    private int recordSize;
    private Path groupPath;
    private Path deadPath;
    private RollingBusWriter dead;
    private GroupHold hold;             // a rolling bus's: the group's retention entry (group:NAME)

    // the group file
    private MemoryMappedFile mem;
    private GroupProtocol proto;
    private FileChannel live;
    private int liveFd;
    private long base;
    private long groupWindow;
    private long lease;
    private int maxDel;
    private int maxHeld;
    private int member = -1;
    private long mslot;                 // the member slot's address
    private LongBuffer words;           // per entry: the word this member last acquired there, or 0
    private int inFlight;
    private long delivered;
    private long acked;
    private long hintSeen;
    private int count;
    private long nextScan;

    // the current record
    private boolean hasCurrent;
    private long curG;
    private long curWord;
    private String curTopic;            // a framed bus's: the current message's topic (null: none)

    /**
     * A member of group {@code group} of the bus at {@code path} (a single-file bus or a rolling bus's directory,
     * made by a writer with metadata); call the setters, then {@link #open()}.
     *
     * @param path  the bus
     * @param group 1 to 64 bytes of letters, digits, '.', '_' or '-', not starting with '.'
     * @throws IllegalArgumentException if the group name is not one
     */
    public GroupReader(String path, String group) {
        this.path = Objects.requireNonNull(path, "path");
        this.group = Objects.requireNonNull(group, "group");
        this.groupName = checkGroupName(group);
    }

    /**
     * A new group starts at this record position (the first member's choice; default: the bus's first record).
     *
     * @param position a record boundary of the bus
     * @return this
     */
    public GroupReader setStart(long position) {
        if (position < FIRST) {
            throw new IllegalArgumentException("start is a record position (at least " + FIRST + "), got " + position);
        }
        start = Start.POSITION;
        startPosition = position;
        return this;
    }

    /**
     * A new group starts after the records there are now (Python's {@code start="end"}).
     *
     * @return this
     */
    public GroupReader setStartAtEnd() {
        start = Start.END;
        return this;
    }

    /**
     * The group's lease (default 30 s): a delivery not settled by then goes to another member.
     *
     * @param d above zero
     * @return this
     */
    public GroupReader setLease(Duration d) {
        if (d.isNegative() || d.isZero()) {
            throw new IllegalArgumentException("lease must be above 0, got " + d);
        }
        leaseNs = OptionalLong.of(d.toNanos());
        return this;
    }

    /**
     * Deliveries of a record before it goes to the dead-letter bus (default 5).
     *
     * @param n 1 to 254
     * @return this
     */
    public GroupReader setMaxDeliveries(int n) {
        if (n < 1 || n > 254) {
            throw new IllegalArgumentException("maxDeliveries must be from 1 to 254, got " + n);
        }
        maxDeliveries = OptionalInt.of(n);
        return this;
    }

    /**
     * Records a member may hold unsettled (default 0: up to the window).
     *
     * @param n 0 to the window
     * @return this
     */
    public GroupReader setMaxInFlight(int n) {
        if (n < 0) {
            throw new IllegalArgumentException("maxInFlight must be from 0 to the window, got " + n);
        }
        maxInFlight = OptionalInt.of(n);
        return this;
    }

    /**
     * Records between the oldest unsettled and the newest handed out (default 4096).
     *
     * @param n a power of two up to {@link Layout#GROUP_MAX_WINDOW}
     * @return this
     */
    public GroupReader setWindow(int n) {
        if (n < 1 || Integer.bitCount(n) != 1 || n > Layout.GROUP_MAX_WINDOW) {
            throw new IllegalArgumentException("window must be a power of two from 1 to " + Layout.GROUP_MAX_WINDOW
                    + ", got " + n);
        }
        window = OptionalInt.of(n);
        return this;
    }

    /**
     * The bus readers' rollback timeout (as {@link MappedBusReader#setTimeout}).
     *
     * @param ms milliseconds
     * @return this
     */
    public GroupReader setTimeout(int ms) {
        SlotScan.checkRollbackTimeout(ms);
        timeoutMs = OptionalInt.of(ms);
        return this;
    }

    /**
     * Accept files owned by another user or writable by group or others.
     *
     * @param allow whether to
     * @return this
     */
    public GroupReader setAllowForeign(boolean allow) {
        allowForeign = allow;
        return this;
    }

    /**
     * A name for people (listed by {@code mappedbus_py.groups(path)}).
     *
     * @param memberName at most {@link Layout#GROUP_MEMBER_NAME_MAX} bytes of UTF-8
     * @return this
     */
    public GroupReader setName(String memberName) {
        if (memberName.getBytes(StandardCharsets.UTF_8).length > Layout.GROUP_MEMBER_NAME_MAX) {
            throw new IllegalArgumentException("a member name is at most " + Layout.GROUP_MEMBER_NAME_MAX
                    + " bytes of UTF-8, got " + memberName);
        }
        name = memberName;
        return this;
    }

    /**
     * Hands out only the messages of these topics (a framed bus; Python's {@code topics=}): the others are skipped
     * (settled, no member gets them) by whichever member meets them, so give every member of a group the same
     * topics. A member's own option, not stored in the group file.
     *
     * @param names topic names; a null among them: messages without a topic too
     * @return this
     * @throws IllegalArgumentException if a name is not a topic name, or none is given
     */
    public GroupReader setTopics(String... names) {
        if (names == null || names.length == 0) {
            throw new IllegalArgumentException("setTopics takes one or more topic names (null: messages without a "
                    + "topic)");
        }
        Set<String> set = new HashSet<>(); // a HashSet: contains(null) asks for untagged messages
        for (String t : names) {
            if (t != null) {
                TopicsFile.checkName(t);
            }
            set.add(t);
        }
        topics = set;
        return this;
    }

    /**
     * Joins the group (making its file if this is the first member) and takes a member slot.
     *
     * @return this
     * @throws GroupFullException       if every member slot is held by a live member
     * @throws BusMismatchException     if the group exists with other options than those set, or belongs to a
     *                                  replaced bus
     * @throws CorruptBusException      if the group file is not one
     * @throws IllegalStateException    if the JNI library (with the group functions) is not loaded
     * @throws IllegalArgumentException if topics were set for a bus that is not framed
     * @throws IOException              if the bus or the group file cannot be opened
     */
    public GroupReader open() throws IOException {
        if (!GroupProtocol.LOADED) {
            throw new IllegalStateException("work groups need the JNI library: " + GroupProtocol.WHY);
        }
        if (mem != null) {
            throw new IllegalStateException("already open");
        }
        try {
            openBus();
            Path p = Path.of(path);
            Path gdir = rolling ? p.resolve(Layout.GROUP_DIR) : Path.of(path + Layout.GROUP_DIR_SUFFIX);
            groupPath = gdir.resolve(group + Layout.GROUP_SUFFIX);
            deadPath = gdir.resolve(group + Layout.GROUP_DEAD_SUFFIX);
            checkDir(gdir);
            if (!Files.exists(groupPath, LinkOption.NOFOLLOW_LINKS)) {
                create();
            }
            attach();
            if (rolling) {
                long s = mem.getLongAcquire(Layout.GROUP_START_OFFSET);
                hold = GroupHold.open(Consumers.openFor(p, true, allowForeign), group, dir.meta().id(),
                        positionOf(s));
                hold(true);
            }
        } catch (IOException | RuntimeException e) {
            close();
            throw e;
        }
        return this;
    }

    private void openBus() throws IOException {
        Path p = Path.of(path);
        if (!Files.exists(p, LinkOption.NOFOLLOW_LINKS)) {
            throw new NoSuchFileException(path, null, "no bus at this path (a group needs its bus)");
        }
        if (Files.isSymbolicLink(p)) {
            throw new UnsafeBusFileException(path + " is a symbolic link: bus files are never opened through links");
        }
        rolling = Files.isDirectory(p, LinkOption.NOFOLLOW_LINKS);
        if (rolling) {
            dir = RollingDir.open(path, allowForeign);
            framed = dir.meta().frames();
            checkTopics();
            recordSize = dir.meta().recordSize();
            segmentSize = dir.meta().segmentSize();
            sps = RollingLayout.slotsPerSegment(segmentSize, recordSize);
            writersPath = p.resolve(Layout.WRITERS_FILE).toString();
            long[] hot = dir.segments();
            newest = hot.length == 0 ? -1 : hot[hot.length - 1];
        } else {
            framed = BusMeta.ofFile(path, "GroupReader").frames();
            checkTopics();
            MappedBusReader x = new MappedBusReader(path).setAllowForeign(allowForeign).setFrames(framed);
            if (timeoutMs.isPresent()) {
                x.setTimeout(timeoutMs.getAsInt());
            }
            r = x.filterTopics(topics).open();
            k = 0;
            recordSize = r.recordSize();
            segmentSize = 0;
            sps = (r.fileSize() - FIRST) / (Layout.HEADER_SIZE + recordSize);
        }
        slot = Layout.HEADER_SIZE + recordSize;
    }

    private void checkTopics() {
        if (topics != null && !framed) {
            if (dir != null) {
                dir.close();
                dir = null;
            }
            throw new IllegalArgumentException("setTopics needs a framed bus: " + path + " has fixed-size records");
        }
    }

    private byte[] busId() {
        String id = rolling ? dir.meta().id() : r.busId();
        return id == null || id.isEmpty() ? new byte[Layout.GROUP_BUS_ID_SIZE] : HexFormat.of().parseHex(id);
    }

    private void checkDir(Path d) throws IOException {
        if (!Files.exists(d, LinkOption.NOFOLLOW_LINKS)) {
            try {
                Files.createDirectory(d, PosixFilePermissions.asFileAttribute(
                        PosixFilePermissions.fromString("rwx------")));
            } catch (java.nio.file.FileAlreadyExistsException e) {
                // made meanwhile by another member
            }
        }
        if (Files.isSymbolicLink(d)) {
            throw new UnsafeBusFileException(d + " is a symbolic link: group files are never opened through links");
        }
        BusFiles.checkTrustedDirectory(d, allowForeign);
    }

    // Makes the group file, all at once (a temporary file linked into place), unless another member did first.
    private void create() throws IOException {
        int w = window.orElse(Layout.GROUP_DEFAULT_WINDOW);
        int md = maxDeliveries.orElse(Layout.GROUP_DEFAULT_MAX_DELIVERIES);
        int mf = maxInFlight.orElse(0);
        if (mf > w) {
            throw new IllegalArgumentException("maxInFlight must be from 0 to the window " + w + ", got " + mf);
        }
        long g0;
        long pos;
        if (start == Start.POSITION) {
            pos = startPosition;
            g0 = gOf(pos);
        } else if (rolling) {
            long[] segs = start == Start.FIRST_RECORD ? dir.readableSegments() : dir.segments();
            if (start == Start.FIRST_RECORD || segs.length == 0) {
                long first = segs.length == 0 ? 0 : segs[0]; // the oldest record of either tier (the archive's)
                pos = start == Start.FIRST_RECORD ? first * segmentSize + FIRST : FIRST;
                g0 = start == Start.FIRST_RECORD ? first * sps : 0;
            } else {
                long last = segs[segs.length - 1];
                long limit = Math.min(Math.max(dir.limitOf(last), FIRST),
                        RollingLayout.endBoundary(segmentSize, recordSize));
                pos = last * segmentSize + limit;
                g0 = last * sps + (limit - FIRST) / slot;
            }
        } else if (start == Start.FIRST_RECORD) {
            pos = FIRST;
            g0 = 0;
        } else {
            r.seekToEnd();
            pos = r.position();
            g0 = (pos - FIRST) / slot;
        }
        int shift = Integer.numberOfTrailingZeros(w);
        ByteBuffer b = ByteBuffer.allocate(Layout.GROUP_ENTRIES_OFFSET + w * Layout.GROUP_ENTRY_SIZE)
                .order(ByteOrder.LITTLE_ENDIAN);
        b.putLong(Layout.GROUP_MAGIC_OFFSET, Layout.GROUP_MAGIC);
        b.putInt(Layout.GROUP_VERSION_OFFSET, Layout.GROUP_VERSION);
        b.putInt(Layout.GROUP_WINDOW_OFFSET, w);
        b.putInt(Layout.GROUP_MAX_DELIVERIES_OFFSET, md);
        b.putInt(Layout.GROUP_MAX_IN_FLIGHT_OFFSET, mf);
        b.putLong(Layout.GROUP_LEASE_NS_OFFSET, leaseNs.orElse(Layout.GROUP_DEFAULT_LEASE_NS));
        b.put(Layout.GROUP_BUS_ID_OFFSET, busId());
        b.putLong(Layout.GROUP_CREATED_NS_OFFSET, nowEpochNs());
        b.putLong(Layout.GROUP_START_POSITION_OFFSET, pos);
        b.putLong(Layout.GROUP_START_OFFSET, g0);
        b.putLong(Layout.GROUP_END_OFFSET, g0);
        for (long g = g0; g < g0 + w; g++) { // every entry EMPTY for its record's lap
            b.putLong((int) (Layout.GROUP_ENTRIES_OFFSET + (g & (w - 1)) * Layout.GROUP_ENTRY_SIZE),
                    GroupProtocol.word(g >>> shift, Layout.GROUP_EMPTY, 0, 0));
        }
        BusFiles.writeAtomic(groupPath, b.array(), "rw-------", true);
    }

    // The global slot index of a record position of this bus.
    private long gOf(long pos) {
        long kk = rolling ? pos / segmentSize : 0;
        long off = rolling ? pos % segmentSize : pos;
        if (pos < 0 || off < FIRST || (off - FIRST) % slot != 0 || (off - FIRST) / slot > sps) {
            throw new IllegalArgumentException(pos + " is not a record boundary of " + path);
        }
        return kk * sps + (off - FIRST) / slot;
    }

    private static long nowEpochNs() {
        java.time.Instant t = java.time.Instant.now();
        return t.getEpochSecond() * 1_000_000_000L + t.getNano();
    }

    private void attach() throws IOException {
        long size = Files.size(groupPath);
        if (size < Layout.GROUP_ENTRIES_OFFSET) {
            throw new CorruptBusException(groupPath + " is not a group file: " + size + " bytes, shorter than its "
                    + "header (" + Layout.GROUP_ENTRIES_OFFSET + ")");
        }
        MemoryMappedFile.OpenOptions o = new MemoryMappedFile.OpenOptions();
        o.lock = false;          // members' OFD locks are on the member slots
        o.allowShort = true;     // the file is its size exactly, not a whole number of pages
        o.allowForeign = allowForeign;
        mem = MemoryMappedFile.open(groupPath.toString(), size, o);
        readHeader(size);
        live = FileChannel.open(groupPath, StandardOpenOption.READ, StandardOpenOption.WRITE,
                LinkOption.NOFOLLOW_LINKS);
        Object ino = Files.getAttribute(groupPath, "unix:ino", LinkOption.NOFOLLOW_LINKS);
        if (!(ino instanceof Long) || (Long) ino != mem.inode()) {
            throw new BusReplacedException(groupPath + " was replaced while this member opened it");
        }
        liveFd = UnsafeAccess.descriptor(live);
        proto = new GroupProtocol(mem, liveFd, groupWindow);
        base = mem.baseAddress();
        words = LongBuffer.allocate((int) groupWindow);
        int i = 0;
        for (; i < Layout.GROUP_MEMBER_COUNT; i++) {
            Liveness.Hold h = Liveness.hold(live, memberByte(i));
            if (h == Liveness.Hold.TAKEN) {
                break;
            }
            if (h == Liveness.Hold.UNKNOWN) {
                throw new IOException(groupPath + ": the file system gives no open-file-description locks, which "
                        + "group members need for liveness");
            }
        }
        if (i == Layout.GROUP_MEMBER_COUNT) {
            throw new GroupFullException("group " + group + ": all " + Layout.GROUP_MEMBER_COUNT + " member slots "
                    + "are held by live members");
        }
        member = i;
        mslot = base + memberByte(i);
        // Its last holder is dead (we hold its lock): its records go back to the group before this member takes
        // any under the same owner number.
        proto.releaseOwner(i);
        delivered = MemoryMappedFile.getLongVolatileAt(mslot + Layout.GROUP_MEMBER_DELIVERED_OFFSET);
        acked = MemoryMappedFile.getLongVolatileAt(mslot + Layout.GROUP_MEMBER_ACKED_OFFSET);
        byte[] raw = new byte[Layout.GROUP_MEMBER_NAME_MAX];
        byte[] n = name.getBytes(StandardCharsets.UTF_8);
        System.arraycopy(n, 0, raw, 0, Math.min(n.length, raw.length));
        mem.putBytes(memberByte(i) + Layout.GROUP_MEMBER_NAME_OFFSET, raw, 0, raw.length);
        MemoryMappedFile.putIntVolatileAt(mslot + Layout.GROUP_MEMBER_PID_OFFSET, WakeFile.PID);
        MemoryMappedFile.putIntVolatileAt(mslot + Layout.GROUP_MEMBER_IN_FLIGHT_OFFSET, 0);
        MemoryMappedFile.putLongReleaseAt(mslot + Layout.GROUP_MEMBER_TAKEN_NS_OFFSET, nowEpochNs());
        hintSeen = mem.getLongAcquire(Layout.GROUP_HINT_OFFSET) - 1; // look once
        nextScan = 0;
    }

    private static long memberByte(int i) {
        return Layout.GROUP_MEMBERS_OFFSET + (long) i * Layout.GROUP_MEMBER_SIZE;
    }

    private void readHeader(long size) throws IOException {
        String p = groupPath.toString();
        if (mem.getLong(Layout.GROUP_MAGIC_OFFSET) != Layout.GROUP_MAGIC) {
            throw new CorruptBusException(p + " is not a group file: its magic is not a group's");
        }
        int version = mem.getInt(Layout.GROUP_VERSION_OFFSET);
        if (version != Layout.GROUP_VERSION) {
            throw new CorruptBusException(p + ": group file version " + version + ", this library reads "
                    + Layout.GROUP_VERSION);
        }
        int w = mem.getInt(Layout.GROUP_WINDOW_OFFSET);
        if (w < 1 || Integer.bitCount(w) != 1 || w > Layout.GROUP_MAX_WINDOW
                || size != Layout.GROUP_ENTRIES_OFFSET + (long) w * Layout.GROUP_ENTRY_SIZE) {
            throw new CorruptBusException(p + ": window " + w + " and size " + size + " disagree (a window is a power "
                    + "of two; the file takes " + Layout.GROUP_ENTRIES_OFFSET + " + window * "
                    + Layout.GROUP_ENTRY_SIZE + " bytes)");
        }
        int md = mem.getInt(Layout.GROUP_MAX_DELIVERIES_OFFSET);
        int mf = mem.getInt(Layout.GROUP_MAX_IN_FLIGHT_OFFSET);
        long ln = mem.getLong(Layout.GROUP_LEASE_NS_OFFSET);
        if (md < 1 || md > 254 || mf < 0 || mf > w || ln <= 0) {
            throw new CorruptBusException(p + ": corrupt group header (max_deliveries " + md + ", max_in_flight "
                    + mf + ", lease_ns " + ln + ")");
        }
        long s = mem.getLongAcquire(Layout.GROUP_START_OFFSET);
        long e = mem.getLongAcquire(Layout.GROUP_END_OFFSET);
        if (s < 0 || s > e || e - s > w) {
            throw new CorruptBusException(p + ": corrupt group file (start " + s + ", end " + e + ", window " + w + ")");
        }
        String have = "window=" + w + ", lease_ns=" + ln + ", max_deliveries=" + md + ", max_in_flight=" + mf;
        mismatch(window.isPresent() && window.getAsInt() != w, "window=" + window, have);
        mismatch(leaseNs.isPresent() && leaseNs.getAsLong() != ln, "lease_ns=" + leaseNs, have);
        mismatch(maxDeliveries.isPresent() && maxDeliveries.getAsInt() != md, "max_deliveries=" + maxDeliveries, have);
        mismatch(maxInFlight.isPresent() && maxInFlight.getAsInt() != mf, "max_in_flight=" + maxInFlight, have);
        byte[] id = new byte[Layout.GROUP_BUS_ID_SIZE];
        mem.getBytes(Layout.GROUP_BUS_ID_OFFSET, id, 0, id.length);
        byte[] ours = busId();
        if (!java.util.Arrays.equals(id, ours) && !allZero(id) && !allZero(ours)) {
            throw new BusMismatchException(p + " belongs to bus id " + HexFormat.of().formatHex(id) + ", not to this "
                    + "bus (" + HexFormat.of().formatHex(ours) + "): the bus was replaced");
        }
        groupWindow = w;
        lease = ln;
        maxDel = md;
        maxHeld = mf == 0 ? w : mf;
    }

    private void mismatch(boolean bad, String asked, String have) throws BusMismatchException {
        if (bad) {
            throw new BusMismatchException("group " + group + " exists with " + have + "; this member asks for "
                    + asked + " (leave it unset to join with the group's)");
        }
    }

    private static boolean allZero(byte[] b) {
        for (byte x : b) {
            if (x != 0) {
                return false;
            }
        }
        return true;
    }

    static byte[] checkGroupName(String name) {
        byte[] data = name.getBytes(StandardCharsets.UTF_8);
        boolean ok = data.length > 0 && data.length <= Layout.GROUP_NAME_MAX && !name.startsWith(".");
        for (int i = 0; ok && i < name.length(); i++) {
            char c = name.charAt(i);
            ok = Character.isLetterOrDigit(c) || c == '.' || c == '_' || c == '-';
        }
        if (!ok) {
            throw new IllegalArgumentException("group name " + name + ": 1 to " + Layout.GROUP_NAME_MAX + " bytes of "
                    + "letters, digits, '.', '_' or '-', not starting with '.'");
        }
        return data;
    }

    // -- the bus ------------------------------------------------------------------------------------------------

    private long positionOf(long g) {
        if (rolling) {
            return (g / sps) * segmentSize + FIRST + (g % sps) * slot;
        }
        return FIRST + g * slot;
    }

    private long offsetOf(long g) {
        return FIRST + (g - k * sps) * slot;
    }

    // Puts the scan of g's segment (select(g) made it r) at g's slot, framed or not: @return g's offset in it
    private long seekTo(long g) throws IOException {
        long off = offsetOf(g);
        if (r.position() != off) {
            r.seek(off);
        }
        return off;
    }

    // Makes r the reader of g's segment (docs/journal.md: from the hot directory, else, moved, from the archive;
    // the segment read before stays open, so going back to it, as redeliveries and a framed start do, opens nothing).
    private Segment select(long g) throws IOException {
        if (!rolling) {
            return Segment.READY;
        }
        long kk = g / sps;
        if (kk == k) {
            return Segment.READY;
        }
        if (kk == prevK) {
            MappedBusReader x = prev;
            prev = r;
            prevK = k;
            r = x;
            k = kk;
            return Segment.READY;
        }
        MappedBusReader x = openSegment(kk);
        if (x == null) {
            return gone(kk) ? Segment.GONE : Segment.NOT_YET;
        }
        if (prev != null) {
            prev.close();
        }
        prev = r;
        prevK = k;
        r = x;
        k = kk;
        newest = Math.max(newest, kk);
        return Segment.READY;
    }

    // Segment kk's reader, from the hot directory or the archive; null if it is in neither.
    private MappedBusReader openSegment(long kk) throws IOException {
        Path seg = dir.segmentPath(kk);
        if (Files.exists(seg, LinkOption.NOFOLLOW_LINKS)) {
            try {
                MappedBusReader x = MappedBusReader.forSegment(seg.toString(), segmentSize, recordSize, false)
                        .setAllowForeign(allowForeign)
                        .askingWriters(writersPath, Layout.joinPosition(kk, 0, segmentSize));
                configure(x).open();
                return x;
            } catch (NoSuchFileException e) {
                // moved to the archive (or removed) since
            }
        } else if (kk > newest) {
            return null; // past the newest segment seen: not made yet (a member at the end: one look), or gone(kk)
        }
        ArchiveFiles.Archived a = dir.archived(kk);
        if (a == null) {
            return null;
        }
        MemoryMappedFile m;
        try {
            m = ArchiveFiles.open(a, segmentSize, recordSize, allowForeign);
        } catch (NoSuchFileException e) {
            return null; // the archive's retention removed it since
        }
        try {
            return configure(MappedBusReader.forSegment(m.path, segmentSize, recordSize, true)).openArchived(m);
        } catch (RuntimeException e) {
            m.closeAndUnmap();
            throw e;
        }
    }

    private MappedBusReader configure(MappedBusReader x) {
        if (timeoutMs.isPresent()) {
            x.setTimeout(timeoutMs.getAsInt());
        }
        if (framed) {
            x.setFrames(true).filterTopics(topics).topicsAt(Path.of(path).resolve(Layout.TOPICS_FILE));
        }
        return x;
    }

    // Segment kk is in neither tier: true if it is gone (a later one exists: the newest segment is always hot), false
    // if it is not made yet. The hot directory is listed once in LIST_EVERY looks at a segment past the newest seen.
    private boolean gone(long kk) throws IOException {
        if (kk > newest) {
            if (absentPolls++ % LIST_EVERY != 0) {
                return false;
            }
            long[] hot = dir.segments();
            if (hot.length > 0) {
                newest = Math.max(newest, hot[hot.length - 1]);
            }
            if (kk > newest) {
                return false;
            }
        }
        absentPolls = 0;
        return Files.notExists(dir.segmentPath(kk), LinkOption.NOFOLLOW_LINKS) && dir.archived(kk) == null;
    }

    // The oldest segment after kk in either tier (kk is gone, so there is one).
    private long oldestAfter(long kk) throws IOException {
        for (long i : dir.readableSegments()) {
            if (i > kk) {
                return i;
            }
        }
        throw new IllegalStateException("no segment after " + kk + " in " + path + ": it is not gone");
    }

    // -- gaps (retention removed segments the group still needs: docs/groups.md) --------------------------------

    private BusGapException gap(long from, long to) {
        return new BusGapException(path + ": group " + group + " lost records " + positionOf(from) + " to "
                + positionOf(to) + " (exclusive, " + (to - from) + " slots): retention removed their segments (the "
                + "group lagged past max_consumer_lag with on_consumer_lag='expire', or the archive's retention "
                + "removed them); reading goes on after them", positionOf(from), positionOf(to), to - from);
    }

    // g (not yet taken) and the records after it in removed segments: skipped, as far as the window lets; one
    // BusGapException names them (Python's _lose_new).
    private void loseNew(long g) throws IOException {
        long first = g;
        long stop = oldestAfter(g / sps) * sps;
        if (framed) {
            // messages never span segments: the removed ones are one skip to stop
            if (g < stop && proto.nextNewFramed() == g) {
                proto.skipFramed(g, proto.seenWord(), stop - g);
                advance();
                hold(true);
                throw gap(first, stop);
            }
            return;
        }
        while (g < stop && proto.nextNew() == g) { // else another member moved on, or the window is full
            proto.skip(g);
            g++;
        }
        if (g > first) {
            advance();
            hold(true);
            throw gap(first, g);
        }
    }

    // g, seen as `seen` (another's, takeable), lies in a removed segment: neither redelivered nor dead-lettered (its
    // payload is gone): skipped, a gap (Python's _lose_taken).
    private void loseTaken(long g, long seen) throws IOException {
        if (proto.finish(g, seen, Layout.GROUP_SKIP)) {
            advance();
            hold(true);
            throw gap(g, g + 1);
        }
    }

    // -- acquiring ----------------------------------------------------------------------------------------------

    private void took(long g, long w, String topic) {
        words.put((int) (g & (groupWindow - 1)), w);
        hasCurrent = true;
        curG = g;
        curWord = w;
        curTopic = topic;
        inFlight++;
        delivered++;
        MemoryMappedFile.putLongReleaseAt(mslot + Layout.GROUP_MEMBER_DELIVERED_OFFSET, delivered);
        MemoryMappedFile.putIntVolatileAt(mslot + Layout.GROUP_MEMBER_IN_FLIGHT_OFFSET, inFlight);
    }

    private Found acquireNew() throws IOException {
        if (framed) {
            return acquireNewFramed();
        }
        for (;;) {
            long g = proto.nextNew();
            if (g < 0) {
                if (g == GroupProtocol.FULL) {
                    // skipped entries (rolled back) are passed by `start` only when something moves it: move it
                    // here, so a run of skips longer than the window does not stop the group
                    if (passSkipped()) {
                        continue;
                    }
                    return Found.NONE;
                }
                throw corruptEnd();
            }
            Segment at = select(g);
            if (at == Segment.GONE) {
                loseNew(g); // throws BusGapException once it skipped any
                continue;
            }
            if (at == Segment.NOT_YET) {
                return Found.NONE;
            }
            long off = seekTo(g);
            boolean found;
            try {
                found = r.next();
            } catch (EOFException e) {
                if (!rolling) {
                    return Found.END;
                }
                proto.skip(g); // a rolled-back tail of a segment
                continue;
            }
            if (!found) {
                return Found.NONE;
            }
            if (r.recordPosition() != off) { // g's slot was rolled back: no member gets it
                proto.skip(g);
                continue;
            }
            long w = proto.takeNew(g, member, System.nanoTime() + lease, positionOf(g));
            if (w == 0) {
                continue; // another member took it
            }
            took(g, w, null);
            return Found.TAKEN;
        }
    }

    // acquireNew on a framed bus (_group_frames.h): g is a message's first slot; the message is taken whole and `end`
    // moves past all of its slots.
    private Found acquireNewFramed() throws IOException {
        for (;;) {
            long g = proto.nextNewFramed();
            if (g < 0) {
                if (g == GroupProtocol.FULL) {
                    if (passSkipped()) { // as in acquireNew: skipped messages (rolled back, other topics)
                        continue;
                    }
                    return Found.NONE;
                }
                if (g == GroupProtocol.ASK) { // entry(end) taken, its slot count not trusted: read it from the bus
                    long a = proto.askedSlot();
                    long n = busSlots(a);
                    if (n <= 0) {
                        return Found.NONE;
                    }
                    proto.passEnd(a, n);
                    continue;
                }
                throw corruptEnd();
            }
            long seen = proto.seenWord();
            Segment at = select(g);
            if (at == Segment.GONE) {
                loseNew(g); // throws BusGapException once it skipped any
                continue;
            }
            if (at == Segment.NOT_YET) {
                return Found.NONE;
            }
            long off = seekTo(g);
            boolean found;
            try {
                found = r.next();
            } catch (EOFException e) {
                // the scan passed every message from g to the end of the file (rolled back, or of topics this member
                // does not read): skipped whole; a single file is then read to its end
                skipPassed(g, seen, off, FIRST + sps * slot);
                if (!rolling) {
                    advance(); // over the skipped ones: the group is done once the start meets the end
                    return Found.END;
                }
                continue;
            }
            if (!found) {
                return Found.NONE;
            }
            if (r.recordPosition() != off) {
                // the scan passed messages from g on (rolled back, or of other topics): each skipped whole, by its
                // final slot count (its status left 0: the meta is final), up to the message it stopped at
                skipPassed(g, seen, off, r.recordPosition());
                continue;
            }
            MemoryMappedFile m = r.mapped();
            long n = Layout.frameMetaSlots(m.getInt(off + Layout.METADATA_OFFSET));
            long w = proto.takeNewFramed(g, seen, n, member, System.nanoTime() + lease, positionOf(g));
            if (w == 0) {
                continue; // another member took it
            }
            took(g, w, topicAt(m, off, g));
            return Found.TAKEN;
        }
    }

    private CorruptBusException corruptEnd() {
        return new CorruptBusException(groupPath + ": the entry of record " + mem.getLongAcquire(Layout.GROUP_END_OFFSET)
                + " holds a word the protocol never writes there: corrupt file");
    }

    // Skips the messages of r's mapping from off (message g, its entry seen as `seen`) to stop, while `end` follows
    // (another member may skip them too).
    private void skipPassed(long g, long seen, long off, long stop) {
        MemoryMappedFile m = r.mapped();
        if (off >= stop) {
            return; // g is the end of a single file: no slot there
        }
        for (;;) {
            long n = Frames.skipSlots(m.getIntAcquire(off + Layout.METADATA_OFFSET));
            proto.skipFramed(g, seen, n);
            off += n * slot;
            g += n;
            if (off >= stop || proto.nextNewFramed() != g) {
                return;
            }
            seen = proto.seenWord();
        }
    }

    // True if `start` moved (over done entries) since this member last looked.
    private boolean passSkipped() throws IOException {
        long before = mem.getLongAcquire(Layout.GROUP_START_OFFSET);
        if (advance() != before) {
            hold(false);
            return true;
        }
        return false;
    }

    // The slot count of the settled message at g, read from the bus (its first slot's status left 0, so its meta is
    // final); 0 if its segment is not there.
    private long busSlots(long g) throws IOException {
        if (select(g) != Segment.READY) {
            return 0;
        }
        return Frames.skipSlots(r.mapped().getIntAcquire(offsetOf(g) + Layout.METADATA_OFFSET));
    }

    // Moves `start` over done records: the group protocol's advance, or on a framed bus its advance by messages.
    private long advance() throws IOException {
        if (!framed) {
            return proto.advance();
        }
        for (;;) {
            long s = proto.advanceFramed();
            if (s != GroupProtocol.ASK) {
                return s;
            }
            long a = proto.askedSlot();
            long n = busSlots(a);
            if (n <= 0) {
                return mem.getLongAcquire(Layout.GROUP_START_OFFSET);
            }
            proto.passStart(a, n);
        }
    }

    // The topic of the framed message at off of r's mapping (message g): its name, or null for none.
    private String topicAt(MemoryMappedFile m, long off, long g) throws CorruptBusException {
        return r.topicName(m.getInt(off + Layout.PAYLOAD_OFFSET + Layout.FRAME_TOPIC_OFFSET), positionOf(g));
    }

    // Takes a record back from a dead or late member (or a released one); past maxDeliveries it goes to the
    // dead-letter bus instead.
    private boolean redeliver(long now) throws IOException {
        for (;;) {
            long g = proto.findRedelivery(now, member);
            if (g < 0) {
                return false;
            }
            long seen = proto.seenWord();
            Segment at = select(g);
            if (at == Segment.GONE) {
                loseTaken(g, seen); // throws BusGapException if it skipped g
                continue;
            }
            if (GroupProtocol.wordDeliveries(seen) >= maxDel) {
                deadLetter(g, seen, Layout.GROUP_DEAD_LETTERED_OFFSET);
                continue;
            }
            if (at == Segment.NOT_YET) {
                return false;
            }
            long w = proto.redeliver(g, seen, member, System.nanoTime() + lease);
            if (w == 0) {
                continue;
            }
            took(g, w, framed ? topicAt(r.mapped(), offsetOf(g), g) : null);
            return true;
        }
    }

    private Found acquire() throws IOException {
        checkOpen();
        if (pendingGap != null) {
            BusGapException gap = pendingGap;
            pendingGap = null;
            throw gap;
        }
        if (inFlight >= maxHeld) {
            return Found.NONE;
        }
        long hint = mem.getLongAcquire(Layout.GROUP_HINT_OFFSET);
        if (hint != hintSeen) {
            hintSeen = hint;
            if (redeliver(System.nanoTime())) {
                return Found.TAKEN;
            }
        }
        count++;
        if ((count & 1023) == 0) {
            long now = System.nanoTime();
            if (now - nextScan >= 0) {
                nextScan = now + SCAN_NS;
                if (redeliver(now)) {
                    return Found.TAKEN;
                }
            }
        }
        Found found = acquireNew();
        if (found == Found.TAKEN) {
            return found;
        }
        long now = System.nanoTime();
        if (now - nextScan >= 0) {
            nextScan = now + SCAN_NS;
            if (redeliver(now)) {
                return Found.TAKEN;
            }
        }
        if (found == Found.END && mem.getLongAcquire(Layout.GROUP_START_OFFSET)
                >= mem.getLongAcquire(Layout.GROUP_END_OFFSET)) {
            return Found.END;
        }
        return Found.NONE;
    }

    private void checkOpen() {
        if (mem == null || member < 0) {
            throw new IllegalStateException("the GroupReader of group " + group + " is not open (or closed)");
        }
    }

    private EOFException endOfBus() {
        return new EOFException("end of bus: every record of " + path + " is done in group " + group);
    }

    /**
     * Takes the next record for this member if there is one now: a new one, or one taken back from a member that
     * died, let its lease pass or released it. It is then current.
     *
     * @return true if a record is current now; false if none is there now (or this member holds
     *         {@code maxInFlight})
     * @throws EOFException          once a single-file bus is read to its end and every record of it is done
     * @throws BusGapException       once for records retention removed (their segments gone from the hot directory
     *                               and the archive) before they were done: they are skipped, its {@code lostFrom},
     *                               {@code lostTo} and {@code lost} name them, and the next call reads on after them
     * @throws BusTruncatedException if the group file or the bus was truncated
     * @throws IOException           if a segment cannot be opened or the dead-letter bus written
     */
    public boolean next() throws IOException {
        Found f = acquire();
        if (f == Found.END) {
            throw endOfBus();
        }
        return f == Found.TAKEN;
    }

    /**
     * Waits up to {@code timeout} for the next record for this member (spinning briefly, then sleeping from 20 us
     * to 1 ms between looks; a member looks for redeliveries every 1 ms while it waits).
     *
     * @param timeout how long; 0: only look once
     * @param unit    its unit
     * @return true if a record is current now, false if none came in time
     * @throws EOFException         once a single-file bus is read to its end and every record of it is done
     * @throws InterruptedException if the thread is interrupted while waiting
     * @throws IOException          as {@link #next()}
     */
    public boolean waitNext(long timeout, TimeUnit unit) throws IOException, InterruptedException {
        if (timeout < 0) {
            throw new IllegalArgumentException("timeout must be >= 0, got " + timeout);
        }
        if (next()) {
            return true;
        }
        long now = System.nanoTime();
        long limit = unit.toNanos(timeout);
        long deadline = now + limit;
        long spinEnd = now + SPIN_NS;
        long ns = SLEEP_MIN_NS;
        for (;;) {
            if (limit == 0) {
                return false;
            }
            if (next()) {
                return true;
            }
            now = System.nanoTime();
            if (now - deadline >= 0) {
                return false;
            }
            if (now - spinEnd < 0) {
                Thread.onSpinWait();
                continue;
            }
            hold(true);
            LockSupport.parkNanos(Math.min(ns, deadline - now));
            if (Thread.interrupted()) {
                throw new InterruptedException("interrupted while waiting for a record of group " + group);
            }
            ns = Math.min(ns * 2, SLEEP_MAX_NS);
        }
    }

    /**
     * Takes up to {@code batch.capacity()} records for this member into {@code batch} (Python's {@code read_batch}):
     * waits up to {@code timeout} for the first, as {@link #waitNext}, then takes those there now (new ones, or ones
     * taken back), up to {@code maxInFlight}. Each is delivered to this member as {@link #next()} delivers it; the last
     * is current. Settle them with {@link #ackBatch}.
     *
     * @param batch   where they go (its earlier records are dropped, not settled)
     * @param timeout how long to wait for the first; 0: only look once
     * @param unit    its unit
     * @return how many it took (0: none came in time)
     * @throws EOFException         once a single-file bus is read to its end and every record of it is done (with none
     *                              taken by this call)
     * @throws BusGapException      as {@link #next()}, with none taken by this call (a gap met after some were taken
     *                              is thrown by the next call)
     * @throws InterruptedException if the thread is interrupted while waiting
     * @throws IOException          as {@link #next()}
     */
    public int readBatch(GroupBatch batch, long timeout, TimeUnit unit) throws IOException, InterruptedException {
        if (batch.recordSize() != recordSize) {
            throw new IllegalArgumentException("a batch of " + batch.recordSize() + "-byte records for a bus of "
                    + recordSize + "-byte records");
        }
        batch.clear();
        if (!waitNext(timeout, unit)) {
            return 0;
        }
        do {
            MemoryMappedFile m = currentMapping();
            long off = offsetOf(curG);
            if (framed) {
                batch.addFramed(current(), readFrame(m, off, curG), m.getInt(off + Layout.METADATA_OFFSET),
                        m.getInt(off + Layout.PAYLOAD_OFFSET + Layout.FRAME_FLAGS_OFFSET));
            } else {
                batch.add(new GroupRecord(positionOf(curG), curG, curWord, null), m, off + Layout.PAYLOAD_OFFSET,
                        m.getInt(off + Layout.METADATA_OFFSET));
            }
        } while (!batch.full() && takeMore());
        return batch.size();
    }

    // One more record for a batch that holds some: a gap met now is the next take's to throw, after the caller has
    // the records taken (which it settles).
    private boolean takeMore() throws IOException {
        try {
            return acquire() == Found.TAKEN;
        } catch (BusGapException gap) {
            pendingGap = gap;
            return false;
        }
    }

    /**
     * Acks each record of {@code batch} (Python's {@code ack_batch}).
     *
     * @param batch records this member read
     * @return how many were still this member's deliveries
     * @throws IOException if the group file was truncated
     */
    public int ackBatch(GroupBatch batch) throws IOException {
        int n = 0;
        for (int i = 0; i < batch.size(); i++) {
            if (ack(batch.record(i))) {
                n++;
            }
        }
        return n;
    }

    // -- the current record -------------------------------------------------------------------------------------

    private MemoryMappedFile currentMapping() throws IOException {
        if (!hasCurrent) {
            throw new IllegalStateException("no current record: call next() or waitNext() first");
        }
        checkOpen();
        if (select(curG) != Segment.READY) {
            throw new BusReplacedException("the segment of record " + positionOf(curG) + " is gone from both tiers");
        }
        return r.mapped();
    }

    /**
     * The current record as a {@link GroupRecord}, to settle later.
     *
     * @return the current record's delivery
     */
    public GroupRecord current() {
        if (!hasCurrent) {
            throw new IllegalStateException("no current record: call next() or waitNext() first");
        }
        return new GroupRecord(positionOf(curG), curG, curWord, curTopic);
    }

    /** @return the current record's bus position */
    public long position() {
        return current().position();
    }

    /** @return how many times the current record was handed out, this delivery included (1: the first) */
    public int deliveries() {
        if (!hasCurrent) {
            throw new IllegalStateException("no current record: call next() or waitNext() first");
        }
        return GroupProtocol.wordDeliveries(curWord);
    }

    /**
     * The type (object message) or byte length (byte array) of the current record.
     *
     * @return the record's metadata
     * @throws IOException if its segment cannot be opened
     */
    public int readType() throws IOException {
        MemoryMappedFile m = currentMapping();
        return m.getInt(offsetOf(curG) + Layout.METADATA_OFFSET);
    }

    /**
     * Reads the current record into a message.
     *
     * @param message the message to fill
     * @param <T>     the message class
     * @return {@code message}
     * @throws IllegalStateException if the bus is framed (read a message with {@link #readPayload()})
     * @throws IOException           if its segment cannot be opened
     */
    public <T extends MappedBusMessage> T readMessage(T message) throws IOException {
        unframed();
        MemoryMappedFile m = currentMapping();
        message.read(m, offsetOf(curG) + Layout.PAYLOAD_OFFSET);
        return message;
    }

    /**
     * Copies the current record's bytes (its metadata holds their number).
     *
     * @param dst    destination array
     * @param offset index of the first destination byte
     * @return the number of bytes copied
     * @throws CorruptBusException   if the stored length is negative or larger than the record size
     * @throws IllegalStateException if the bus is framed (read a message with {@link #readPayload()})
     * @throws IOException           if its segment cannot be opened
     */
    public int readBuffer(byte[] dst, int offset) throws IOException {
        unframed();
        MemoryMappedFile m = currentMapping();
        long pos = offsetOf(curG);
        int length = m.getInt(pos + Layout.METADATA_OFFSET);
        if (length < 0 || length > recordSize) {
            throw new CorruptBusException("record at position " + positionOf(curG) + " of " + path + " has length "
                    + length + " outside 0.." + recordSize + " (not a byte-array record)");
        }
        if (offset < 0 || offset > dst.length - length) {
            throw new IllegalArgumentException("no room for " + length + " bytes at offset " + offset
                    + " in an array of length " + dst.length);
        }
        m.getBytes(pos + Layout.PAYLOAD_OFFSET, dst, offset, length);
        return length;
    }

    private void unframed() {
        if (framed) {
            throw new IllegalStateException(path + " is a framed bus: read its messages with readPayload() or "
                    + "message(); readBuffer and readMessage take fixed-size records");
        }
    }

    private void framedOnly() {
        if (!framed) {
            throw new IllegalStateException(path + " is not a framed bus: read its records with readBuffer or "
                    + "readMessage");
        }
    }

    // The payload of the framed message at off of m, checked (its slots and length as the readers check them).
    private byte[] readFrame(MemoryMappedFile m, long off, long g) throws CorruptBusException {
        int meta = m.getInt(off + Layout.METADATA_OFFSET);
        long length = m.getLong(off + Layout.PAYLOAD_OFFSET + Layout.FRAME_LENGTH_OFFSET);
        Frames.committedSlots(rolling ? path + " (segment " + g / sps + ")" : path, off, meta, length,
                rolling ? segmentSize : r.fileSize(), slot);
        if (length > Integer.MAX_VALUE - 8) {
            throw new IllegalStateException("the message at position " + positionOf(g) + " of " + path + " has "
                    + length + " bytes: more than a Java array holds");
        }
        byte[] b = new byte[(int) length];
        m.getBytes(off + Layout.FRAME_PAYLOAD_OFFSET, b, 0, b.length);
        return b;
    }

    /**
     * The current message's payload, whole, of any size (a framed bus).
     *
     * @return its bytes, in a new array
     * @throws IllegalStateException if the bus is not framed
     * @throws CorruptBusException   if its slot count or length is not a committed message's
     * @throws IOException           if its segment cannot be opened
     */
    public byte[] readPayload() throws IOException {
        framedOnly();
        MemoryMappedFile m = currentMapping();
        return readFrame(m, offsetOf(curG), curG);
    }

    /**
     * The current message's topic (a framed bus).
     *
     * @return its name, or null for a message without one
     */
    public String topic() {
        framedOnly();
        current();
        return curTopic;
    }

    /**
     * The current message's flags (a framed bus; bits 0..7: its encoding, {@link Layout#FRAME_ENCODING_BYTES}, ...).
     *
     * @return the flags
     * @throws IOException if its segment cannot be opened
     */
    public int flags() throws IOException {
        framedOnly();
        MemoryMappedFile m = currentMapping();
        return m.getInt(offsetOf(curG) + Layout.PAYLOAD_OFFSET + Layout.FRAME_FLAGS_OFFSET);
    }

    /**
     * The current message, copied out whole: position, topic, flags and payload (a framed bus).
     *
     * @return the message
     * @throws IOException as {@link #readPayload()}
     */
    public FrameMessage message() throws IOException {
        byte[] payload = readPayload();
        return new FrameMessage(positionOf(curG), curTopic, flags(), payload);
    }

    /** @return whether the bus is framed (set by {@link #open()}) */
    public boolean framed() {
        return framed;
    }

    // -- settling -----------------------------------------------------------------------------------------------

    private void forget(long g, long word) {
        int i = (int) (g & (groupWindow - 1));
        if (words.get(i) == word) {
            words.put(i, 0);
            if (inFlight > 0) {
                inFlight--;
            }
            MemoryMappedFile.putIntVolatileAt(mslot + Layout.GROUP_MEMBER_IN_FLIGHT_OFFSET, inFlight);
        }
    }

    private boolean finish(long g, long word, int state) throws IOException {
        boolean acking = state == Layout.GROUP_ACKED;
        boolean ok;
        if (!acking) {
            ok = proto.finish(g, word, state);
        } else if (!framed) {
            ok = proto.ack(g, word); // an ack moves the start on too
        } else {
            long a = proto.ackFramed(g, word);
            ok = a != 0;
            if (a == GroupProtocol.ASK) {
                advance(); // the start waits on a slot count to read from the bus
            }
        }
        forget(g, word);
        if (ok && acking) {
            acked++;
            MemoryMappedFile.putLongReleaseAt(mslot + Layout.GROUP_MEMBER_ACKED_OFFSET, acked);
            hold(false);
        }
        return ok;
    }

    // Commits the group's start to its retention entry (a rolling bus) if it moved: now, or at most every
    // GroupHold.HOLD_NS.
    private void hold(boolean now) throws IOException {
        if (hold != null) {
            long s = mem.getLongAcquire(Layout.GROUP_START_OFFSET);
            hold.hold(s, positionOf(s), now);
        }
    }

    // Appends g to the dead-letter bus, then marks it DEAD (a member dying between the two makes the next one
    // append it again: at least once). True if this call marked it.
    private boolean deadLetter(long g, long word, int counter) throws IOException {
        if (MemoryMappedFile.getLongVolatileAt(base + Layout.GROUP_ENTRIES_OFFSET
                + (g & (groupWindow - 1)) * Layout.GROUP_ENTRY_SIZE) != word) {
            return false;
        }
        Segment at = select(g);
        if (at == Segment.GONE) {
            loseTaken(g, word);
            return false;
        }
        if (at == Segment.NOT_YET) {
            return false;
        }
        MemoryMappedFile m = r.mapped();
        long off = offsetOf(g);
        byte[] frame = null;
        if (framed) {
            frame = readFrame(m, off, g);
        }
        ByteBuffer letter = ByteBuffer.allocate(Layout.GROUP_DEAD_HEADER_SIZE + (framed ? frame.length : recordSize))
                .order(ByteOrder.LITTLE_ENDIAN);
        letter.putLong(Layout.GROUP_DEAD_POSITION_OFFSET, positionOf(g));
        letter.putInt(Layout.GROUP_DEAD_DELIVERIES_OFFSET, GroupProtocol.wordDeliveries(word));
        letter.putInt(Layout.GROUP_DEAD_META_OFFSET, m.getInt(off + Layout.METADATA_OFFSET));
        letter.put(Layout.GROUP_DEAD_NAME_OFFSET, groupName);
        if (framed) {
            // the whole message, its topic kept, on a framed dead-letter bus
            System.arraycopy(frame, 0, letter.array(), Layout.GROUP_DEAD_HEADER_SIZE, frame.length);
            deadWriter().write(letter.array(), 0, letter.capacity(), topicAt(m, off, g), Layout.FRAME_ENCODING_BYTES);
        } else {
            m.getBytes(off + Layout.PAYLOAD_OFFSET, letter.array(), Layout.GROUP_DEAD_HEADER_SIZE, recordSize);
            deadWriter().write(letter.array(), 0, letter.capacity());
        }
        boolean ok = proto.finish(g, word, Layout.GROUP_DEAD);
        forget(g, word);
        if (ok) {
            mem.getAndAddLong(counter, 1);
            if (counter != Layout.GROUP_DEAD_LETTERED_OFFSET) {
                mem.getAndAddLong(Layout.GROUP_DEAD_LETTERED_OFFSET, 1);
            }
            advance();
            hold(false);
        }
        return ok;
    }

    private RollingBusWriter deadWriter() throws IOException {
        if (dead == null) {
            int record = Layout.GROUP_DEAD_HEADER_SIZE + recordSize;
            long slotBytes = Layout.HEADER_SIZE + record;
            long segment = Math.max(1L << 20, ((FIRST + 64 * slotBytes + 4095) / 4096) * 4096);
            if (framed) {
                // a message of the bus with its header fits one of its segments
                long size = rolling ? segmentSize : r.fileSize();
                segment = Math.max(segment, ((size + FIRST + 2 * slotBytes + 4095) / 4096) * 4096);
            }
            RollingBusWriter w = Files.exists(deadPath, LinkOption.NOFOLLOW_LINKS)
                    ? new RollingBusWriter(deadPath.toString()) : new RollingBusWriter(deadPath.toString(), segment,
                    record);
            w.setAllowForeign(allowForeign).setFrames(framed).open();
            if (w.recordSize() != record) {
                w.close();
                throw new BusMismatchException(deadPath + " takes records of " + w.recordSize() + " bytes, not the "
                        + record + " of this group's dead letters");
            }
            dead = w;
        }
        return dead;
    }

    private boolean settle(long g, long word, int state) throws IOException {
        checkOpen();
        if (word == 0 || GroupProtocol.wordTag(word) != proto.tag(g) || GroupProtocol.wordOwner(word) != member) {
            return false; // not delivered to this member, or not any more
        }
        if (state == Layout.GROUP_DEAD) {
            return deadLetter(g, word, Layout.GROUP_REJECTED_OFFSET);
        }
        return finish(g, word, state);
    }

    private GroupRecord currentOrThrow() {
        if (!hasCurrent) {
            throw new IllegalStateException("nothing read yet: ack() without a record settles the record read last");
        }
        return new GroupRecord(positionOf(curG), curG, curWord, curTopic);
    }

    /**
     * Settles the current record as done.
     *
     * @return true if it was still this member's delivery; false if it was taken away (lease passed, this member
     *         seen dead) or settled already
     * @throws IOException if the group file was truncated
     */
    public boolean ack() throws IOException {
        return ack(currentOrThrow());
    }

    /**
     * Settles a record delivered to this member as done.
     *
     * @param rec its delivery
     * @return true if it was still this member's delivery
     * @throws IOException if the group file was truncated
     */
    public boolean ack(GroupRecord rec) throws IOException {
        return settle(rec.g, rec.word, Layout.GROUP_ACKED);
    }

    /**
     * Gives the current record back undone: another member (or this one) gets it next, its delivery count one higher.
     *
     * @return true if it was still this member's
     * @throws IOException if the group file was truncated
     */
    public boolean release() throws IOException {
        return release(currentOrThrow());
    }

    /**
     * Gives a record back undone.
     *
     * @param rec its delivery
     * @return true if it was still this member's
     * @throws IOException if the group file was truncated
     */
    public boolean release(GroupRecord rec) throws IOException {
        return settle(rec.g, rec.word, Layout.GROUP_RELEASED);
    }

    /**
     * Sends the current record to the group's dead-letter bus now, undone.
     *
     * @return true if it was still this member's
     * @throws IOException if the dead-letter bus cannot be written
     */
    public boolean reject() throws IOException {
        return reject(currentOrThrow());
    }

    /**
     * Sends a record to the group's dead-letter bus now, undone.
     *
     * @param rec its delivery
     * @return true if it was still this member's
     * @throws IOException if the dead-letter bus cannot be written
     */
    public boolean reject(GroupRecord rec) throws IOException {
        return settle(rec.g, rec.word, Layout.GROUP_DEAD);
    }

    /**
     * Settles the record at a bus position this member holds as done (Python's {@code ack(position)}).
     *
     * @param position the record's position
     * @return true if it was still this member's delivery
     * @throws IllegalArgumentException if {@code position} is not a record position of the bus
     * @throws IOException              if the group file was truncated
     */
    public boolean ack(long position) throws IOException {
        return settleAt(position, Layout.GROUP_ACKED);
    }

    /**
     * Gives the record at a bus position this member holds back undone.
     *
     * @param position the record's position
     * @return true if it was still this member's delivery
     * @throws IOException if the group file was truncated
     */
    public boolean release(long position) throws IOException {
        return settleAt(position, Layout.GROUP_RELEASED);
    }

    /**
     * Sends the record at a bus position this member holds to the dead-letter bus now.
     *
     * @param position the record's position
     * @return true if it was still this member's delivery
     * @throws IOException if the dead-letter bus cannot be written
     */
    public boolean reject(long position) throws IOException {
        return settleAt(position, Layout.GROUP_DEAD);
    }

    // A position: the delivery this member last acquired in its record's entry.
    private boolean settleAt(long position, int state) throws IOException {
        checkOpen();
        long kk = rolling ? position / segmentSize : 0;
        long off = rolling ? position % segmentSize : position;
        if (position < 0 || off < FIRST || (off - FIRST) % slot != 0 || (off - FIRST) / slot >= sps) {
            throw new IllegalArgumentException(position + " is not a record position of " + path);
        }
        long g = kk * sps + (off - FIRST) / slot;
        return settle(g, words.get((int) (g & (groupWindow - 1))), state);
    }

    // -- state --------------------------------------------------------------------------------------------------

    /** @return records this member holds unsettled */
    public int inFlight() {
        return inFlight;
    }

    /** @return this member's slot in the group (0..127) */
    public int member() {
        return member;
    }

    /** @return payload bytes per record */
    public int recordSize() {
        return recordSize;
    }

    /** @return the group file's path (set by {@link #open()}) */
    public Path groupPath() {
        return groupPath;
    }

    /** @return the dead-letter bus's directory (a rolling bus, made at the first dead letter) */
    public Path deadLetterPath() {
        return deadPath;
    }

    /** @return the group's name */
    public String group() {
        return group;
    }

    /** @return the bus's path */
    public String path() {
        return path;
    }

    /**
     * Gives back every record this member holds (others get them at once), lets go of its member slot and unmaps.
     */
    @Override
    public void close() {
        if (hold != null) {
            try {
                if (mem != null) {
                    hold(true);
                }
            } catch (IOException | RuntimeException e) {
                // the entry keeps its last commit; retention holds from there
            }
            hold.close();
            hold = null;
        }
        if (proto != null && member >= 0) {
            try {
                proto.releaseOwner(member);
            } catch (BusTruncatedException e) {
                // nothing to give back in a truncated file; the slot goes with the lock below
            }
        }
        member = -1;
        hasCurrent = false;
        proto = null;
        if (live != null) {
            try {
                live.close();
            } catch (IOException ignored) {
                // closing drops the lock either way
            }
            live = null;
        }
        if (mem != null) {
            mem.close();
            mem = null;
        }
        if (r != null) {
            r.close();
            r = null;
        }
        if (prev != null) {
            prev.close();
            prev = null;
        }
        if (dead != null) {
            dead.close();
            dead = null;
        }
    }

    @Override
    public String toString() {
        return "GroupReader(" + (member >= 0 ? "member " + member : "closed") + ", group=" + group + ", path=" + path
                + ")";
    }
}
