package io.mappedbuspy.spark.read;

import org.apache.spark.sql.connector.expressions.aggregate.AggregateFunc;
import org.apache.spark.sql.connector.expressions.aggregate.Aggregation;
import org.apache.spark.sql.connector.expressions.aggregate.CountStar;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.SupportsPushDownAggregates;
import org.apache.spark.sql.connector.read.SupportsPushDownFilters;
import org.apache.spark.sql.connector.read.SupportsPushDownRequiredColumns;
import org.apache.spark.sql.sources.EqualTo;
import org.apache.spark.sql.sources.Filter;
import org.apache.spark.sql.sources.GreaterThan;
import org.apache.spark.sql.sources.GreaterThanOrEqual;
import org.apache.spark.sql.sources.In;
import org.apache.spark.sql.sources.LessThan;
import org.apache.spark.sql.sources.LessThanOrEqual;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Set;
import java.util.TreeSet;
import io.mappedbuspy.spark.BusOptions;

/**
 * Builds a {@link BusScan}, keeping only the columns the query uses (so {@code count()} decodes none), and
 * taking the predicates it can answer itself: a {@code position} range (comparisons, {@code =},
 * {@code IN}) narrows the slots planned; {@code meta = x} and {@code meta IN (...)} are applied by the
 * readers before anything is decoded.
 */
