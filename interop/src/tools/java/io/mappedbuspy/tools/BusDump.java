package io.mappedbuspy.tools;

import io.mappedbuspy.BusKind;
import io.mappedbuspy.Layout;
import io.mappedbuspy.internal.BusMeta;
import io.mappedbuspy.internal.MemoryMappedFile;
import io.mappedbuspy.internal.RollingDir;
import io.mappedbuspy.internal.TopicsFile;

import java.io.IOException;
import java.io.PrintStream;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * {@code dump} and {@code stat} of a bus with metadata (a single file or a rolling bus's directory), read-only, as the
 * Python CLI's {@code mappedbus dump} / {@code mappedbus stat} show them: a framed bus's messages (position, status,
 * slots, topic, length, the first {@link #PREVIEW} payload bytes in hex), a bus without frames its slots (position,
 * status, meta, payload preview). Frames are walked by their first slot's count (docs/design/frames.md): the walk
 * never looks at a continuation slot, and ends at a frame whose header is impossible (status {@code BAD}).
 */
final class BusDump {
    /** Payload bytes shown per row, as the Python CLI's ({@code slots.PREVIEW}). */
    static final int PREVIEW = 32;

    private BusDump() {
    }

    /** One file of the bus: its path, logical size and the position of its offset 0. */
    private record BusFile(Path path, long size, long base) { }

    /** The bus at a path as its metadata describes it. */
    private record Bus(String path, BusMeta meta, List<BusFile> files, Path topics) {
        boolean rolling() {
            return meta.kind() == BusKind.ROLLING;
        }
    }

    private static Bus open(String path) throws IOException {
        Path p = Path.of(path);
        if (Files.isDirectory(p, LinkOption.NOFOLLOW_LINKS)) {
            BusMeta meta = BusMeta.read(p.resolve(Layout.META_FILE), true);
            if (meta == null) {
                throw new IOException("no rolling bus at " + path + " (no " + Layout.META_FILE + ")");
            }
            List<BusFile> files = new ArrayList<>();
            RollingDir dir = RollingDir.open(path, meta.segmentSize(), meta.recordSize(), true);
            try {
                for (long k : dir.segments()) { // the hot directory's (an archived segment is compressed)
                    files.add(new BusFile(dir.segmentPath(k), meta.segmentSize(),
                            Layout.joinPosition(k, 0, meta.segmentSize())));
                }
            } finally {
                dir.close();
            }
            return new Bus(path, meta, files, p.resolve(Layout.TOPICS_FILE));
        }
        BusMeta meta = BusMeta.read(BusMeta.metaPath(path), true);
        if (meta == null) {
            throw new IOException("no metadata for " + path + " (" + BusMeta.metaPath(path) + "): dump and stat read "
                    + "buses made by this project (a file of the Java original: read <path> <fileSize> <recordSize>)");
        }
        return new Bus(path, meta, List.of(new BusFile(p, meta.fileSize(), 0)), Path.of(path + Layout.TOPICS_SUFFIX));
    }

    /** What one walk of a file found at a first slot (a frame) or a slot. */
    private record Row(long position, int status, long slots, int meta, long length, int topic, byte[] preview) {
        boolean bad() {
            return status < 0;
        }
    }

    /** Walks one file's frames (framed) or slots below its limit, handing each to {@code out}; false at a bad one. */
    private static boolean walk(BusFile f, int recordSize, boolean framed, java.util.function.Consumer<Row> out)
            throws IOException {
        long slot = Layout.slotSize(recordSize);
        try (MemoryMappedFile m = new MemoryMappedFile(f.path().toString(), f.size(), true)) {
            long end = Math.min(f.size(), m.size());
            long stop = Math.min(end, Math.max(m.getLongAcquire(Layout.LIMIT_OFFSET), 0));
            for (long pos = Layout.FIRST_RECORD_OFFSET; pos < stop && pos + slot <= end; ) {
                int status = m.getStatus(pos);
                int meta = m.getIntAcquire(pos + Layout.METADATA_OFFSET);
                if (!framed) {
                    byte[] b = new byte[Math.min(recordSize, PREVIEW)];
                    m.getBytes(pos + Layout.PAYLOAD_OFFSET, b, 0, b.length);
                    out.accept(new Row(f.base() + pos, status, 1, meta, -1, 0, b));
                    pos += slot;
                    continue;
                }
                int n = Layout.frameMetaSlots(meta);
                long slots = n >= 1 ? n : 1;
                if (slots > (end - pos) / slot) {
                    out.accept(new Row(f.base() + pos, -1, slots, meta, -1, 0, new byte[0]));
                    return false;
                }
                if (status == Layout.STATUS_COMMITTED) {
                    long length = m.getLong(pos + Layout.PAYLOAD_OFFSET + Layout.FRAME_LENGTH_OFFSET);
                    int topic = m.getInt(pos + Layout.PAYLOAD_OFFSET + Layout.FRAME_TOPIC_OFFSET);
                    if (length < 0 || length > slots * slot - Layout.FRAME_PAYLOAD_OFFSET) {
                        out.accept(new Row(f.base() + pos, -1, slots, meta, length, topic, new byte[0]));
                        return false;
                    }
                    byte[] b = new byte[(int) Math.min(length, PREVIEW)];
                    m.getBytes(pos + Layout.FRAME_PAYLOAD_OFFSET, b, 0, b.length);
                    out.accept(new Row(f.base() + pos, status, slots, meta, length, topic, b));
                } else {
                    out.accept(new Row(f.base() + pos, status, slots, meta, -1, 0, new byte[0]));
                }
                pos += slots * slot;
            }
        }
        return true;
    }

    private static String statusName(int status) {
        return switch (status) {
            case Layout.STATUS_NOT_SET -> "not set";
            case Layout.STATUS_COMMITTED -> "committed";
            case Layout.STATUS_ROLLED_BACK -> "rolled back";
            default -> "BAD " + status;
        };
    }

    private static String hex(byte[] b) {
        StringBuilder sb = new StringBuilder(b.length * 2);
        for (byte x : b) {
            sb.append(Character.forDigit((x >> 4) & 0xf, 16)).append(Character.forDigit(x & 0xf, 16));
        }
        return sb.toString();
    }

    /** {@code dump <path> [--max N]}: every frame (or slot) below the limit, oldest first. */
    static int dump(String path, long max, PrintStream out) throws IOException {
        Bus bus = open(path);
        boolean framed = bus.meta().frames();
        String[] names = framed ? TopicsFile.names(bus.topics(), true) : null;
        if (framed) {
            out.printf("%16s  %-11s  %7s  %-12s  %10s  payload%n", "position", "status", "slots", "topic", "length");
        } else {
            out.printf("%16s  %-11s  %11s  payload%n", "position", "status", "meta");
        }
        long[] shown = {0};
        for (BusFile f : bus.files()) {
            if (shown[0] >= max) {
                break;
            }
            boolean ok = walk(f, bus.meta().recordSize(), framed, r -> {
                if (shown[0] >= max) {
                    return;
                }
                shown[0]++;
                if (!framed) {
                    out.printf("%16d  %-11s  %11d  %s%n", r.position(), statusName(r.status()), r.meta(),
                            hex(r.preview()));
                    return;
                }
                String topic = r.topic() == Layout.FRAME_TOPIC_NONE ? "-"
                        : r.topic() < names.length && names[r.topic()] != null ? names[r.topic()] : "#" + r.topic();
                out.printf("%16d  %-11s  %7d  %-12s  %10s  %s%s%n", r.position(),
                        r.bad() ? "BAD" : statusName(r.status()), r.slots(), topic,
                        r.status() == Layout.STATUS_COMMITTED ? Long.toString(r.length()) : "-", hex(r.preview()),
                        r.length() > r.preview().length ? "..." : "");
            });
            if (!ok) {
                out.println("note: an impossible frame header ends the walk (a corrupt file, or a wrong recordSize)");
                return 1;
            }
        }
        return 0;
    }

    /** {@code stat <path>}: the kind, sizes, counts by status and, for a framed bus, its topics. */
    static int stat(String path, PrintStream out) throws IOException {
        Bus bus = open(path);
        BusMeta meta = bus.meta();
        boolean framed = meta.frames();
        long[] counts = new long[3];
        boolean[] bad = {false};
        for (BusFile f : bus.files()) {
            if (!walk(f, meta.recordSize(), framed, r -> {
                if (r.bad()) {
                    bad[0] = true;
                } else if (r.status() >= 0 && r.status() < 3) {
                    counts[r.status()]++;
                }
            })) {
                break;
            }
        }
        out.println("bus:        " + path + (bus.rolling() ? " (rolling, " + bus.files().size() + " segments)"
                : " (single file)") + "   bus id " + meta.id());
        out.println("sizes:      " + (bus.rolling() ? "segment_size " + meta.segmentSize() : "file_size "
                + meta.fileSize()) + "   record_size " + meta.recordSize());
        String unit = framed ? " messages" : " slots";
        out.println("records:    " + counts[Layout.STATUS_COMMITTED] + " committed, "
                + counts[Layout.STATUS_ROLLED_BACK] + " rolled back, " + counts[Layout.STATUS_NOT_SET]
                + " not set (" + unit.trim() + ")");
        if (framed) {
            String[] names = TopicsFile.names(bus.topics(), true);
            StringBuilder t = new StringBuilder();
            for (int id = 1; id < names.length; id++) {
                if (names[id] != null) {
                    t.append(t.length() == 0 ? "" : ", ").append(names[id]).append(" [").append(id).append(']');
                }
            }
            out.println("frames:     framed: messages of any size; topics: " + (t.length() == 0 ? "none" : t));
        } else {
            out.println("frames:     no (fixed-size records)");
        }
        if (bad[0]) {
            out.println("note:       an impossible frame header ends the walk (a corrupt file, or a wrong recordSize)");
        }
        return 0;
    }
}
