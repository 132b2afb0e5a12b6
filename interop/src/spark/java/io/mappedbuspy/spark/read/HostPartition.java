package io.mappedbuspy.spark.read;

import org.apache.spark.SparkContext;
import org.apache.spark.SparkExecutorInfo;
import org.apache.spark.SparkEnv;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReader;

import java.io.IOException;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import io.mappedbuspy.spark.BusOptions;

/**
 * A per-host read ({@code option("hosts", "h1,h2")} or {@code "*"}): one partition per host, which the
 * driver cannot plan (it does not see that host's bus), so the task plans it when it runs, on its host,
 * from the options as given. The partition prefers its host; the task fails before opening anything if
 * Spark ran it on another executor host, so a host's bus is read only by that host's tasks, and once:
 * the read's result is the union of the listed hosts' buses (each as a batch read of it would give).
 */
final class HostPartition implements InputPartition {
    private static final long serialVersionUID = 1L;
    /** How long planning waits for an executor on every listed host. */
    static final long REGISTER_WAIT_MS = 60_000;

    final String host;
    final java.util.HashMap<String, String> rawOptions;
    final long lo;
    final long hi;
    final int[] metas;

    HostPartition(String host, BusOptions o, long lo, long hi, int[] metas) {
        this.host = host;
        this.rawOptions = o.raw;
        this.lo = lo;
        this.hi = hi;
        this.metas = metas;
    }

    @Override
    public String[] preferredLocations() {
        return new String[] {host};
    }

    @Override
    public String toString() {
        return "HostPartition[" + host + " " + rawOptions.get("path") + "]";
    }

    /** One partition per host: the listed ones (waiting for them to have executors), or every executor host. */
    static InputPartition[] plan(BusOptions o, long lo, long hi, int[] metas) {
        SparkContext sc = SparkContext.getOrCreate();
        long deadline = System.nanoTime() + REGISTER_WAIT_MS * 1_000_000L;
        boolean all = o.hosts.length == 1 && o.hosts[0].equals("*");
        Set<String> have;
        while (true) {
            have = executorHosts(sc);
            Set<String> missing = new LinkedHashSet<>();
            if (!all) {
                for (String h : o.hosts) {
                    if (!have.contains(h)) {
                        missing.add(h);
                    }
                }
            }
            if (missing.isEmpty() && !have.isEmpty()) {
                break;
            }
            if (System.nanoTime() - deadline > 0) {
                throw new IllegalStateException("mappedbus: per-host read of " + o.path + ": no executor on "
                        + (all ? "any host" : "host(s) " + missing) + " after " + REGISTER_WAIT_MS + " ms (executor "
                        + "hosts: " + have + "); hosts are named as Spark knows executors (their -h/SPARK_LOCAL_IP)");
            }
            try {
                Thread.sleep(200);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new IllegalStateException("interrupted while waiting for executors", e);
            }
        }
        List<InputPartition> parts = new ArrayList<>();
        for (String h : all ? have : new LinkedHashSet<>(List.of(o.hosts))) {
            parts.add(new HostPartition(h, o, lo, hi, metas));
        }
        return parts.toArray(new InputPartition[0]);
    }

    /** Hosts with an executor: the driver's own counts only in local mode (where it runs the tasks). */
    static Set<String> executorHosts(SparkContext sc) {
        String driver = BusPartition.executorHost();
        int driverPort = SparkEnv.get() == null ? -1 : SparkEnv.get().blockManager().blockManagerId().port();
        Set<String> out = new LinkedHashSet<>();
        boolean driverOnly = true;
        for (SparkExecutorInfo e : sc.statusTracker().getExecutorInfos()) {
            if (e.host().equals(driver) && e.port() == driverPort) {
                continue;
            }
            driverOnly = false;
            out.add(e.host());
        }
        if (driverOnly && sc.isLocal() && driver != null) {
            out.add(driver);
        }
        return out;
    }

    /** Reads a host's own bus: checks the host, plans it there, and reads its partitions one after another. */
    static final class Reader<T> implements PartitionReader<T> {
        private final BusReaderFactory factory;
        private final BusReaderFactory local;
        private final InputPartition[] parts;
        private final boolean columnar;
        private int next;
        private PartitionReader<?> current;

        Reader(BusReaderFactory factory, HostPartition p, boolean columnar) {
            this.factory = factory;
            this.columnar = columnar;
            String here = BusPartition.executorHost();
            if (!p.host.equals(here)) {
                throw new IllegalStateException("mappedbus: the part of a per-host read of " + p.rawOptions.get("path")
                        + " planned for host " + p.host + " ran on executor host " + here + " ("
                        + BusPartition.localHostName() + "); it reads only its own host's bus, so it fails "
                        + "rather than read this one: raise spark.locality.wait so that Spark waits for " + p.host);
            }
            BusOptions o = BusOptions.parse(p.rawOptions);
            this.parts = BusScan.planLocally(o, factory.schema, p.lo, p.hi, p.metas);
            this.local = factory.with(o, factory.schema);
        }

        @Override
        public boolean next() throws IOException {
            while (true) {
                if (current != null && current.next()) {
                    return true;
                }
                if (current != null) {
                    current.close();
                    current = null;
                }
                if (next >= parts.length) {
                    return false;
                }
                InputPartition bp = parts[next++];
                current = columnar ? local.createColumnarReader(bp) : local.createReader(bp);
            }
        }

        @Override
        @SuppressWarnings("unchecked")
        public T get() {
            return (T) current.get();
        }

        @Override
        public void close() throws IOException {
            if (current != null) {
                current.close();
                current = null;
            }
        }

        @Override
        public String toString() {
            return "HostPartition.Reader[" + factory.schema.simpleString() + "]";
        }
    }
}
