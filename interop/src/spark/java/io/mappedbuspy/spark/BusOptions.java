package io.mappedbuspy.spark;

import io.mappedbuspy.Layout;
import io.mappedbuspy.internal.RollingLayout;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

import java.io.File;
import java.io.Serializable;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import io.mappedbuspy.spark.write.CommitLog;
import io.mappedbuspy.spark.stream.MultiBusMicroBatchStream;

/**
 * The data source options, parsed and checked once on the driver (names are case-insensitive).
 * See {@code interop/src/spark/README.md} for what each one does.
 */
public final class BusOptions implements Serializable {
    private static final long serialVersionUID = 1L;

    /** Column holding the record's file offset. */
    public static final String POSITION = "position";
    /** Column holding the record's metadata (message type, or byte length). */
    public static final String META = "meta";
    /** Column holding the path of the record's bus, in a read of several buses. */
    public static final String BUS = "bus";
    /** Column holding the record's payload bytes (untyped reads and writes). */
    public static final String PAYLOAD = "payload";
    /** Column holding a framed message's topic (a framed bus: docs/design/frames.md). */
    public static final String TOPIC = "topic";

    public final String path;
    public final int recordSize;
    /** Logical file size, or -1 for "the file's length". */
    final long fileSize;
    /** Null for untyped records (position, meta, payload). */
    public final BusLayout layout;
    public final boolean trimPayload;
    public final int timeoutMs;
    public final long recordsPerPartition;
    public final int numPartitions;
    public final String startingPosition;
    /**
     * Where reads start by time (option {@code startingTime}: the bus's time index, docs/journal.md), Unix ns; null
     * when not given (a Long: options are serialized to executors).
     */
    public final Long startingTimeNs;
    /** Batch reads: "latest" or a position (exclusive end of the read). */
    final String endingPosition;
    public final long maxRecordsPerTrigger;
    public final boolean columnar;
    public final int batchSize;
    public final boolean waitUncommitted;
    public final boolean checkHost;
    /** True for a rolling bus: {@code path} is its directory (with a {@code bus.meta}, or to be created). */
    public final boolean rolling;
    /** Rolling bus: every segment's logical size (from bus.meta, or the option for a new bus); else -1. */
    public final long segmentSize;
    /** Rolling bus creation: retention (0 = no limit), stored in bus.meta by the first writer. */
    public final long retainSegments;
    public final long retainBytes;
    public final long retainAgeMs;
    /** Streaming: fail the query when records it had not read are gone (default, as Kafka's option). */
    public final boolean failOnDataLoss;
    /** The options as given (names lower-cased): what an executor re-parses to plan its own host's bus. */
    public final HashMap<String, String> raw;
    /**
     * Batch reads: null (the driver plans on its own bus), or the hosts whose buses are read, each by
     * tasks on that host ("*": every executor host).
     */
    public final String[] hosts;
    /**
     * Several buses in one read, batch or stream ({@code path} a comma-separated list, or with glob
     * patterns in its last component): each bus's path, sorted within a pattern; null for one bus. The
     * other fields then describe the first bus (for the schema); each bus is planned with its own
     * options. A stream matches the patterns again at every trigger ({@link MultiBusMicroBatchStream}).
     */
    public String[] buses;
    /** Writes: null (the default: streaming yes, batch no), or the option's value. */
    public final Boolean exactlyOnce;
    /** Streaming: the consumer name given (option {@code consumer}), or null (derived from the checkpoint). */
    final String consumer;
    /** Streaming: whether the query registers as a named consumer of the bus (option {@code registerConsumer}). */
    final boolean registerConsumer;
    /**
     * A framed bus (messages of any size with topics): what its metadata says ({@code frames=1}), or option
     * {@code frames} for a bus without metadata or one a write creates. Rows are position, topic, payload.
     */
    public final boolean frames;
    /**
     * A framed bus: the topics a read delivers (option {@code topics}, comma-separated names), or null for every
     * message. A stream's filter: Spark pushes no filters into streaming scans, so {@code topic = 'x'} is a batch's.
     */
    public final String[] topics;

