"""What ``mappedbus exporter`` and ``mappedbus top`` measure: record counts kept
incrementally, consumers, parked readers, and a Prometheus collector over them.

Counting slots by status is incremental: a ``SlotCounter`` keeps a cursor per bus file (per
segment on a rolling bus) and reads, at each ``refresh``, only the slots allocated since the
last one, plus the few slots it saw uncommitted (status 0), which a writer may commit or a
reader roll back later. It reads with ``pread`` and never writes; a file that shrinks only
ends a scan early. Segments removed by retention keep the totals counted before they went.

Nothing here writes a file: the wake file's parked count is read with ``pread`` (an absent
wake file is 0 parked, and is not created), the consumers through
``mappedbus_py.consumers``.
"""
import os
import stat as _stat
import threading
import time

from ._wake import parked_alive
from .busmeta import meta_path, read_meta
from .files import open_file
from .layout import (FIRST_RECORD_OFFSET, LIMIT_OFFSET, META_FILE, STATUS_COMMITTED,
                     STATUS_NOT_SET, STATUS_ROLLED_BACK, WAKE_FILE, WAKE_SUFFIX, join_position,
                     slot_size)
from .rolling import (end_boundary, list_segments, open_dir, read_bus_meta, segment_path,
                      slots_per_segment)
from .rolling import locate, records_between as _records_to

__all__ = ("SlotCounter", "BusCounter", "BusSnapshot", "open_bus", "parked_readers",
           "list_consumers", "list_groups", "records_between", "BusCollector", "serve",
           "DEFAULT_PORT", "DEFAULT_HOST")

#: Where ``mappedbus exporter`` listens unless told otherwise: this machine only.
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 9478

_CHUNK = 1 << 20            # bytes read by one pread
_SCRAPE_BUDGET = 4 << 20    # bytes a scrape scans itself per bus; the background does the rest
_RECHECK_SPAN = 1 << 20     # uncommitted slots within this many bytes are re-read with one pread


def _open_ro(path):
    fd, st = open_file(path, os.O_RDONLY, allow_foreign=True)
    return fd, st


def _statuses(data, step):
    """The int32 status of every whole slot in ``data`` (slots of ``step`` bytes)."""
    import numpy as np                  # here: the CLI's other commands start without it
    n = len(data) // step
    return np.ndarray((n,), dtype="<i4", buffer=data, offset=0, strides=(step,))


