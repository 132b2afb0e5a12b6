package io.mappedbuspy.internal;

import io.mappedbuspy.*;

import java.io.IOException;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.Set;

/**
 * A reader's view of its framed bus's topics: the names of the ids its messages carry (the topics file opened at the
 * first id met, read again once per id not seen yet) and its topic filter, decided once per id.
 * <p>Internal: not a supported API. Public only for the library's own packages (io.mappedbuspy and the
 * Spark connector); it may change in any release.
 */
public final class TopicNames implements AutoCloseable {
    private static final byte UNKNOWN = 0;
    private static final byte WANTED = 1;
    private static final byte UNWANTED = 2;

    private final Path path;
    private final boolean allowForeign;
    private TopicsFile file;
    // The topics delivered (null: every message), and what the filter decided of each id so far.
    private Set<String> wanted;
    private final byte[] decided = new byte[Layout.TOPICS_MAX + 1];

    public TopicNames(Path path, boolean allowForeign) {
        this.path = path;
        this.allowForeign = allowForeign;
    }

    /** Delivers only messages of these topics (null: all). */
    public void filter(Set<String> topics) {
        wanted = topics;
        java.util.Arrays.fill(decided, UNKNOWN);
    }

    public boolean filtering() {
        return wanted != null;
    }

    /**
     * Whether a message of topic {@code id} passes the filter (no topic: without a filter, or with null in it: a
     * group member's filter, as Python's {@code topics=[None, ...]}).
     */
    public boolean wants(int id, long pos) throws CorruptBusException {
        if (wanted == null) {
            return true;
        }
        if (id < 0 || id > Layout.TOPICS_MAX) {
            throw new CorruptBusException("framed message at position " + pos + " of " + path + " has topic id " + id
                    + " outside 0.." + Layout.TOPICS_MAX + " (a corrupt file)");
        }
        byte d = decided[id];
        if (d == UNKNOWN) {
            d = wanted.contains(id == Layout.FRAME_TOPIC_NONE ? null : name(id, pos)) ? WANTED : UNWANTED;
            decided[id] = d;
        }
        return d == WANTED;
    }

    /**
     * The name of topic {@code id} of the committed message at {@code pos}: null for none.
     *
     * @throws CorruptBusException if the id's entry is not published (a committed message's always is)
     */
    public String name(int id, long pos) throws CorruptBusException {
        if (id == Layout.FRAME_TOPIC_NONE) {
            return null;
        }
        String n = null;
        if (id > 0 && id <= Layout.TOPICS_MAX) {
            TopicsFile f = file();
            n = f == null ? null : f.name(id);
        }
        if (n == null) {
            throw new CorruptBusException("framed message at position " + pos + " carries topic id " + id + ", which "
                    + path + " does not name (a committed message's topic is always published: a corrupt file)");
        }
        return n;
    }

    private TopicsFile file() throws CorruptBusException {
        if (file == null) {
            try {
                file = TopicsFile.forReader(path, allowForeign);
            } catch (NoSuchFileException e) {
                return null;
            } catch (CorruptBusException e) {
                throw e;
            } catch (IOException e) {
                throw new CorruptBusException("cannot read the topics file " + path + ": " + e);
            }
        }
        return file;
    }

    /** What the filter decided of each id met so far, with the names known (for a message about a wait). */
    public String describe() {
        StringBuilder b = new StringBuilder("filter ").append(wanted).append(':');
        for (int id = 0; id <= Layout.TOPICS_MAX; id++) {
            if (decided[id] != UNKNOWN) {
                b.append(' ').append(id).append('=').append(file == null ? "?" : file.knownName(id))
                        .append(decided[id] == WANTED ? " wanted" : " not");
            }
        }
        return b.toString();
    }

    @Override
    public void close() {
        if (file != null) {
            file.close();
            file = null;
        }
    }
}
