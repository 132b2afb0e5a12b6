package io.mappedbuspy.spark;

import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableProvider;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.sources.DataSourceRegister;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

import java.util.Map;

/**
 * The {@code mappedbus} data source: batch and streaming reads of a bus file's committed records, and
 * batch and streaming appends. Registered through
 * {@code META-INF/services/org.apache.spark.sql.sources.DataSourceRegister}, so
 * {@code spark.read.format("mappedbus")} finds it.
 */
public final class MappedBusDataSource implements TableProvider, DataSourceRegister {
    /** Creates the provider (Spark calls this reflectively). */
    public MappedBusDataSource() {
    }

    @Override
    public String shortName() {
        return "mappedbus";
    }

    /** The read schema follows from the options alone: the file is not opened. */
    @Override
    public StructType inferSchema(CaseInsensitiveStringMap options) {
        return BusOptions.parse(options).readSchema();
    }

    @Override
    public Table getTable(StructType schema, Transform[] partitioning, Map<String, String> properties) {
        return new MappedBusTable(schema, properties);
    }

    /** True so that a batch write hands over the DataFrame's schema instead of inferring one. */
    @Override
    public boolean supportsExternalMetadata() {
        return true;
    }
}
