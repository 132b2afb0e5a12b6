"""The rolling bus's writer: ``RollingBusWriter``, its options, opening and closing; the
per-record path is ``RollingWriterBase`` (``_rolling.pyx``), the moves between segments the
roller's (``roller.SegmentRoller``)."""
import os
import time

from .._core._checks import as_size as _as_size
from .._core._writer import MappedBusWriter, take_writer_slot
from ..errors import BusBackPressureError, BusClosedError, BusFullError, RecordsRolledBackError
from ..formats.layout import TOPICS_FILE, WRITERS_FILE, slot_size
from ..formats.positions import slots_per_segment
from ._rolling import RollingWriterBase
from .directory import (choose_current, create_or_open_meta, create_segment, list_segments,
                        open_dir, open_wake, read_limit, writer_sizes)
from .options import check_consumer_policy, check_retention, check_segment_sizes, reopen
from .roller import OpenSegment, SegmentClaims, SegmentRoller
from .journal import WriterJournal, check_sync, settle_time_index
from .archive import ArchiverProcess, check_archive, prepare_archive, settle_meta

__all__ = ("RollingBusWriter",)


class RollingBusWriter(SegmentRoller, RollingWriterBase):
    """Writes records onto a rolling bus; many writers (processes) may share one.

    Same use as ``MappedBusWriter``: ``write(message_or_bytes[, offset, length])`` -> bool,
    ``write_batch(rows, meta=0)`` -> committed count. When a segment is full the writer
    moves to the next one (a record never spans two segments). A writer pickles: the copy
    reopens the bus by path with the same options, open if this one was open.

    ``segment_size`` and ``record_size`` are needed to create a bus; for a bus that exists,
    sizes left out (None) come from its ``bus.meta`` (``RollingBusWriter(path)``), as the
    reader takes them, and a size given that differs from it is a BusMismatchError.

    The journal (docs/journal.md): ``sync`` ("none", "segment" or "interval" with
    ``sync_interval`` seconds) says when records reach the disk, ``sync()`` forces it;
    ``time_index=True`` makes the bus keep a time index (stored in ``bus.meta``: every writer
    then appends to it, one clock read a record) for ``reader.seek_time``;
    ``archive=DIR`` moves full segments beyond ``archive_after`` (or older than
    ``archive_age`` seconds) into DIR in the background, ``compress`` None, "zstd" or "lz4",
    with its own retention ``archive_retain_segments/bytes/age``; readers read on from it.
    """

    # No instance __dict__: a per-record call finds its method without a dict lookup.
    # (The public attributes are the base class's, with their docstrings.)
    __slots__ = ('_allow_foreign', '_claims', '_consumer_policy', '_every', '_fd', '_half', '_job',
                 '_k', '_kwargs', '_mark', '_mode', '_prefault', '_registry', '_registry_error',
                 '_retention', '_retired', '_slot', '_spare', '_wake', '_writers',
                 '_journal', '_archiver', '_archive_cfg', '_time_index', '_frames',
                 '_serializer', '_topics', '_topic_ids', '_unmaps', '_early')


    def __init__(self, path, segment_size=None, record_size=None, *, retain_segments=0,
                 retain_bytes=0, retain_age=None, max_consumer_lag=0, on_consumer_lag="expire",
                 consumer_block_timeout=None, mode=0o600, allow_foreign=False,
                 prefault=False, sync="none", sync_interval=None, time_index=None,
                 archive=None, archive_after=None, archive_age=None, compress=None,
                 archive_retain_segments=None, archive_retain_bytes=None,
                 archive_retain_age=None, frames=False, serializer=None):
        # The single-file writer checks the sizes the same way; fail here, before any file.
        if segment_size is not None:
            segment_size = _as_size(segment_size, "segment_size")
        if record_size is not None:
            record_size = _as_size(record_size, "record_size")
        segment_size, record_size = check_segment_sizes(
            *writer_sizes(os.fspath(path), segment_size, record_size, allow_foreign))
        MappedBusWriter(os.fspath(path), segment_size, record_size, mode=mode, frames=frames,
                        serializer=serializer)
        self._frames = bool(frames)
        self._serializer = serializer
        self._topics = None       # DIR/bus.topics once a topic is named (framed buses)
        self._topic_ids = {}
        self._kwargs = dict(retain_segments=retain_segments, retain_bytes=retain_bytes,
                            retain_age=retain_age, max_consumer_lag=max_consumer_lag,
                            on_consumer_lag=on_consumer_lag,
                            consumer_block_timeout=consumer_block_timeout, mode=mode,
                            allow_foreign=allow_foreign, prefault=prefault, sync=sync,
                            sync_interval=sync_interval, time_index=time_index,
                            archive=archive, archive_after=archive_after,
                            archive_age=archive_age, compress=compress,
                            archive_retain_segments=archive_retain_segments,
                            archive_retain_bytes=archive_retain_bytes,
                            archive_retain_age=archive_retain_age, frames=frames,
                            serializer=serializer)
        policy = check_sync(sync, sync_interval)
        if time_index is not None and not isinstance(time_index, bool):
            raise ValueError(f"time_index must be True, False or None, got {time_index!r}")
        self._time_index = time_index
        self._archive_cfg = check_archive(archive, archive_after, archive_age, compress,
                                          archive_retain_segments, archive_retain_bytes,
                                          archive_retain_age, retain_segments, retain_bytes,
                                          retain_age)
        self._archiver = None
        self._tix_on = False        # set at open(): the bus's time_index
        self._tix_next = 0
        self.path = os.fspath(path)
        self.segment_size = segment_size
        self.record_size = record_size
        self._retention = check_retention(retain_segments, retain_bytes, retain_age)
        self._consumer_policy = check_consumer_policy(max_consumer_lag, on_consumer_lag,
                                                     consumer_block_timeout)
        self._registry = None     # DIR/bus.consumers once it exists (retention reads it)
        self._registry_error = None  # why a look-ahead's retention could not read it: raised
                                     # at the next roll (retention waits for it meanwhile)
        self._mode = mode
        self._allow_foreign = allow_foreign
        self._prefault = prefault
        self._slot = slot_size(record_size)
        self._half = segment_size // 2
        self._every = max(1, min(4096, slots_per_segment(segment_size, record_size) // 8))
        self.meta = None
        self._w = None
        self._k = -1
        self._spare = None        # Spare: the segment after _k, open and mapped ahead
        self._job = None          # _SpareJob: the spare being made or mapped in the background
        self._fd = -1             # the current segment, read-only: to look at its limit
        self._retired = []        # OpenSegments left behind, closed later
        self._unmaps = []         # BackgroundCalls unmapping retired segments
        self._early = -1          # the segment whose spare a look-ahead last tried to make
                                  # early (short of the current one's middle)
        self._mark = None         # FullMark: the last roll, its time to set as the mtime
        self._countdown = 0
        self._wake = None         # DIR/bus.wake, shared by this writer's segment writers
        self._writers = None      # DIR/bus.writers with this writer's slot, shared likewise
        self._claims = SegmentClaims(self.path, allow_foreign)   # on DIR/bus.meta
        self._journal = WriterJournal(self.path, policy, time_index=time_index, mode=mode,
                                      allow_foreign=allow_foreign)

    @property
    def bus_id(self):
        """The bus's random id from ``bus.meta`` (new for every bus created at this path);
        None until opened."""
        return self.meta.id if self.meta is not None else None

    @property
    def segment(self):
        """The index of the segment this writer writes into."""
        return self._k

    @property
    def closed(self):
        """True until ``open()``, and again after ``close()``."""
        return self._w is None

    def open(self):
        """Create the bus (directory, ``bus.meta``, segment 0) if it does not exist, else
        check it (BusMismatchError on other sizes), and enter its newest segment with
        records. Returns the writer; opening an open writer does nothing."""
        if self._w is not None:
            return self
        open_dir(self.path, create=True, allow_foreign=self._allow_foreign)
        self.meta = create_or_open_meta(self.path, self.segment_size, self.record_size,
                                        self._retention, mode=self._mode,
                                        allow_foreign=self._allow_foreign,
                                        consumers=self._consumer_policy, frames=self._frames)
        cfg = settle_meta(self.path, self.meta, self._archive_cfg, mode=self._mode,
                          allow_foreign=self._allow_foreign)
        if cfg is not None:
            self.meta = create_or_open_meta(self.path, self.segment_size, self.record_size,
                                            self._retention, mode=self._mode,
                                            allow_foreign=self._allow_foreign,
                                            consumers=self._consumer_policy, frames=self._frames)
            prepare_archive(self.path, self.meta, cfg, mode=self._mode,
                            allow_foreign=self._allow_foreign)
        self._tix_on, self.meta = settle_time_index(self.path, self.meta, self._time_index,
                                                    mode=self._mode)
        self._journal.open(self.meta)
        segs = list_segments(self.path)
        if not segs:
            create_segment(self.path, 0, self.segment_size, mode=self._mode)
            segs = list_segments(self.path)
        k, _ = choose_current(self.path, segs, self._allow_foreign)
        if self._consumers_matter():
            # A registry that cannot be read (corrupt, a link, another owner's) is an error
            # now, not a writer whose retention or back-pressure fails later.
            self._consumer_entries()
        self._wake = open_wake(self.path, self._allow_foreign, self._mode)
        self._writers = take_writer_slot(os.path.join(self.path, WRITERS_FILE),
                                         self._allow_foreign, self._mode)
        self._enter(k, None)
        if self._writers is not None:
            self._take_over()
        self._countdown = 1      # look at the limit on the first write
        if cfg is not None:
            self._archiver = ArchiverProcess(self.path, self.meta, cfg, mode=self._mode,
                                             allow_foreign=self._allow_foreign)
            self._archiver.start()
        return self

    def sync(self):
        """Every record committed so far, and the files around them, to the disk before it
        returns (docs/journal.md, "What sync() does"): fdatasync of the segments and time
        indices written since the last sync, of the consumers' registry and group files,
        then fsync of the directories changed."""
        if self._w is None:
            raise BusClosedError("sync() on a closed RollingBusWriter (call open() first)")
        self._journal.sync()

    @property
    def sync_policy(self):
        """The ``SyncPolicy`` this writer applies."""
        return self._journal.policy

    @property
    def archiver(self):
        """The ``ArchiverProcess`` of this writer (None without an archive, or closed)."""
        return self._archiver

    def _enter(self, index, writer=None, fd=None):
        SegmentRoller._enter(self, index, writer, fd)
        self._tix_next = 0
        self._journal.entered(index, self._fd, made=True)
        if self._archiver is not None:
            self._archiver.rolled()

    def _note_time(self, time_ns, offset):
        self._journal.note_time(self._k, time_ns, self._k * self.segment_size + offset)

    def close(self):
        """Unmap every segment this writer holds; the bus stays. Closing twice is harmless.
        It always closes: every step runs, then the first error (if any) is raised (the last
        roll's retention when the consumer registry cannot be read, for one)."""
        errors = []

        def attempt(step, *args):
            try:
                step(*args)
            except BaseException as e:      # released below in any case, raised after
                errors.append(e)

        if self._job is not None and self._job.early and self._w is not None \
                and read_limit(self._fd) < self._half:
            attempt(self._drop_early)
        if self._job is not None:
            attempt(self._step, True)
        if self._mark is not None:
            attempt(self._apply_mark)
            if self._mark is not None and self._registry_error is not None:
                errors.append(self._registry_error)     # that retention did not run
        self._mark = None
        if self._spare is not None:
            self._retired.append(self._spare.segment)
        if self._w is not None:
            self._retired.append(OpenSegment(self._w, self._fd))
        retired, self._retired = self._retired, []
        for segment in retired:
            attempt(segment.close)
        attempt(self._wait_unmaps)
        self._w, self._spare, self._fd = None, None, -1
        if self._wake is not None:
            attempt(self._wake.close)
            self._wake = None
        if self._writers is not None:
            self._writers.close()     # clears this writer's claim, gives its slot back
            self._writers = None
        if self._archiver is not None:
            attempt(self._archiver.stop)
            if self._archiver.error is not None:
                errors.append(self._archiver.error)
            self._archiver = None
        attempt(self._journal.close)
        if self._topics is not None:
            self._topics.close()
            self._topics = None
        if self._registry is not None:
            attempt(self._registry.close)
            self._registry = None
        attempt(self._claims.close)
        self._registry_error = None
        if errors:
            raise errors[0]

    def __enter__(self):
        return self.open()

    def __exit__(self, *exc):
        self.close()

    def __reduce__(self):
        return (reopen, (RollingBusWriter, self.path, self.segment_size,
                                  self.record_size, self._kwargs, self._w is not None))

    def __repr__(self):
        state = "closed" if self._w is None else f"open in segment {self._k}"
        return (f"<RollingBusWriter {state} path={self.path!r} segment_size="
                f"{self.segment_size} record_size={self.record_size}>")

    @property
    def frames(self):
        """True: a framed bus (messages of any size and topics, docs/messages.md)."""
        return self._frames

    @property
    def max_message(self):
        """The largest message this framed bus holds (one segment's); 0 without frames."""
        if not self._frames:
            return 0
        from ..formats.layout import frame_max_length
        return frame_max_length(self.segment_size, self.record_size)

    def _topic_id(self, topic):
        tid = self._topic_ids.get(topic)
        if tid is not None:
            return tid
        if not self._frames:
            raise TypeError(f"topic={topic!r}: topics need a framed bus (frames=True)")
        if not isinstance(topic, str):
            raise TypeError(f"a topic is a str (or None), not {type(topic).__name__}: {topic!r}")
        if self._w is None:
            raise BusClosedError("write to a closed RollingBusWriter (call open() first)")
        if self._topics is None:
            from .._core._topics import TopicsFile
            self._topics = TopicsFile(os.path.join(self.path, TOPICS_FILE),
                                      allow_foreign=self._allow_foreign, mode=self._mode)
        tid = self._topics.id_of(topic)
        self._topic_ids[topic] = tid
        return tid

    def topic_id(self, topic):
        """The id of topic ``topic`` on this framed bus (named now if it is new)."""
        return self._topic_id(topic)

    def write_object(self, obj, topic=None):
        """Write ``obj`` as one message (see ``MappedBusWriter.write_object``), rolling to
        the next segment when it does not fit the current one."""
        if not self._frames:
            raise TypeError("write_object() needs a framed bus (frames=True)")
        from ..formats.objects import encode
        tid = 0 if topic is None else self._topic_id(topic)
        enc = encode(obj, self._serializer)
        self._countdown -= 1
        if self._countdown <= 0 and self._w is not None:
            self._look_ahead()
        while True:
            w = self._w
            if w is None:
                raise BusClosedError("write to a closed RollingBusWriter (call open() first)")
            try:
                ok = w._write_encoded(enc, tid)
            except BusFullError:
                self._roll()
                continue
            if w._covers(self._trigger):
                self._make_spare()
            return ok

    def write_batch(self, rows, meta=0):
        """Write every row of a C-contiguous array as one record each (see
        ``MappedBusWriter.write_batch``), rolling between rows as segments fill up."""
        import numpy
        if self._w is None:
            raise BusClosedError("write to a closed RollingBusWriter (call open() first)")
        if self._frames:
            raise TypeError("write_batch() writes fixed-size records: a framed bus takes "
                            "write() and write_object()")
        rows = numpy.ascontiguousarray(rows)
        if rows.ndim == 0:
            rows = rows.reshape(1)
        n = len(rows)
        metas = None if isinstance(meta, int) else numpy.ascontiguousarray(meta, dtype="<i4")
        if metas is not None and metas.shape != (n,):
            raise ValueError(f"meta has shape {metas.shape}, expected ({n},)")
        done = committed = 0
        rolled_back = []
        self._countdown -= n
        t0 = time.time_ns() if self._tix_on else 0     # before any slot is allocated
        while done < n:
            if self._countdown <= 0:
                self._look_ahead()
            part_meta = meta if metas is None else metas[done:]
            k = self._k
            try:
                committed += self._w.write_batch(rows[done:], part_meta)
                self._note_batch(t0, k, n - done)
                break
            except BusFullError as e:
                # A batch that starts exactly at the segment's end allocates nothing: the
                # error then carries no counts.
                fit = getattr(e, "committed", 0) + len(getattr(e, "rolled_back", ()))
                committed += getattr(e, "committed", 0)
                rolled_back += [done + i for i in getattr(e, "rolled_back", ())]
                done += fit
                if fit:
                    self._note_batch(t0, k, fit)
                try:
                    self._roll()
                except BusBackPressureError as bp:
                    bp.committed, bp.rolled_back = committed, rolled_back
                    raise
            except RecordsRolledBackError as e:
                committed += e.committed
                rolled_back += [done + i for i in e.rolled_back]
                break
        if rolled_back:
            raise RecordsRolledBackError(
                f"{len(rolled_back)} of {n} rows were rolled back by a reader before this "
                f"writer committed them", committed, rolled_back)
        return committed

    def _note_batch(self, t0, k, rows):
        # A batch's part of ``rows`` rows ending at the segment writer's last allocation: one
        # entry for its first row, at the time read before the batch.
        first = self._last_offset()
        if not self._tix_on or self._k != k or first < 0:
            return
        self._tix_next = (t0 // 1_000_000 + 1) * 1_000_000
        self._note_time(t0, first)