    private BusOptions(Map<String, String> raw) {
        Map<String, String> o = new HashMap<>();
        for (Map.Entry<String, String> e : raw.entrySet()) {
            o.put(e.getKey().toLowerCase(Locale.ROOT), e.getValue());
        }
        this.raw = new HashMap<>(o);
        path = o.get("path");
        if (path == null || path.isEmpty()) {
            throw new IllegalArgumentException("mappedbus: option 'path' (the bus file) is required");
        }
        int typeId = intOpt(o, "typeid", 0, Integer.MIN_VALUE);
        String spec = o.get("layout");
        layout = spec == null || spec.trim().isEmpty() || spec.trim().equalsIgnoreCase("raw")
                ? null : BusLayout.parse(spec, typeId);
        io.mappedbuspy.internal.BusMeta rollingMeta = rollingMeta(path);
        io.mappedbuspy.internal.BusMeta fileMeta = null;
        long segOpt = longOpt(o, "segmentsize", -1, Layout.FIRST_RECORD_OFFSET + 1);
        rolling = rollingMeta != null || segOpt > 0;
        if (rollingMeta != null) {
            // The sizes of a rolling bus are in its bus.meta: an option that says otherwise is a mistake.
            String metaPath = path + java.io.File.separator + Layout.META_FILE;
            if (o.containsKey("recordsize") && intOpt(o, "recordsize", 0, 1) != rollingMeta.recordSize()) {
                throw new IllegalArgumentException("mappedbus: option recordSize " + intOpt(o, "recordsize", 0, 1)
                        + " differs from recordSize " + rollingMeta.recordSize() + " of rolling bus " + path
                        + " (" + metaPath + ", bus " + rollingMeta.id() + ")");
            }
            if (segOpt > 0 && segOpt != rollingMeta.segmentSize()) {
                throw new IllegalArgumentException("mappedbus: option segmentSize " + segOpt + " differs from "
                        + "segmentSize " + rollingMeta.segmentSize() + " of rolling bus " + path + " ("
                        + metaPath + ", bus " + rollingMeta.id() + ")");
            }
            recordSize = rollingMeta.recordSize();
            segmentSize = rollingMeta.segmentSize();
        } else if (!rolling && (fileMeta = singleMeta(path)) != null) {
            // A bus this project created records its sizes in PATH.meta: they win, and an option that says
            // otherwise is a mistake (read with the layout's size, a wider record would end the read early).
            if (o.containsKey("recordsize") && intOpt(o, "recordsize", 0, 1) != fileMeta.recordSize()) {
                throw new IllegalArgumentException("mappedbus: option recordSize " + intOpt(o, "recordsize", 0, 1)
                        + " differs from record_size " + fileMeta.recordSize() + " in " + path + Layout.META_SUFFIX
                        + " (bus " + fileMeta.id() + "): every process must use the size the bus was created "
                        + "with; leave recordSize out to take it from there");
            }
            recordSize = fileMeta.recordSize();
            segmentSize = segOpt;
        } else {
            if (o.containsKey("recordsize")) {
                recordSize = intOpt(o, "recordsize", 0, 1);
            } else if (layout != null) {
                recordSize = layout.size();
            } else {
                throw new IllegalArgumentException("mappedbus: option 'recordSize' is required (the payload size "
                        + "every process using " + path + " was given)");
            }
            segmentSize = segOpt;
            if (!rolling && java.nio.file.Files.isDirectory(java.nio.file.Path.of(path),
                    java.nio.file.LinkOption.NOFOLLOW_LINKS)) {
                throw new IllegalArgumentException("mappedbus: " + path + " is a directory without "
                        + Layout.META_FILE + ": not a rolling bus (give option 'segmentSize' to create one there)");
            }
        }
        if (layout != null && layout.size() > recordSize) {
            throw new IllegalArgumentException("mappedbus: layout " + layout + " needs " + layout.size()
                    + " payload bytes but recordSize is " + recordSize);
        }
        retainSegments = longOpt(o, "retainsegments", 0, 0);
        retainBytes = longOpt(o, "retainbytes", 0, 0);
        retainAgeMs = longOpt(o, "retainagems", 0, 0);
        failOnDataLoss = boolOpt(o, "failondataloss", true);
        if (rolling && o.containsKey("filesize")) {
            throw new IllegalArgumentException("mappedbus: " + path + " is a rolling bus: its segments have "
                    + "segmentSize bytes, option 'fileSize' does not apply");
        }
        fileSize = o.containsKey("filesize") ? longOpt(o, "filesize", -1, Layout.FIRST_RECORD_OFFSET
                + Layout.slotSize(recordSize)) : -1;
        if (fileMeta != null && fileSize > 0 && fileSize != fileMeta.fileSize()) {
            throw new IllegalArgumentException("mappedbus: option fileSize " + fileSize + " differs from file_size "
                    + fileMeta.fileSize() + " in " + path + Layout.META_SUFFIX + " (bus " + fileMeta.id() + "): "
                    + "every process must use the size the bus was created with; leave fileSize out to take it "
                    + "from there");
        }
        trimPayload = boolOpt(o, "trimpayload", false);
        timeoutMs = intOpt(o, "timeoutms", Layout.DEFAULT_TIMEOUT_MS, Integer.MIN_VALUE);
        if (timeoutMs < Layout.MIN_ROLLBACK_TIMEOUT_MS) {
            throw new IllegalArgumentException("mappedbus: option 'timeoutMs' is the rollback timeout: how long a "
                    + "slot may stay uncommitted before readers roll it back (a batch read with uncommitted=wait "
                    + "skips it); must be at least " + Layout.MIN_ROLLBACK_TIMEOUT_MS + " ms, got " + timeoutMs);
        }
        recordsPerPartition = longOpt(o, "recordsperpartition", -1, 1);
        numPartitions = intOpt(o, "numpartitions", -1, 1);
        startingPosition = o.getOrDefault("startingposition", "earliest").trim().toLowerCase(Locale.ROOT);
        checkPosition("startingPosition", startingPosition, "earliest", "latest", o.get("startingposition"));
        startingTimeNs = parseTime("startingTime", o.get("startingtime"));
        if (startingTimeNs != null && o.containsKey("startingposition")) {
            throw new IllegalArgumentException("mappedbus: options 'startingTime' and 'startingPosition' both say where "
                    + "to start: give one");
        }
        if (startingTimeNs != null && !rolling) {
            throw new IllegalArgumentException("mappedbus: option 'startingTime' needs a rolling bus (its time index): "
                    + path + " is a single file; use startingPosition");
        }
        endingPosition = o.getOrDefault("endingposition", "latest").trim().toLowerCase(Locale.ROOT);
        checkPosition("endingPosition", endingPosition, "latest", "latest", o.get("endingposition"));
        maxRecordsPerTrigger = longOpt(o, "maxrecordspertrigger", -1, 1);
        columnar = boolOpt(o, "columnar", true);
        io.mappedbuspy.internal.BusMeta meta = rollingMeta != null ? rollingMeta : fileMeta;
        if (meta != null && o.containsKey("frames") && boolOpt(o, "frames", false) != meta.frames()) {
            throw new IllegalArgumentException("mappedbus: option frames=" + o.get("frames") + " but " + path + " is "
                    + (meta.frames() ? "" : "not ") + "a framed bus (its metadata, bus " + meta.id()
                    + "): leave the option out to read it as it is");
        }
        frames = meta != null ? meta.frames() : boolOpt(o, "frames", false);
        if (frames && layout != null) {
            throw new IllegalArgumentException("mappedbus: " + path + " is a framed bus: its rows are position, topic,"
                    + " payload (messages of any size), option 'layout' does not apply");
        }
        if (frames && (recordSize % Layout.FRAME_RECORD_ALIGN != 0 || recordSize < Layout.FRAME_MIN_RECORD_SIZE)) {
            throw new IllegalArgumentException("mappedbus: a framed bus's recordSize must be a multiple of "
                    + Layout.FRAME_RECORD_ALIGN + " and at least " + Layout.FRAME_MIN_RECORD_SIZE + ", got " + recordSize);
        }
        topics = topicsOpt(o.get("topics"), frames, path);
        batchSize = intOpt(o, "batchsize", 4096, 1);
        String unc = o.getOrDefault("uncommitted", "stop").trim().toLowerCase(Locale.ROOT);
        if (!unc.equals("stop") && !unc.equals("wait")) {
            throw new IllegalArgumentException("mappedbus: option 'uncommitted' must be stop or wait, got '"
                    + unc + "'");
        }
        waitUncommitted = unc.equals("wait");
        checkHost = boolOpt(o, "checkhost", true);
        String h = get(o, "hosts");
        hosts = h == null || h.isEmpty() ? null : java.util.Arrays.stream(h.split(","))
                .map(String::trim).filter(x -> !x.isEmpty()).distinct().toArray(String[]::new);
        exactlyOnce = o.containsKey("exactlyonce") ? boolOpt(o, "exactlyonce", false) : null;
        consumer = o.get("consumer");
        if (consumer != null) {
            checkConsumerName(consumer);
        }
        registerConsumer = boolOpt(o, "registerconsumer", true);
    }

