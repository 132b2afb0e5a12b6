"""``mappedbus exporter``: the buses' figures (``metrics``) for Prometheus, over HTTP.

``prometheus_client`` is an optional dependency, the ``metrics`` extra
(``pip install 'mappedbus_py[metrics]'``): this is the one module that imports it, when a
collector first collects or a server starts.
"""
import os
import threading
import time

from .metrics import list_consumers, list_groups, open_bus, parked_readers

__all__ = ("BusCollector", "serve", "DEFAULT_HOST", "DEFAULT_PORT")

#: Where ``mappedbus exporter`` listens unless told otherwise: this machine only.
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 9478

_SCRAPE_BUDGET = 4 << 20    # bytes a scrape scans itself per bus; the background does the rest


def _prometheus():
    """The ``prometheus_client`` package (with its ``core`` and ``exposition``); an ImportError
    naming the extra that installs it when it is not installed."""
    try:
        import prometheus_client.core
        import prometheus_client.exposition
    except ImportError as e:
        raise ImportError(f"the Prometheus exporter needs prometheus_client, which is not "
                          f"installed ({e}): install the metrics extra, "
                          f"pip install 'mappedbus_py[metrics]'", name="prometheus_client") from None
    return prometheus_client


class BusCollector:
    """A ``prometheus_client`` collector over buses: every scrape reads each bus's limit,
    the slots new since the last scrape (up to a budget; a background thread started by
    ``serve`` reads the rest), its consumers and its wake file. Metrics are documented in
    docs/cli.md ("exporter")."""

    def __init__(self, paths, *, budget=_SCRAPE_BUDGET):
        self.paths = [os.fspath(p) for p in paths]
        self.budget = budget
        self.counters = {p: open_bus(p) for p in self.paths}
        self.errors = {p: 0 for p in self.paths}
        self.last_error = {}

    def describe(self):
        """Nothing up front (the families depend on the buses): registering does not scrape."""
        return []

    def catch_up(self):
        """Read every bus's new slots (the background thread's step)."""
        for p, c in self.counters.items():
            try:
                c.catch_up()
            except (OSError, ValueError) as e:
                self.last_error[p] = str(e)

    def collect(self):
        """The metric families, one sample per bus (per consumer for consumer metrics)."""
        core = _prometheus().core
        CounterMetricFamily, GaugeMetricFamily = core.CounterMetricFamily, core.GaugeMetricFamily
        t0 = time.perf_counter()
        now = time.time()

        def gauge(name, doc, labels=("bus",)):
            return GaugeMetricFamily(name, doc, labels=list(labels))

        up = gauge("mappedbus_up", "1 if the bus was read by this scrape, 0 if not "
                                   "(gone, unreadable, corrupt registry)")
        info = gauge("mappedbus_bus_info", "the bus: kind (single|rolling) and its id",
                     ("bus", "kind", "bus_id"))
        committed = CounterMetricFamily("mappedbus_records_committed",
                                        "records written: slots with status 1 (committed)",
                                        labels=["bus"])
        rolled = CounterMetricFamily("mappedbus_records_rolled_back",
                                     "slots with status 2: rolled back (their writer crashed or "
                                     "stalled past the readers' timeout); readers skip them",
                                     labels=["bus"])
        allocated = CounterMetricFamily("mappedbus_slots_allocated",
                                        "slots allocated by writers (from the limit; a rolling "
                                        "bus: since its first record)", labels=["bus"])
        uncounted = gauge("mappedbus_slots_uncounted",
                          "slots of segments that retention removed before the exporter "
                          "read them (their statuses are unknown)")
        not_set = gauge("mappedbus_slots_not_set",
                        "allocated slots not committed now (status 0): being written, or "
                        "their writer crashed")
        corrupt = gauge("mappedbus_slots_corrupt", "slots with a status other than 0, 1, 2")
        unscanned = gauge("mappedbus_slots_unscanned",
                          "allocated slots not counted yet (the exporter is catching up)")
        limit = gauge("mappedbus_limit_position",
                      "the limit: the position just past the last allocated slot")
        first = gauge("mappedbus_first_position", "the position of the oldest retained record")
        capacity = gauge("mappedbus_capacity_records",
                         "records the bus holds (a rolling bus: one segment)")
        full = gauge("mappedbus_full", "1 when a single-file bus takes no more records")
        segments = gauge("mappedbus_segments", "segments of a rolling bus on disk")
        parked = gauge("mappedbus_parked_readers",
                       "readers parked on the bus's wake file, waiting for a writer")
        n_cons = gauge("mappedbus_consumers", "registered consumers")
        clabels = ("bus", "consumer")
        lag = gauge("mappedbus_consumer_lag_records",
                    "records between the consumer's committed position and the limit", clabels)
        pos = gauge("mappedbus_consumer_position", "the consumer's committed position", clabels)
        alive = gauge("mappedbus_consumer_alive",
                      "1 if a live process holds the consumer", clabels)
        expired = gauge("mappedbus_consumer_expired",
                        "1 once retention expired the consumer (it lagged too far)", clabels)
        age = gauge("mappedbus_consumer_last_commit_age_seconds",
                    "seconds since the consumer's last commit (since it was made, if never)",
                    clabels)
        glabels = ("bus", "group")
        g_pending = gauge("mappedbus_group_pending_records",
                          "records handed out to the group's members and not settled (in "
                          "flight or released for redelivery)", glabels)
        g_in_flight = gauge("mappedbus_group_in_flight_records",
                            "records the group's live members hold unsettled", glabels)
        g_acked = CounterMetricFamily("mappedbus_group_acked", "records the group acked",
                                      labels=list(glabels))
        g_redelivered = CounterMetricFamily("mappedbus_group_redelivered",
                                            "deliveries of records taken back from a dead, "
                                            "late or releasing member", labels=list(glabels))
        g_dead = CounterMetricFamily("mappedbus_group_dead_lettered",
                                     "records sent to the group's dead-letter bus (rejected "
                                     "included)", labels=list(glabels))
        g_age = gauge("mappedbus_group_oldest_unacked_age_seconds",
                      "seconds since the group's oldest pending record was delivered (0: none)",
                      glabels)
        g_members = gauge("mappedbus_group_members_alive", "the group's live members", glabels)
        m_in_flight = gauge("mappedbus_group_member_in_flight_records",
                            "records a live member holds unsettled",
                            ("bus", "group", "member", "name"))
        errors = CounterMetricFamily("mappedbus_exporter_errors",
                                     "scrapes that could not read the bus", labels=["bus"])
        for p, c in self.counters.items():
            try:
                with c.lock:
                    c.refresh(self.budget)
                    s = c.snapshot()
                rows = list_consumers(p)
                nparked = parked_readers(p, c.rolling)
            except Exception as e:      # gone, unreadable, CorruptBusError: this bus is down
                self.errors[p] += 1
                self.last_error[p] = str(e)
                up.add_metric([p], 0)
                errors.add_metric([p], self.errors[p])
                continue
            up.add_metric([p], 1)
            errors.add_metric([p], self.errors[p])
            info.add_metric([p, s.kind, s.bus_id or ""], 1)
            allocated.add_metric([p], s.allocated)
            committed.add_metric([p], s.committed)
            rolled.add_metric([p], s.rolled_back)
            not_set.add_metric([p], s.not_set)
            corrupt.add_metric([p], s.corrupt)
            unscanned.add_metric([p], s.unscanned)
            limit.add_metric([p], s.limit)
            first.add_metric([p], s.first)
            capacity.add_metric([p], s.capacity)
            if s.kind == "single":
                full.add_metric([p], int(s.full))
            else:
                segments.add_metric([p], s.segments)
                uncounted.add_metric([p], max(0, s.allocated - s.committed - s.rolled_back
                                              - s.not_set - s.corrupt - s.unscanned))
            parked.add_metric([p], nparked)
            n_cons.add_metric([p], len(rows))
            for r in rows:
                lab = [p, r.name]
                if r.lag is not None:               # None: the entry is of an earlier bus
                    lag.add_metric(lab, r.lag)
                pos.add_metric(lab, r.position)
                alive.add_metric(lab, int(bool(r.alive)))
                expired.add_metric(lab, int(bool(r.expired)))
                age.add_metric(lab, max(0.0, now - (r.committed_at or r.created_at)))
            try:
                groups = list_groups(p)
            except Exception as e:      # a corrupt group file: the bus's own figures stand
                self.last_error[p] = str(e)
                groups = []
            for g in groups:
                lab = [p, g.name]
                live = g.live_members
                g_pending.add_metric(lab, g.pending)
                g_in_flight.add_metric(lab, sum(m.in_flight for m in live))
                g_acked.add_metric(lab, g.acked)
                g_redelivered.add_metric(lab, g.redelivered)
                g_dead.add_metric(lab, g.dead_lettered)
                g_age.add_metric(lab, g.oldest_unacked_age)
                g_members.add_metric(lab, len(live))
                for m in live:
                    m_in_flight.add_metric([p, g.name, str(m.index), m.name], m.in_flight)
        took = gauge("mappedbus_exporter_collect_seconds",
                     "how long the exporter took to gather this scrape's figures", ())
        took.add_metric([], time.perf_counter() - t0)
        return [up, info, allocated, committed, rolled, uncounted, not_set, corrupt, unscanned,
                limit, first, capacity, full, segments, parked, n_cons, lag, pos, alive,
                expired, age, g_pending, g_in_flight, g_acked, g_redelivered, g_dead, g_age,
                g_members, m_in_flight, errors, took]