public final class BusScanBuilder implements SupportsPushDownRequiredColumns, SupportsPushDownFilters,
        SupportsPushDownAggregates {
    private final BusOptions options;
    private StructType schema;
    /** Pushed position range {@code [lo, hi)}. */
    private long lo = Long.MIN_VALUE;
    private long hi = Long.MAX_VALUE;
    /** Pushed metadata values (null: any). */
    private Set<Integer> metas;
    private Filter[] pushed = new Filter[0];
    /** A framed bus: topic names pushed ({@code topic = x}, {@code topic IN (...)}), or null for all. */
    private Set<String> topics;
    /** {@code count(*)} pushed down (Spark sums the partitions' counts): how many such aggregates, or 0. */
    private int counts;

    public BusScanBuilder(BusOptions options, StructType schema) {
        this.options = options;
        this.schema = schema;
    }

    @Override
    public void pruneColumns(StructType required) {
        Set<String> keep = new HashSet<>();
        for (StructField f : required.fields()) {
            keep.add(f.name().toLowerCase(Locale.ROOT));
        }
        List<StructField> out = new ArrayList<>();
        for (StructField f : schema.fields()) {
            if (keep.contains(f.name().toLowerCase(Locale.ROOT))) {
                out.add(f);
            }
        }
        schema = new StructType(out.toArray(new StructField[0]));
    }

    @Override
    public Filter[] pushFilters(Filter[] filters) {
        List<Filter> rest = new ArrayList<>();
        List<Filter> taken = new ArrayList<>();
        for (Filter f : filters) {
            int how = push(f);
            if (how != NOT_PUSHED) {
                taken.add(f);
            }
            if (how != EXACT) {
                rest.add(f);
            }
        }
        pushed = taken.toArray(new Filter[0]);
        return rest.toArray(new Filter[0]);
    }

    @Override
    public Filter[] pushedFilters() {
        return pushed.clone();
    }

    private static final int NOT_PUSHED = 0;
    /** Narrows the scan, but Spark must still evaluate it (position = / IN: a range around the values). */
    private static final int INEXACT = 1;
    private static final int EXACT = 2;

    private int push(Filter f) {
        if (options.frames) {
            return pushFrames(f);
        }
        if (f instanceof GreaterThan && isPos(((GreaterThan) f).attribute())) {
            Long v = asLong(((GreaterThan) f).value());
            return v == null || v == Long.MAX_VALUE ? NOT_PUSHED : lower(v + 1);
        } else if (f instanceof GreaterThanOrEqual && isPos(((GreaterThanOrEqual) f).attribute())) {
            Long v = asLong(((GreaterThanOrEqual) f).value());
            return v == null ? NOT_PUSHED : lower(v);
        } else if (f instanceof LessThan && isPos(((LessThan) f).attribute())) {
            Long v = asLong(((LessThan) f).value());
            return v == null ? NOT_PUSHED : upper(v);
        } else if (f instanceof LessThanOrEqual && isPos(((LessThanOrEqual) f).attribute())) {
            Long v = asLong(((LessThanOrEqual) f).value());
            return v == null || v == Long.MAX_VALUE ? NOT_PUSHED : upper(v + 1);
        } else if (f instanceof EqualTo && isPos(((EqualTo) f).attribute())) {
            Long v = asLong(((EqualTo) f).value());
            if (v == null || v == Long.MAX_VALUE) {
                return NOT_PUSHED;
            }
            lower(v);
            upper(v + 1);
            return INEXACT;
        } else if (f instanceof In && isPos(((In) f).attribute())) {
            long min = Long.MAX_VALUE;
            long max = Long.MIN_VALUE;
            for (Object o : ((In) f).values()) {
                Long v = asLong(o);
                if (v == null || v == Long.MAX_VALUE) {
                    return NOT_PUSHED;
                }
                min = Math.min(min, v);
                max = Math.max(max, v);
            }
            if (min == Long.MAX_VALUE) {
                return NOT_PUSHED;
            }
            lower(min);
            upper(max + 1);
            return INEXACT;
        } else if (f instanceof EqualTo && isMeta(((EqualTo) f).attribute())) {
            Integer v = asInt(((EqualTo) f).value());
            return v == null ? NOT_PUSHED : metas(Set.of(v));
        } else if (f instanceof In && isMeta(((In) f).attribute())) {
            Set<Integer> vs = new HashSet<>();
            for (Object o : ((In) f).values()) {
                Integer v = asInt(o);
                if (v == null) {
                    return NOT_PUSHED; // null or out of int range: let Spark decide
                }
                vs.add(v);
            }
            return metas(vs);
        }
        return NOT_PUSHED;
    }

    // A framed bus: topic = 'x' and topic IN ('x', ...) are applied by the readers (EXACT); the rest by Spark.
    private int pushFrames(Filter f) {
        Set<String> vs = new HashSet<>();
        if (f instanceof EqualTo && ((EqualTo) f).attribute().equalsIgnoreCase(BusOptions.TOPIC)
                && ((EqualTo) f).value() instanceof String) {
            vs.add((String) ((EqualTo) f).value());
        } else if (f instanceof In && ((In) f).attribute().equalsIgnoreCase(BusOptions.TOPIC)) {
            for (Object o : ((In) f).values()) {
                if (!(o instanceof String)) {
                    return NOT_PUSHED; // a null: let Spark decide
                }
                vs.add((String) o);
            }
        } else {
            return NOT_PUSHED;
        }
        if (topics == null) {
            topics = vs;
        } else {
            topics.retainAll(vs);
        }
        return EXACT;
    }

    private int lower(long v) {
        lo = Math.max(lo, v);
        return EXACT;
    }

    private int upper(long v) {
        hi = Math.min(hi, v);
        return EXACT;
    }

    private int metas(Set<Integer> vs) {
        if (metas == null) {
            metas = new HashSet<>(vs);
        } else {
            metas.retainAll(vs);
        }
        return EXACT;
    }

    private static boolean isPos(String attribute) {
        return attribute.equalsIgnoreCase(BusOptions.POSITION);
    }

    private static boolean isMeta(String attribute) {
        return attribute.equalsIgnoreCase(BusOptions.META);
    }

    private static Long asLong(Object v) {
        if (v instanceof Long || v instanceof Integer || v instanceof Short || v instanceof Byte) {
            return ((Number) v).longValue();
        }
        return null;
    }

    private static Integer asInt(Object v) {
        Long l = asLong(v);
        return l == null || l != l.intValue() ? null : l.intValue();
    }

    /**
     * Takes {@code count(*)} without grouping (Spark pushes it only when every filter was pushed): each
     * partition returns its number of committed (and meta-matching) records, from the statuses alone,
     * instead of one empty row per record.
     */
    @Override
    public boolean pushAggregation(Aggregation aggregation) {
        if (options.frames || aggregation.groupByExpressions().length != 0 || aggregation.aggregateExpressions().length == 0) {
            return false;
        }
        for (AggregateFunc f : aggregation.aggregateExpressions()) {
            if (!(f instanceof CountStar)) {
                return false;
            }
        }
        counts = aggregation.aggregateExpressions().length;
        List<StructField> cols = new ArrayList<>();
        for (int i = 0; i < counts; i++) {
            cols.add(new StructField("count" + i, org.apache.spark.sql.types.DataTypes.LongType, false,
                    org.apache.spark.sql.types.Metadata.empty()));
        }
        schema = new StructType(cols.toArray(new StructField[0]));
        return true;
    }

    /**
     * Complete for a driver-planned read: its count is one row holding the total (no partial counts for
     * Spark to sum, so no job runs). Per-host reads count in a task per host, which Spark sums.
     */
    @Override
    public boolean supportCompletePushDown(Aggregation aggregation) {
        if (options.hosts != null || aggregation.groupByExpressions().length != 0
                || aggregation.aggregateExpressions().length == 0) {
            return false;
        }
        for (AggregateFunc f : aggregation.aggregateExpressions()) {
            if (!(f instanceof CountStar)) {
                return false;
            }
        }
        return true;
    }

    @Override
    public Scan build() {
        int[] m = null;
        if (metas != null) {
            m = new TreeSet<>(metas).stream().mapToInt(Integer::intValue).toArray();
        }
        BusScan scan = new BusScan(options, schema, lo, hi, m);
        scan.counts = counts;
        scan.topics = topics == null ? null : topics.toArray(new String[0]);
        // Per-host reads plan on the executors; every other count is answered by the driver's planning walk.
        return counts > 0 && options.hosts == null ? new BusScan.Count(scan) : scan;
    }

    @Override
    public String toString() {
        return "BusScanBuilder[" + Arrays.toString(pushed) + "]";
    }
}