    /** The consumer name rule of the registry: 1 to 64 bytes of UTF-8, no NUL or control characters. */
    private static void checkConsumerName(String name) {
        int n = name.getBytes(java.nio.charset.StandardCharsets.UTF_8).length;
        if (n == 0 || n > Layout.CONSUMER_NAME_MAX || name.chars().anyMatch(c -> c < 32 || c == 127)) {
            throw new IllegalArgumentException("mappedbus: option 'consumer' is 1 to " + Layout.CONSUMER_NAME_MAX
                    + " bytes of UTF-8 without control characters, got '" + name + "' (" + n + " bytes)");
        }
    }

    /**
     * The name a streaming query registers as on its bus: option {@code consumer}, else one derived from the
     * source's checkpoint location, stable across restarts from that checkpoint: {@code spark-} + the checkpoint
     * directory's name (at most 40 characters of it) + {@code -} + 12 hex digits of the location's SHA-256. Null
     * with {@code registerConsumer=false}.
     *
     * @param checkpointLocation what Spark passes to {@code toMicroBatchStream}: {@code ROOT/sources/N}
     */
    public String consumerName(String checkpointLocation) {
        if (!registerConsumer) {
            return null;
        }
        if (consumer != null) {
            return consumer;
        }
        String label = checkpointRootName(checkpointLocation).replaceAll("[^A-Za-z0-9._-]", "_");
        if (label.length() > 40) {
            label = label.substring(0, 40);
        }
        byte[] h;
        try {
            h = java.security.MessageDigest.getInstance("SHA-256")
                    .digest(checkpointLocation.getBytes(java.nio.charset.StandardCharsets.UTF_8));
        } catch (java.security.NoSuchAlgorithmException e) {
            throw new IllegalStateException(e); // every JVM has SHA-256
        }
        StringBuilder hex = new StringBuilder(12);
        for (int i = 0; i < 6; i++) {
            hex.append(Character.forDigit((h[i] >> 4) & 15, 16)).append(Character.forDigit(h[i] & 15, 16));
        }
        return "spark-" + (label.isEmpty() ? "" : label + "-") + hex;
    }

