package io.mappedbuspy.internal;

import io.mappedbuspy.*;

import java.io.IOException;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * The topics file beside a framed bus ({@code PATH.topics}, or {@code DIR/bus.topics}): topic names mapped to ids
 * (layout in {@link Layout}, TOPICS_*; protocol in docs/design/frames.md, "Topics file"; the Python side is
 * {@code mappedbus_py/_core/_topics.pyx}). Append-only: an entry is claimed by CAS of the count, its name written,
 * then its length stored with release; a published entry never changes. Racing writers may publish one name twice:
 * a topic is the set of its ids (readers take every id of a name, writers the lowest).
 *
 * <p>Opened with the side files' safe-open rules (no links, a regular file of this user, exactly its size, its
 * magic and version). Not thread-safe.
 * <p>Internal: not a supported API. Public only for the library's own packages (io.mappedbuspy and the
 * Spark connector); it may change in any release.
 */
public final class TopicsFile implements AutoCloseable {
    private final MemoryMappedFile mem;
    // Published entries seen so far: id -> name, and name -> lowest id.
    private final String[] names = new String[Layout.TOPICS_MAX + 1];
    private final Map<String, Integer> ids = new HashMap<>();

    private TopicsFile(MemoryMappedFile mem) {
        this.mem = mem;
    }

    /** The topics file of a bus for a writer: made, all zero, if absent. */
    public static TopicsFile forWriter(Path file, boolean allowForeign) throws IOException {
        MemoryMappedFile.OpenOptions o = new MemoryMappedFile.OpenOptions();
        o.create = true;
        o.grow = true;
        o.lock = false;
        o.allowForeign = allowForeign;
        o.afterMap = TopicsFile::init;
        return new TopicsFile(MemoryMappedFile.open(file.toString(), Layout.TOPICS_FILE_SIZE, o));
    }

    /** The topics file of a bus for a reader: read-only; it must exist (NoSuchFileException: no topic named yet). */
    public static TopicsFile forReader(Path file, boolean allowForeign) throws IOException {
        MemoryMappedFile.OpenOptions o = new MemoryMappedFile.OpenOptions();
        o.readOnly = true;
        o.lock = false;
        o.allowForeign = allowForeign;
        o.lockTimeoutMs = 0;
        MemoryMappedFile m = MemoryMappedFile.open(file.toString(), Layout.TOPICS_FILE_SIZE, o);
        long magic = m.getLongAcquire(Layout.TOPICS_MAGIC_OFFSET);
        int version = m.getIntAcquire(Layout.TOPICS_VERSION_OFFSET);
        if ((magic != 0 && magic != Layout.TOPICS_MAGIC) || (version != 0 && version != Layout.TOPICS_VERSION)) {
            m.close();
            throw new CorruptBusException(file + " is not a bus topics file: its "
                    + (magic != 0 && magic != Layout.TOPICS_MAGIC ? "magic" : "version") + " is unknown");
        }
        return new TopicsFile(m);
    }

    // The magic and the version set by compare-and-swap from 0.
    private static void init(MemoryMappedFile f) throws IOException {
        if (!f.compareAndSetLong(Layout.TOPICS_MAGIC_OFFSET, 0, Layout.TOPICS_MAGIC)
                && f.getLongAcquire(Layout.TOPICS_MAGIC_OFFSET) != Layout.TOPICS_MAGIC) {
            throw new CorruptBusException(f.path() + " is not a bus topics file: its magic is not a topics file's");
        }
        if (!f.compareAndSetInt(Layout.TOPICS_VERSION_OFFSET, 0, Layout.TOPICS_VERSION)
                && f.getIntAcquire(Layout.TOPICS_VERSION_OFFSET) != Layout.TOPICS_VERSION) {
            throw new CorruptBusException(f.path() + " is not a bus topics file: its version is unknown");
        }
    }

    /**
     * The UTF-8 bytes of a topic name, checked: 1 to {@link Layout#TOPIC_NAME_MAX} bytes, no NUL or control
     * characters.
     */
    public static byte[] checkName(String name) {
        if (name == null) {
            throw new IllegalArgumentException("a topic name is a string, not null (no topic: write without one)");
        }
        byte[] b = name.getBytes(StandardCharsets.UTF_8);
        if (b.length == 0 || b.length > Layout.TOPIC_NAME_MAX || name.chars().anyMatch(c -> c < 32 || c == 127)) {
            throw new IllegalArgumentException("topic name '" + name + "' must be 1 to " + Layout.TOPIC_NAME_MAX
                    + " bytes of UTF-8 without control characters (" + b.length + " bytes)");
        }
        return b;
    }