class SlotCounter:
    """Slots of one bus file (a single-file bus, or one segment) counted by status,
    incrementally. ``end`` is the offset just past the last slot that fits.

    ``committed``, ``rolled_back`` and ``corrupt`` (a status other than 0/1/2) only grow;
    ``not_set`` is the number of allocated slots seen uncommitted at the last refresh;
    ``limit`` the limit as stored; ``cursor`` the offset up to which slots were read."""

    def __init__(self, path, record_size, end, fd=None):
        self.path = os.fspath(path)
        self.step = slot_size(record_size)
        self.end = end
        self.cursor = FIRST_RECORD_OFFSET
        self.limit = 0
        self.committed = self.rolled_back = self.corrupt = 0
        self._pending = []          # offsets of allocated slots seen with status 0, ascending
        self._fd = fd
        if fd is None:
            self._fd, _ = _open_ro(self.path)

    @property
    def not_set(self):
        """Allocated slots seen uncommitted (status 0) at the last refresh."""
        return len(self._pending)

    @property
    def unscanned(self):
        """Allocated slots (at the last refresh) not read yet: a refresh ran out of budget."""
        return max(0, (min(self.limit, self.end) - self.cursor) // self.step)

    @property
    def settled(self):
        """True when every slot up to the limit was read and none is uncommitted."""
        return not self._pending and self.cursor >= min(self.limit, self.end)

    def close(self):
        """Close the file (the counts stay)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def _tally(self, st):
        import numpy as np
        c = np.bincount(np.clip(st, -1, 3) + 1, minlength=5)   # -1 and 3 stand for "other"
        self.committed += int(c[STATUS_COMMITTED + 1])
        self.rolled_back += int(c[STATUS_ROLLED_BACK + 1])
        self.corrupt += int(c[0] + c[4])

    def _recheck(self):
        """Re-read the slots seen uncommitted; count the ones that are final now. Few are
        uncommitted at a time (writers mid-write), so a plain loop does."""
        still = []
        pend, i = self._pending, 0
        while i < len(pend):
            j = i
            while j + 1 < len(pend) and pend[j + 1] - pend[i] < _RECHECK_SPAN:
                j += 1
            base = pend[i]
            data = os.pread(self._fd, pend[j] - base + 4, base)
            final = []
            for off in pend[i:j + 1]:
                at = off - base
                if at + 4 > len(data):
                    still.append(off)               # the file shrank: look again later
                    continue
                status = int.from_bytes(data[at:at + 4], "little", signed=True)
                if status == STATUS_NOT_SET:
                    still.append(off)
                else:
                    final.append(status)
            if final:
                import numpy as np
                self._tally(np.asarray(final, dtype=np.int32))
            i = j + 1
        self._pending = still

    def refresh(self, budget=None):
        """Read the limit, re-read the uncommitted slots, then read the slots allocated
        since the last refresh, at most ``budget`` bytes of them (None: all). Returns the
        number of bytes of new slots read."""
        head = os.pread(self._fd, 8, LIMIT_OFFSET)
        self.limit = int.from_bytes(head, "little", signed=True) if len(head) == 8 else 0
        if self._pending:
            self._recheck()
        stop = min(self.limit, self.end)
        done = 0
        while self.cursor + self.step <= stop and (budget is None or done < budget):
            n = min(max(1, _CHUNK // self.step), (stop - self.cursor) // self.step)
            if budget is not None:
                n = max(1, min(n, (budget - done) // self.step))
            data = os.pread(self._fd, n * self.step, self.cursor)
            st = _statuses(data, self.step)
            if not len(st):
                break                       # the file shrank under the limit
            waiting = (st == STATUS_NOT_SET).nonzero()[0]
            self._tally(st)                 # status 0 lands in no total
            self._pending.extend(int(self.cursor + k * self.step) for k in waiting)
            self.cursor += len(st) * self.step
            done += len(st) * self.step
            if len(st) < n:
                break
        return done


class BusSnapshot:
    """The figures of one bus at one moment (``BusCounter.snapshot``): ``kind``, ``bus_id``,
    ``allocated`` (slots below the limit, from the limit alone: on a rolling bus since
    position 8, segments removed by retention included), ``committed``, ``rolled_back``,
    ``not_set``, ``corrupt``, ``unscanned``, ``limit`` (a
    position), ``first`` (the oldest retained position), ``capacity`` (records; per segment
    on a rolling bus), ``full``, ``segments`` (None for a single file), ``record_size``,
    ``segment_size`` (None for a single file), ``taken`` (time.time()), ``parked`` (readers
    parked on the wake file, when the caller filled it in; else None)."""

    _FIELDS = ("kind", "bus_id", "allocated", "committed", "rolled_back", "not_set", "corrupt",
               "unscanned", "limit", "first", "capacity", "full", "segments", "record_size",
               "segment_size", "taken", "parked")

    def __init__(self, **kw):
        for k in self._FIELDS:
            setattr(self, k, kw.get(k))


class BusCounter:
    """The incremental record counts of one bus (``open_bus`` makes one): a single file,
    or a rolling bus's directory, whose segments are each a ``SlotCounter``. ``refresh``
    reads what is new; ``snapshot`` gives the figures. Thread-safe: one lock per bus, held
    for at most one chunk of reading at a time."""

    def __init__(self, path):
        self.path = os.fspath(path)
        self.lock = threading.Lock()
        st = os.lstat(self.path)
        self.rolling = _stat.S_ISDIR(st.st_mode)
        self._segments = {}                     # index -> SlotCounter (not yet settled)
        self._sealed = {}                       # index -> (committed, rolled_back, corrupt)
        self._retired = [0, 0, 0]               # totals of segments removed by retention
        self._single = None
        self._open()

    # -- opening -------------------------------------------------------------------------

    def _open(self):
        if self.rolling:
            open_dir(self.path, create=False, allow_foreign=True)
            meta = read_bus_meta(self.path, allow_foreign=True)
            if meta is None:
                raise ValueError(f"{self.path}: a directory without {META_FILE}: not a rolling "
                                 f"bus")
            self.meta = meta
            self.record_size, self.segment_size = meta.record_size, meta.segment_size
            self.capacity = slots_per_segment(meta.segment_size, meta.record_size)
            self._ident = os.stat(os.path.join(self.path, META_FILE)).st_ino
            return
        meta = read_meta(meta_path(self.path), allow_foreign=True)
        fd, st = _open_ro(self.path)
        if meta is None or meta.kind != "single" or meta.inode != st.st_ino:
            os.close(fd)
            raise ValueError(f"{self.path}: no metadata ({meta_path(self.path)}) describing "
                             f"this file, so its record size is unknown (a file of the Java "
                             f"original): not supported here")
        self.meta = meta
        self.record_size, self.segment_size = meta.record_size, None
        self.capacity = max(0, (meta.file_size - FIRST_RECORD_OFFSET)
                            // slot_size(meta.record_size))
        end = FIRST_RECORD_OFFSET + self.capacity * slot_size(meta.record_size)
        self._single = SlotCounter(self.path, meta.record_size, end, fd=fd)
        self._ident = st.st_ino

    def _replaced(self):
        """True if the bus at the path is not the one counted (deleted and recreated);
        FileNotFoundError if it is gone."""
        where = os.path.join(self.path, META_FILE) if self.rolling else self.path
        return os.stat(where).st_ino != self._ident

    def close(self):
        """Close every file held."""
        if self._single is not None:
            self._single.close()
        for c in self._segments.values():
            c.close()
        self._segments.clear()

    # -- counting ------------------------------------------------------------------------

    def refresh(self, budget=None):
        """Read what is new (at most ``budget`` bytes of new slots per file; None: all).
        Returns True when every allocated slot was read."""
        if self._replaced():
            self.close()
            self._sealed, self._retired = {}, [0, 0, 0]
            self._open()
        if not self.rolling:
            self._single.refresh(budget)
            return self._single.unscanned == 0
        present = list_segments(self.path)
        have = set(present)
        for i in [i for i in self._segments if i not in have]:
            c = self._segments.pop(i)           # removed by retention: keep its totals
            c.close()
            self._retire((c.committed, c.rolled_back, c.corrupt))
        for i in [i for i in self._sealed if i not in have]:
            self._retire(self._sealed.pop(i))
        end = end_boundary(self.segment_size, self.record_size)
        newest_with_records = None
        for i in present:
            if i in self._sealed:
                continue
            c = self._segments.get(i)
            if c is None:
                try:
                    c = self._segments[i] = SlotCounter(segment_path(self.path, i),
                                                        self.record_size, end)
                except FileNotFoundError:
                    continue                    # removed meanwhile
            c.refresh(budget)
            if c.limit > FIRST_RECORD_OFFSET:
                newest_with_records = i
        # A segment older than one with records gets no more slots: once read whole and
        # without uncommitted slots, its counts are final.
        for i in list(self._segments):
            c = self._segments[i]
            if newest_with_records is not None and i < newest_with_records and c.settled:
                c.close()
                del self._segments[i]
                self._sealed[i] = (c.committed, c.rolled_back, c.corrupt)
        return all(c.unscanned == 0 for c in self._segments.values())

    def _retire(self, counts):
        for k in range(3):
            self._retired[k] += counts[k]

    def snapshot(self):
        """A ``BusSnapshot`` of the counts as of the last refresh."""
        if not self.rolling:
            c = self._single
            return BusSnapshot(kind="single", bus_id=self.meta.id,
                               allocated=max(0, (min(c.limit, c.end) - FIRST_RECORD_OFFSET)
                                             // c.step), committed=c.committed,
                               rolled_back=c.rolled_back, not_set=c.not_set,
                               corrupt=c.corrupt, unscanned=c.unscanned, limit=c.limit,
                               first=FIRST_RECORD_OFFSET, capacity=self.capacity,
                               full=c.limit >= c.end, segments=None,
                               record_size=self.record_size, segment_size=None,
                               taken=time.time())
        tot = list(self._retired)
        for t in self._sealed.values():
            for k in range(3):
                tot[k] += t[k]
        live = self._segments.values()
        for c in live:
            tot[0] += c.committed
            tot[1] += c.rolled_back
            tot[2] += c.corrupt
        indices = sorted(set(self._segments) | set(self._sealed))
        limit = first = FIRST_RECORD_OFFSET
        if indices:
            first = join_position(indices[0], FIRST_RECORD_OFFSET, self.segment_size)
            with_records = [i for i in indices if i in self._sealed
                            or self._segments[i].limit > FIRST_RECORD_OFFSET]
            if with_records:
                i = with_records[-1]
                lim = self._segments[i].limit if i in self._segments else \
                    end_boundary(self.segment_size, self.record_size)
                limit = join_position(i, lim, self.segment_size)
            else:
                limit = first
        return BusSnapshot(kind="rolling", bus_id=self.meta.id,
                           allocated=records_between(FIRST_RECORD_OFFSET, limit,
                                                     self.record_size, self.segment_size),
                           committed=tot[0],
                           rolled_back=tot[1], not_set=sum(c.not_set for c in live),
                           corrupt=tot[2], unscanned=sum(c.unscanned for c in live),
                           limit=limit, first=first, capacity=self.capacity, full=False,
                           segments=len(indices), record_size=self.record_size,
                           segment_size=self.segment_size, taken=time.time())

    def catch_up(self, chunk=_CHUNK):
        """Refresh in steps of ``chunk`` bytes, taking the lock for each step only, until
        every allocated slot was read (what the exporter's background thread runs)."""
        while True:
            with self.lock:
                if self.refresh(chunk):
                    return


def open_bus(path):
    """A ``BusCounter`` for the bus at ``path`` (a file with metadata, or a rolling bus's
    directory), its counts read up to now."""
    c = BusCounter(path)
    c.refresh()
    return c


def parked_readers(path, rolling):
    """Readers parked on the bus's wake file now (``PATH.wake``, ``DIR/bus.wake``), alive:
    0 when there is none (it is not created) or when it is not a wake file yet."""
    wake = os.path.join(path, WAKE_FILE) if rolling else os.fspath(path) + WAKE_SUFFIX
    try:
        fd, _ = _open_ro(wake)
    except FileNotFoundError:
        return 0
    try:
        # parked slots whose parker is alive (its liveness lock), not the parked count: a
        # reader killed while parked (a zombie too) is not counted, nothing is written
        return parked_alive(fd)
    finally:
        os.close(fd)


def list_consumers(path):
    """``mappedbus_py.consumers(path)``: the bus's registered consumers ([] without a
    registry). A corrupt registry raises CorruptBusError."""
    from .consumers import consumers
    return consumers(path, allow_foreign=True)


def list_groups(path):
    """``mappedbus_py.groups(path)``: the bus's work groups ([] without any). A corrupt
    group file raises CorruptBusError."""
    from .groups import groups
    return groups(path, allow_foreign=True)


def records_between(a, b, record_size, segment_size=None):
    """Record slots from position ``a`` up to position ``b`` (0 if ``b <= a``); across
    segments on a rolling bus (``segment_size``)."""
    if b <= a:
        return 0
    if segment_size is None:
        return (b - a) // slot_size(record_size)
    return _records_to(a, *locate(b, segment_size, record_size), segment_size, record_size)


# -- Prometheus ----------------------------------------------------------------------------

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
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
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

    from prometheus_client import CollectorRegistry, make_wsgi_app
    from prometheus_client.exposition import ThreadingWSGIServer
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