    /**
     * Whether a query's consumer goes with the query: a derived name under a checkpoint Spark made for this run
     * only (a {@code temporary-*} directory, deleted when the query stops), which no restart can resume from.
     */
    public boolean ephemeralConsumer(String checkpointLocation) {
        return registerConsumer && consumer == null && checkpointRootName(checkpointLocation).startsWith("temporary-");
    }

    // The last component of the checkpoint root: what precedes "/sources/N" in a source's checkpoint location.
    private static String checkpointRootName(String location) {
        String s = location.replaceAll("/+$", "");
        s = s.replaceAll("/sources/[^/]*$", "");
        int slash = s.lastIndexOf('/');
        return slash < 0 ? s : s.substring(slash + 1);
    }

    private void checkPosition(String name, String v, String word1, String word2, String raw) {
        if (v.equals(word1) || v.equals(word2)) {
            return;
        }
        long p;
        try {
            p = Long.parseLong(v);
        } catch (NumberFormatException e) {
            p = -1;
        }
        boolean ok = rolling ? RollingLayout.isPosition(p, segmentSize, recordSize)
                : Layout.isRecordBoundary(p, recordSize);
        if (!ok) {
            throw new IllegalArgumentException("mappedbus: " + name + " must be " + word1
                    + (word1.equals(word2) ? "" : ", " + word2) + " or a record " + (rolling
                    ? "position (segment * " + segmentSize + " + 8 + k * " : "offset (8 + k * ")
                    + Layout.slotSize(recordSize) + ") of " + path + ", got '" + raw + "'");
        }
    }

