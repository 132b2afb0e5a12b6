package io.mappedbuspy.spark;

import io.mappedbuspy.Layout;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.Arrays;

/**
 * What the source needs to know of a rolling bus's directory without opening a reader: its segments, their
 * limits, and slot arithmetic on global positions ({@code segmentIndex * segmentSize + offset}).
 */
final class RollingSegments {
    final String dir;
    final long segmentSize;
    final long slot;
    /** Record slots in one segment. */
    final long perSegment;

    RollingSegments(BusOptions o) {
        this.dir = o.path;
        this.segmentSize = o.segmentSize;
        this.slot = Layout.slotSize(o.recordSize);
        this.perSegment = (segmentSize - Layout.FIRST_RECORD_OFFSET) / slot;
    }

    String path(long index) {
        return Path.of(dir, Layout.segmentName(index)).toString();
    }

    boolean exists(long index) {
        return Files.exists(Path.of(path(index)), LinkOption.NOFOLLOW_LINKS);
    }

    /** The indices of the segments present now, ascending. */
    long[] list() {
        long[] out = new long[16];
        int n = 0;
        try (DirectoryStream<Path> s = Files.newDirectoryStream(Path.of(dir))) {
            for (Path p : s) {
                long i = Layout.segmentIndex(p.getFileName().toString());
                if (i >= 0) {
                    if (n == out.length) {
                        out = Arrays.copyOf(out, n * 2);
                    }
                    out[n++] = i;
                }
            }
        } catch (IOException e) {
            throw new UncheckedIOException("mappedbus: cannot list rolling bus " + dir, e);
        }
        out = Arrays.copyOf(out, n);
        Arrays.sort(out);
        return out;
    }

    /** Offset just past the last slot that fits in a segment. */
    long segmentEnd() {
        return Layout.FIRST_RECORD_OFFSET + perSegment * slot;
    }

    /** The position of the oldest retained record (the first slot of the oldest segment), 8 if none. */
    long earliest() {
        long[] segs = list();
        return segs.length == 0 ? Layout.FIRST_RECORD_OFFSET : segs[0] * segmentSize + Layout.FIRST_RECORD_OFFSET;
    }

    /** The global position past the last slot allocated now (the newest segment with records); 8 if none. */
    long end() {
        long[] segs = list();
        for (int i = segs.length - 1; i >= 0; i--) {
            long limit = limitOf(segs[i]);
            if (limit > Layout.FIRST_RECORD_OFFSET) {
                return normalise(segs[i], Math.min(limit, segmentEnd()));
            }
        }
        return segs.length == 0 ? Layout.FIRST_RECORD_OFFSET : segs[0] * segmentSize + Layout.FIRST_RECORD_OFFSET;
    }

    /** A segment's end is the next segment's start, as the rolling reader counts positions. */
    long normalise(long index, long offset) {
        return offset >= segmentEnd() ? (index + 1) * segmentSize + Layout.FIRST_RECORD_OFFSET
                : index * segmentSize + offset;
    }

    /** The limit of a segment, or -1 if it does not exist. */
    long limitOf(long index) {
        ByteBuffer b = ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN);
        try (FileChannel ch = FileChannel.open(Path.of(path(index)), StandardOpenOption.READ,
                LinkOption.NOFOLLOW_LINKS)) {
            ch.read(b, Layout.LIMIT_OFFSET);
        } catch (NoSuchFileException e) {
            return -1;
        } catch (IOException e) {
            throw new UncheckedIOException("mappedbus: cannot read the limit of " + path(index), e);
        }
        return b.getLong(0);
    }

    /** Record slots before a global position (a record boundary, or a segment's end). */
    long slotIndex(long position) {
        long seg = position / segmentSize;
        long off = position % segmentSize;
        long in = off < Layout.FIRST_RECORD_OFFSET ? 0
                : Math.min(perSegment, (off - Layout.FIRST_RECORD_OFFSET + slot - 1) / slot);
        return seg * perSegment + in;
    }

    /** Record slots in {@code [from, to)}. */
    long slots(long from, long to) {
        return Math.max(0, slotIndex(to) - slotIndex(from));
    }
}