    /** Reads the entries published since the last look (acquire loads of their lengths). */
    public void refresh() throws CorruptBusException {
        int count = Math.min(mem.getIntAcquire(Layout.TOPICS_COUNT_OFFSET), Layout.TOPICS_MAX);
        for (int id = 1; id <= count; id++) {
            if (names[id] != null) {
                continue;
            }
            int off = Layout.topicEntryOffset(id);
            int len = mem.getIntAcquire(off + Layout.TOPIC_LENGTH_OFFSET);
            if (len == 0) {
                continue; // claimed, not published (yet, or its claimer died)
            }
            if (len < 0 || len > Layout.TOPIC_NAME_MAX) {
                throw new CorruptBusException("topic entry " + id + " of " + mem.path() + " has length " + len
                        + " outside 1.." + Layout.TOPIC_NAME_MAX + " (a corrupt topics file)");
            }
            byte[] b = new byte[len];
            mem.getBytes(off + Layout.TOPIC_NAME_OFFSET, b, 0, len);
            String name;
            try {
                name = StandardCharsets.UTF_8.newDecoder().onMalformedInput(CodingErrorAction.REPORT)
                        .onUnmappableCharacter(CodingErrorAction.REPORT).decode(java.nio.ByteBuffer.wrap(b)).toString();
            } catch (CharacterCodingException e) {
                throw new CorruptBusException("topic entry " + id + " of " + mem.path() + " is not UTF-8");
            }
            names[id] = name;
            ids.merge(name, id, Math::min);
        }
    }

    /**
     * The name of topic {@code id} (1..TOPICS_MAX), reading the file again when it is not known yet.
     *
     * @return the name, or null if the entry is not published
     */
    public String name(int id) throws CorruptBusException {
        if (id < 1 || id > Layout.TOPICS_MAX) {
            return null;
        }
        if (names[id] == null) {
            refresh();
        }
        return names[id];
    }

    /** The name of {@code id} as this view last read it (null: not seen published), without reading the file. */
    public String knownName(int id) {
        return id < 1 || id > Layout.TOPICS_MAX ? null : names[id];
    }

    /** Every published id of {@code name} (a topic is the set of its ids), as of now. */
    public List<Integer> idsOf(String name) throws CorruptBusException {
        refresh();
        List<Integer> out = new ArrayList<>();
        for (int id = 1; id <= Layout.TOPICS_MAX; id++) {
            if (name.equals(names[id])) {
                out.add(id);
            }
        }
        return out;
    }

    /**
     * The id a writer tags {@code name}'s messages with: the lowest published one, else a new entry claimed and
     * published (docs/design/frames.md, "Name a topic").
     *
     * @throws TopicsFullException if all {@link Layout#TOPICS_MAX} entries are taken
     */
    public int idFor(String name) throws CorruptBusException {
        Integer known = ids.get(name);
        if (known != null) {
            return known;
        }
        byte[] raw = checkName(name);
        for (;;) {
            refresh();
            known = ids.get(name);
            if (known != null) {
                return known;
            }
            int c = mem.getIntAcquire(Layout.TOPICS_COUNT_OFFSET);
            if (c >= Layout.TOPICS_MAX) {
                throw new TopicsFullException("the topics file " + mem.path() + " holds " + Layout.TOPICS_MAX
                        + " topics already: topic '" + name + "' cannot be added");
            }
            if (mem.compareAndSetInt(Layout.TOPICS_COUNT_OFFSET, c, c + 1)) {
                int id = c + 1;
                int off = Layout.topicEntryOffset(id);
                mem.putBytes(off + Layout.TOPIC_NAME_OFFSET, raw, 0, raw.length);
                mem.setIntRelease(off + Layout.TOPIC_LENGTH_OFFSET, raw.length);
                refresh();
                return ids.get(name);
            }
            // lost the race: a racer may have published this very name; look again
        }
    }

    /**
     * The topic names a bus's topics file publishes now, by id (for tools and the Spark connector).
     *
     * @param file         the topics file ({@code PATH.topics}, or {@code DIR/bus.topics})
     * @param allowForeign accept another owner or group/other write permission
     * @return {@code TOPICS_MAX + 1} names indexed by id (null: none published; index 0: no topic); all null when
     *         there is no topics file yet
     * @throws IOException if it cannot be read or is not a topics file
     */
    public static String[] names(Path file, boolean allowForeign) throws IOException {
        TopicsFile f;
        try {
            f = forReader(file, allowForeign);
        } catch (java.nio.file.NoSuchFileException e) {
            return new String[Layout.TOPICS_MAX + 1];
        }
        try {
            f.refresh();
            return f.names.clone();
        } finally {
            f.close();
        }
    }

    @Override
    public void close() {
        mem.close();
    }
}