    /**
     * A time option's value: an ISO-8601 time ({@code 2026-11-28T10:00:00Z}, with an offset, or without one meaning
     * the JVM's time zone, as Python's naive datetime means local time) or Unix epoch seconds ({@code 1795857600},
     * {@code 1795857600.25}), as Unix ns; null when not given.
     */
    static Long parseTime(String name, String raw) {
        if (raw == null) {
            return null;
        }
        String v = raw.trim();
        try {
            if (v.matches("[0-9]+(\\.[0-9]+)?")) {
                return new java.math.BigDecimal(v).movePointRight(9).setScale(0, java.math.RoundingMode.FLOOR)
                        .longValueExact();
            }
            java.time.Instant t;
            try {
                t = java.time.OffsetDateTime.parse(v).toInstant();
            } catch (java.time.format.DateTimeParseException e) {
                t = java.time.LocalDateTime.parse(v).atZone(java.time.ZoneId.systemDefault()).toInstant();
            }
            return Math.addExact(Math.multiplyExact(t.getEpochSecond(), 1_000_000_000L), t.getNano());
        } catch (java.time.format.DateTimeParseException | ArithmeticException e) {
            throw new IllegalArgumentException("mappedbus: option '" + name + "' must be an ISO-8601 time "
                    + "(2026-11-28T10:00:00Z) or Unix epoch seconds (1795857600.5), got '" + raw + "'");
        }
    }

    /** Batch reads: the first position to read (startingPosition; earliest is Long.MIN_VALUE). */
    public long batchStart() {
        if (startingPosition.equals("earliest")) {
            return Long.MIN_VALUE;
        }
        if (startingPosition.equals("latest")) {
            throw new IllegalArgumentException("mappedbus: startingPosition=latest is for streaming reads; a batch "
                    + "read of " + path + " starts at earliest or a position");
        }
        return Long.parseLong(startingPosition);
    }

    /** Batch reads: the position the read ends before (endingPosition; latest is Long.MAX_VALUE). */
    public long batchEnd() {
        return endingPosition.equals("latest") ? Long.MAX_VALUE : Long.parseLong(endingPosition);
    }

    /**
     * Parses options.
     *
     * @param options the options given to the reader or writer
     * @return the parsed options
     * @throws IllegalArgumentException naming a bad or missing option
     */
    public static BusOptions parse(Map<String, String> options) {
        String p = null;
        for (Map.Entry<String, String> e : options.entrySet()) {
            if (e.getKey().equalsIgnoreCase("path")) {
                p = e.getValue();
            }
        }
        String[] many = p == null ? null : expandBuses(p);
        if (many == null) {
            return new BusOptions(options);
        }
        BusOptions first = new BusOptions(forBus(options, many[0]));
        if (first.layout != null && first.layout.fields().stream().anyMatch(f -> f.name().equalsIgnoreCase(BUS))) {
            throw new IllegalArgumentException("mappedbus: layout field 'bus' clashes with the column naming each "
                    + "record's bus in a read of several buses (" + p + ")");
        }
        first.buses = many;
        first.raw.put("path", p);
        return first;
    }