def serve(paths, host=DEFAULT_HOST, port=DEFAULT_PORT, *, interval=1.0):
    """Serve the metrics of the buses ``paths`` over HTTP (``/metrics``) on ``host:port``
    from threads; returns ``(server, collector, stop)``: the server's ``server_port`` is the
    port bound (``port=0``: a free one), and ``stop()`` shuts it down. A background thread
    reads new slots every ``interval`` seconds.

    The answer is always the Prometheus text format, uncompressed, whatever the scraper
    asks for: prometheus_client's OpenMetrics writer and gzip would add about 60 % to the
    cost of a scrape (perf/results/exporter.md), for an answer of some 50 KB on a local
    link."""
    import socket
    from wsgiref.simple_server import WSGIRequestHandler, make_server

    prometheus = _prometheus()
    CollectorRegistry, make_wsgi_app = prometheus.CollectorRegistry, prometheus.make_wsgi_app
    ThreadingWSGIServer = prometheus.exposition.ThreadingWSGIServer
    collector = BusCollector(paths)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    app = make_wsgi_app(registry, disable_compression=True)

    def text_format(environ, start_response):
        environ["HTTP_ACCEPT"] = "text/plain"
        return app(environ, start_response)

    class Quiet(WSGIRequestHandler):
        def log_message(self, format, *args):
            """Log nothing: a scrape every few seconds is no news."""

    class Server(ThreadingWSGIServer):
        address_family = socket.AF_INET6 if ":" in host else socket.AF_INET

    try:
        server = make_server(host, port, text_format, Server, handler_class=Quiet)
    except BaseException:
        for c in collector.counters.values():
            c.close()
        raise
    thread = threading.Thread(target=server.serve_forever, name="mappedbus-exporter-http",
                              daemon=True)
    thread.start()
    done = threading.Event()

    def background():
        while not done.wait(interval):
            collector.catch_up()

    bg = threading.Thread(target=background, name="mappedbus-exporter-scan", daemon=True)
    bg.start()

    def stop():
        done.set()
        server.shutdown()
        server.server_close()
        thread.join(5)
        bg.join(5)
        for c in collector.counters.values():
            c.close()

    return server, collector, stop
