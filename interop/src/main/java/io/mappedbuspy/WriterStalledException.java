package io.mappedbuspy;

import java.io.IOException;
import java.io.UncheckedIOException;

/**
 * A reader waited its stall limit ({@link MappedBusReader#setStallLimit}) for a record whose writer is alive (it
 * holds its slot in the bus's writers file) but has not committed it: a stopped or overloaded process. Nothing was
 * rolled back: reading again waits on. Unchecked, as only a reader that set a stall limit sees it. The Python twin
 * is {@code WriterStalledError}.
 */
public final class WriterStalledException extends UncheckedIOException {
    private static final long serialVersionUID = 1L;
    private final int pid;
    private final long position;

    WriterStalledException(String message, int pid, long position) {
        super(message, new IOException(message));
        this.pid = pid;
        this.position = position;
    }

    /** @return the writer's pid as it recorded itself (for people: in another pid namespace it names another process there) */
    public int pid() {
        return pid;
    }

    /** @return the position of the record waited for */
    public long position() {
        return position;
    }
}