    /** The options with another {@code path}: one bus of a multi-bus read. */
    public static Map<String, String> forBus(Map<String, String> options, String bus) {
        Map<String, String> o = new HashMap<>();
        for (Map.Entry<String, String> e : options.entrySet()) {
            if (!e.getKey().equalsIgnoreCase("path")) {
                o.put(e.getKey(), e.getValue());
            }
        }
        o.put("path", bus);
        return o;
    }

    /** This bus's own options, in a multi-bus read. */
    public BusOptions forBus(String bus) {
        return new BusOptions(forBus(raw, bus));
    }

    /**
     * The buses a {@code path} names when it names several (a comma-separated list; glob characters
     * {@code * ? [} in an entry's last component match names in its directory, not the files beside
     * a bus, {@link #isSidecar}), else null.
     */
    public static String[] expandBuses(String path) {
        return expandBuses(path, false);
    }

    /**
     * As {@link #expandBuses(String)}; with {@code allowEmpty} (a stream looking for buses again), a
     * pattern that matches nothing now adds nothing instead of failing, and the result may be empty.
     */
    public static String[] expandBuses(String path, boolean allowEmpty) {
        boolean list = path.contains(",");
        boolean glob = path.contains("*") || path.contains("?") || path.contains("[");
        if (!list && !glob) {
            return null;
        }
        java.util.LinkedHashSet<String> out = new java.util.LinkedHashSet<>();
        for (String item : path.split(",")) {
            String it = item.trim();
            if (it.isEmpty()) {
                continue;
            }
            java.nio.file.Path ip = java.nio.file.Path.of(it);
            String name = ip.getFileName() == null ? it : ip.getFileName().toString();
            if (!(name.contains("*") || name.contains("?") || name.contains("["))) {
                out.add(it);
                continue;
            }
            java.nio.file.Path dir = ip.getParent() == null ? java.nio.file.Path.of(".") : ip.getParent();
            java.nio.file.PathMatcher m = dir.getFileSystem().getPathMatcher("glob:" + name);
            List<String> found = new ArrayList<>();
            try (java.nio.file.DirectoryStream<java.nio.file.Path> ds = java.nio.file.Files.newDirectoryStream(dir)) {
                for (java.nio.file.Path c : ds) {
                    String n = c.getFileName().toString();
                    if (m.matches(c.getFileName()) && !isSidecar(n)) {
                        found.add(c.toString());
                    }
                }
            } catch (java.io.IOException e) {
                throw new IllegalArgumentException("mappedbus: cannot list " + dir + " for pattern " + it + ": "
                        + e.getMessage(), e);
            }
            if (found.isEmpty() && !allowEmpty) {
                throw new IllegalArgumentException("mappedbus: pattern " + it + " matches no bus");
            }
            java.util.Collections.sort(found);
            out.addAll(found);
        }
        if (out.isEmpty() && !allowEmpty) {
            throw new IllegalArgumentException("mappedbus: option 'path' names no bus: '" + path + "'");
        }
        return out.toArray(new String[0]);
    }

    /**
     * Whether a file name is one of the files written beside a bus (its metadata, commit log, wake file, consumer
     * registry, writers file, work groups' directory or topics file), which a pattern never names as a bus. The one list of
     * them is {@code layout.py}'s SIDE_SUFFIXES (Python's {@code formats.files.side_files}); a new side file is
     * added there and here, and tests/formats/test_side_files.py checks that this method names the same suffixes.
     */
    static boolean isSidecar(String name) {
        return name.endsWith(Layout.META_SUFFIX) || name.endsWith(CommitLog.SUFFIX) || name.endsWith(WAKE_SUFFIX)
                || name.endsWith(Layout.CONSUMERS_SUFFIX) || name.endsWith(Layout.WRITERS_SUFFIX)
                || name.endsWith(Layout.GROUP_DIR_SUFFIX) || name.endsWith(Layout.TOPICS_SUFFIX);
    }

    /** Suffix of a single-file bus's wake file ({@code layout.py} WAKE_SUFFIX). */
    private static final String WAKE_SUFFIX = ".wake";

