package io.mappedbuspy.spark;

import org.apache.spark.sql.connector.catalog.SupportsRead;
import org.apache.spark.sql.connector.catalog.SupportsWrite;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.write.LogicalWriteInfo;
import org.apache.spark.sql.connector.write.WriteBuilder;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

import java.util.EnumSet;
import java.util.HashMap;
import java.util.Map;
import java.util.Set;
import io.mappedbuspy.spark.read.BusScanBuilder;
import io.mappedbuspy.spark.write.BusWriteBuilder;

/** One bus file as a Spark table: readable in batch and micro-batch, appendable in batch and streaming. */
final class MappedBusTable implements SupportsRead, SupportsWrite {
    private final StructType schema;
    private final Map<String, String> properties;

    MappedBusTable(StructType schema, Map<String, String> properties) {
        this.schema = schema;
        this.properties = new HashMap<>(properties);
    }

    @Override
    public String name() {
        return "mappedbus:" + properties.getOrDefault("path", "?");
    }

    // Deprecated in Spark 4 for columns(), which Spark 3.5 lacks; the default columns() derives from it.
    @SuppressWarnings("deprecation")
    @Override
    public StructType schema() {
        return schema;
    }

    @Override
    public Map<String, String> properties() {
        return properties;
    }

    @Override
    public Set<TableCapability> capabilities() {
        // ACCEPT_ANY_SCHEMA: a write's columns are checked against the layout by BusWriteBuilder instead.
        return EnumSet.of(TableCapability.BATCH_READ, TableCapability.MICRO_BATCH_READ,
                TableCapability.BATCH_WRITE, TableCapability.STREAMING_WRITE, TableCapability.ACCEPT_ANY_SCHEMA);
    }

    @Override
    public ScanBuilder newScanBuilder(CaseInsensitiveStringMap options) {
        BusOptions opts = BusOptions.parse(options);
        StructType full = opts.readSchema();
        if (!sameColumns(full, schema)) {
            throw new IllegalArgumentException("mappedbus: the read schema comes from the options (layout, "
                    + "recordSize); a user-specified schema " + schema.simpleString() + " differs from "
                    + full.simpleString());
        }
        return new BusScanBuilder(opts, full);
    }

    @Override
    public WriteBuilder newWriteBuilder(LogicalWriteInfo info) {
        BusOptions o = BusOptions.parse(info.options());
        if (o.buses != null) {
            throw new IllegalArgumentException("mappedbus: a write goes to one bus; path '" + o.raw.get("path")
                    + "' names " + o.buses.length);
        }
        return new BusWriteBuilder(o, info.schema(), info.queryId());
    }

    private static boolean sameColumns(StructType a, StructType b) {
        if (a.fields().length != b.fields().length) {
            return false;
        }
        for (int i = 0; i < a.fields().length; i++) {
            StructField x = a.fields()[i];
            StructField y = b.fields()[i];
            if (!x.name().equalsIgnoreCase(y.name()) || !x.dataType().equals(y.dataType())) {
                return false;
            }
        }
        return true;
    }
}
