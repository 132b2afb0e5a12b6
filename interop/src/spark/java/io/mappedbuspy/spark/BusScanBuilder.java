package io.mappedbuspy.spark;

import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.SupportsPushDownRequiredColumns;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Set;

/** Builds a {@link BusScan}, keeping only the columns the query uses (so {@code count()} decodes none). */
final class BusScanBuilder implements SupportsPushDownRequiredColumns {
    private final BusOptions options;
    private StructType schema;

    BusScanBuilder(BusOptions options, StructType schema) {
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
    public Scan build() {
        return new BusScan(options, schema);
    }
}