    /**
     * The bus.meta of a rolling bus at {@code path}, or null if {@code path} is not a directory holding one.
     *
     * @throws IllegalArgumentException if it holds a metadata file that is not a rolling bus's or not trusted
     */
    static io.mappedbuspy.internal.BusMeta rollingMeta(String path) {
        java.nio.file.Path dir = java.nio.file.Path.of(path);
        if (!java.nio.file.Files.isDirectory(dir, java.nio.file.LinkOption.NOFOLLOW_LINKS)) {
            return null;
        }
        java.nio.file.Path metaPath = dir.resolve(Layout.META_FILE);
        io.mappedbuspy.internal.BusMeta m;
        try {
            m = io.mappedbuspy.internal.BusMeta.read(metaPath, false);
        } catch (java.io.IOException e) {
            throw new IllegalArgumentException("mappedbus: cannot read " + metaPath + ": " + e.getMessage(), e);
        }
        if (m != null && m.kind() != io.mappedbuspy.BusKind.ROLLING) {
            throw new IllegalArgumentException("mappedbus: " + metaPath + " describes a " + m.kind()
                    + " bus, not a rolling one");
        }
        return m;
    }

    // Option topics: names separated by commas, for a framed bus only.
    private static String[] topicsOpt(String v, boolean frames, String path) {
        if (v == null) {
            return null;
        }
        if (!frames) {
            throw new IllegalArgumentException("mappedbus: option 'topics' is a framed bus's, and " + path
                    + " is not one");
        }
        java.util.LinkedHashSet<String> names = new java.util.LinkedHashSet<>();
        for (String t : v.split(",")) {
            String name = t.trim();
            if (name.isEmpty()) {
                throw new IllegalArgumentException("mappedbus: option topics='" + v + "' names an empty topic (names "
                        + "are separated by commas)");
            }
            names.add(name); // the readers check each name as a topic name
        }
        return names.toArray(new String[0]);
    }

    /** @return the topics file of this framed bus: {@code PATH.topics}, or {@code DIR/bus.topics} */
    public String topicsFile() {
        return rolling ? path + java.io.File.separator + Layout.TOPICS_FILE : path + Layout.TOPICS_SUFFIX;
    }

    /** @return the read schema: position, meta, then payload or the layout's fields */
    public StructType readSchema() {
        List<StructField> cols = new ArrayList<>();
        cols.add(DataTypes.createStructField(POSITION, DataTypes.LongType, false));
        if (frames) {
            cols.add(DataTypes.createStructField(TOPIC, DataTypes.StringType, true));
            cols.add(DataTypes.createStructField(PAYLOAD, DataTypes.BinaryType, false));
            if (buses != null) {
                cols.add(DataTypes.createStructField(BUS, DataTypes.StringType, false));
            }
            return DataTypes.createStructType(cols);
        }
        cols.add(DataTypes.createStructField(META, DataTypes.IntegerType, false));
        if (layout == null) {
            cols.add(DataTypes.createStructField(PAYLOAD, DataTypes.BinaryType, false));
        } else {
            cols.addAll(layout.sparkFields());
        }
        // Whenever the path is a list or a pattern, even one matching one bus: a stream's pattern may
        // match more later, and its schema cannot change.
        if (buses != null) {
            cols.add(DataTypes.createStructField(BUS, DataTypes.StringType, false));
        }
        return DataTypes.createStructType(cols);
    }

    /**
     * The logical file size: the option, or the file's length.
     *
     * @param mustExist whether a missing file without a fileSize option is an error (else -1)
     * @return the size in bytes
     */
    public long resolveFileSize(boolean mustExist) {
        if (fileSize > 0) {
            return fileSize;
        }
        File f = new File(path);
        if (!f.isFile()) {
            if (mustExist) {
                throw new IllegalArgumentException("mappedbus: bus file " + path + " does not exist (give "
                        + "option 'fileSize' to create it)");
            }
            return -1;
        }
        long m = metaFileSize();
        return m > 0 ? m : f.length();
    }

