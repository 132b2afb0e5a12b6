package io.mappedbuspy.internal;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A reader's {@link ArchiveFiles.SegmentBuffers}: the buffers of archived segments handed back when their bytes are
 * closed and given out again (no allocation, pages already faulted in), one spare of each kind; bytes closed are not
 * readable any more, whatever the buffer holds next.
 */
public final class SegmentBuffersTest {
    @Test
    void aSegmentsBufferComesBackWhenItsBytesAreClosedAndIsGivenOutAgain() {
        try (ArchiveFiles.SegmentBuffers buffers = ArchiveFiles.SegmentBuffers.kept()) {
            ByteBuffer first = buffers.segment(8192);
            assertEquals(8192, first.capacity());
            MemoryMappedFile m = buffers.inMemory("/archive/00000000000000000001.bus.zst", first);
            m.putLong(0, 42);
            assertEquals(42, m.getLongAcquire(0));
            m.closeAndUnmap();
            // closed: its bytes are gone from it, though the buffer lives on for the next segment
            assertThrows(RuntimeException.class, () -> m.getLongAcquire(0));
            ByteBuffer again = buffers.segment(8192);
            assertSame(first, again, "the buffer handed back is given out again");
            assertEquals(0, again.position());
            // another size (another bus): a new buffer, the spare freed
            buffers.giveSegment(again);
            ByteBuffer other = buffers.segment(4096);
            assertNotSame(first, other);
            assertEquals(4096, other.capacity());
            buffers.giveSegment(other);
        }
    }

    @Test
    void aCompressedFilesBufferIsReusedForAnyFileItHolds() {
        try (ArchiveFiles.SegmentBuffers buffers = ArchiveFiles.SegmentBuffers.kept()) {
            ByteBuffer b = buffers.compressed(5000);
            assertEquals(5000, b.limit());
            b.position(100);
            buffers.giveCompressed(b);
            ByteBuffer smaller = buffers.compressed(300);
            assertSame(b, smaller);
            assertEquals(0, smaller.position());
            assertEquals(300, smaller.limit());
            buffers.giveCompressed(smaller);
            ByteBuffer larger = buffers.compressed(6000);
            assertNotSame(b, larger);
            assertEquals(6000, larger.limit());
            buffers.giveCompressed(larger);
        }
    }

    @Test
    void oneSpareIsKept() {
        try (ArchiveFiles.SegmentBuffers buffers = ArchiveFiles.SegmentBuffers.kept()) {
            List<ByteBuffer> out = new ArrayList<>();
            for (int i = 0; i < 3; i++) {
                out.add(buffers.segment(4096));
            }
            out.forEach(buffers::giveSegment); // the first kept, the others freed
            ByteBuffer spare = buffers.segment(4096);
            assertSame(out.get(0), spare);
            ByteBuffer fresh = buffers.segment(4096);
            assertTrue(out.stream().noneMatch(b -> b == fresh), "only one spare is kept");
            buffers.giveSegment(spare);
            buffers.giveSegment(fresh);
        }
    }
}