    /**
     * The logical file size for a write: the option, or the size the bus's metadata records. A file's
     * length is rounded up to a page, so without either the writer would use another end than the
     * bus's other processes (whose readers then miss what it writes past their end).
     *
     * @return the size in bytes
     * @throws IllegalArgumentException if neither gives the size
     */
    long writeFileSize() {
        if (fileSize > 0) {
            return fileSize;
        }
        File f = new File(path);
        if (!f.isFile()) {
            throw new IllegalArgumentException("mappedbus: bus file " + path + " does not exist (give "
                    + "option 'fileSize' to create it)");
        }
        long m = metaFileSize();
        if (m <= 0) {
            throw new IllegalArgumentException("mappedbus: bus file " + path + " has no metadata ("
                    + path + Layout.META_SUFFIX + ") recording its logical size, and its length (" + f.length()
                    + " bytes) is rounded up to a page: give option 'fileSize', the size every process "
                    + "using it was given, to write to it");
        }
        return m;
    }

    /** The file size recorded by the metadata of a bus this project created, or -1 (none, or not this file's). */
    private long metaFileSize() {
        try {
            io.mappedbuspy.internal.BusMeta meta = singleMeta(path);
            return meta == null ? -1 : meta.fileSize();
        } catch (RuntimeException e) {
            return -1; // unreadable or untrusted metadata: opening the bus reports it
        }
    }

    /**
     * The metadata of the single-file bus at {@code path}: its {@code PATH.meta} when that describes this file
     * (kind single, the file's inode); null for no regular file there, no metadata, or metadata of another
     * file (a file made by the Java original, which writes none).
     *
     * @throws IllegalArgumentException if the metadata file cannot be read or is not to be trusted
     */
    static io.mappedbuspy.internal.BusMeta singleMeta(String path) {
        java.nio.file.Path p = java.nio.file.Path.of(path);
        if (!java.nio.file.Files.isRegularFile(p, java.nio.file.LinkOption.NOFOLLOW_LINKS)) {
            return null;
        }
        java.nio.file.Path metaPath = io.mappedbuspy.internal.BusMeta.metaPath(path);
        io.mappedbuspy.internal.BusMeta m;
        Object ino;
        try {
            m = io.mappedbuspy.internal.BusMeta.read(metaPath, false);
            if (m == null) {
                return null;
            }
            ino = java.nio.file.Files.getAttribute(p, "unix:ino", java.nio.file.LinkOption.NOFOLLOW_LINKS);
        } catch (java.nio.file.NoSuchFileException e) {
            return null; // removed since: opening the bus reports that
        } catch (java.io.IOException e) {
            throw new IllegalArgumentException("mappedbus: cannot read " + metaPath + ": " + e.getMessage(), e);
        }
        return m.kind() == io.mappedbuspy.BusKind.SINGLE && ino.equals(m.inode()) ? m : null;
    }

    private static String get(Map<String, String> o, String key) {
        String v = o.get(key);
        return v == null ? null : v.trim();
    }

    private static long longOpt(Map<String, String> o, String key, long dflt, long min) {
        String v = get(o, key);
        if (v == null) {
            return dflt;
        }
        long x;
        try {
            x = Long.parseLong(v.replace("_", ""));
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("mappedbus: option '" + key + "' must be an integer, got '" + v + "'");
        }
        if (x < min) {
            throw new IllegalArgumentException("mappedbus: option '" + key + "' must be >= " + min + ", got " + x);
        }
        return x;
    }

    private static int intOpt(Map<String, String> o, String key, int dflt, int min) {
        long x = longOpt(o, key, dflt, min);
        if (x > Integer.MAX_VALUE) {
            throw new IllegalArgumentException("mappedbus: option '" + key + "' is too large: " + x);
        }
        return (int) x;
    }

    private static boolean boolOpt(Map<String, String> o, String key, boolean dflt) {
        String v = get(o, key);
        if (v == null) {
            return dflt;
        }
        if (v.equalsIgnoreCase("true")) {
            return true;
        }
        if (v.equalsIgnoreCase("false")) {
            return false;
        }
        throw new IllegalArgumentException("mappedbus: option '" + key + "' must be true or false, got '" + v + "'");
    }
}
