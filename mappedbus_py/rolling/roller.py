"""The roller: what moves a rolling bus's writer from segment to segment, beside its writes.

A writer writes into the current segment (``_w``, segment ``_k``); every ``_every`` writes
(``_countdown``) it looks ahead (``_look_ahead``). Past the middle of the segment it prepares
the next one as its ``Spare`` (``_start_spare``): mapped in the background if it exists, else
made under its ``Claim`` (``SegmentClaims``: one lock on ``bus.meta`` per segment, so one writer
makes it) in a temporary file preallocated in the background (a ``_SpareJob``), then linked
and mapped. A full segment (``_roll``) is left for the spare, or for a segment made there and
then; the segment left behind is retired (``OpenSegment``, closed at a later look-ahead) and
its ``FullMark`` (when it filled) becomes its mtime, which retention ages it by. The states a
segment passes through, for one writer:

    absent --claim, make (background)--> made --link--> linked --map (background)--> spare
    spare --roll--> current --roll--> retired --next look-ahead--> closed
    linked, still mapping --roll--> current (the call goes on ahead of the writes; ``_step``)

The contract is docs/files-and-rolling.md ("Spare segment", "Retention").
"""
import dataclasses
import enum
import fcntl
import os
import time

from .._core._writer import MappedBusWriter
from ..errors import MappedBusError
from ..errors import BusBackPressureError, BusClosedError
from ..formats.files import open_file
from ..formats.layout import (META_FILE, SEGMENT_CLAIM_BASE, SEGMENT_CLAIM_WAIT_MS, join_position,
                              mapped_size)
from ..formats.positions import consumer_segment, spare_trigger
from ._rolling import BackgroundCall
from .directory import (choose_current, create_segment, link_temporary, open_bus_segments,
                        open_registry, open_temporary, preallocation_failed, read_limit,
                        remove_stale_tmp, segment_path, temporary_exists)
from .retention import apply_retention, bus_consumer_entries, consumer_blockers, consumer_retention

__all__ = ("SegmentRoller", "Claim", "SegmentClaims", "OpenSegment", "Spare", "FullMark",
           "SPARE_POLL_WRITES")

# While a spare's background call runs, a writer looks at it every this many writes (else
# every _every): its next step (the link, which the creator's retention follows) comes soon.
SPARE_POLL_WRITES = 64

# A spare made early (short of the current segment's middle) is also prefaulted: its pages
# zeroed in the background before it is linked (``BackgroundCall.fallocate(prefault=True)``).
PREFAULT_EARLY = False


class _HoldUnknown(enum.Enum):
    """``_hold_or_defer``'s outcome when the consumers' holds are not known."""
    UNKNOWN = "the consumer registry cannot be read: retention removes nothing for now"


_NO_HOLD_KNOWN = _HoldUnknown.UNKNOWN


class Claim(enum.Enum):
    """The outcome of taking a segment's claim (``layout.SEGMENT_CLAIM_BASE``); each value
    says what it means."""
    TAKEN = "this writer holds the claim: it makes the segment"
    HELD_ELSEWHERE = "another process holds the claim: that one makes the segment"
    NOT_TAKEN = "no claims here (bus.meta not writable here, or no locks): make it unclaimed"

    def __init__(self, meaning):
        self.__doc__ = meaning


class _ClaimsFile(enum.Enum):
    UNOPENED = "not looked at yet"
    UNAVAILABLE = "bus.meta cannot be opened for writing here"
    OPEN = "fd is bus.meta, open write-only"


class SegmentClaims:
    """The segments' claims of one writer: a lock on one byte of ``bus.meta`` per segment
    (``SEGMENT_CLAIM_BASE + index``), which the writer making that segment holds. ``bus.meta``
    is opened (write-only) at the first claim; where it cannot be, there are no claims."""
    __slots__ = ("_path", "_allow_foreign", "_fd", "_state")

    def __init__(self, path, allow_foreign):
        self._path, self._allow_foreign = path, allow_foreign
        self._fd = None                 # bus.meta while _state is OPEN
        self._state = _ClaimsFile.UNOPENED

    @property
    def fd(self):
        """``bus.meta``'s descriptor, which holds the claims taken (after a ``take``)."""
        return self._fd

    def take(self, index):
        """Segment ``index``'s claim, without waiting: a ``Claim``."""
        if self._state is _ClaimsFile.UNOPENED:
            try:
                self._fd, _ = open_file(os.path.join(self._path, META_FILE), os.O_WRONLY,
                                        allow_foreign=self._allow_foreign)
                self._state = _ClaimsFile.OPEN
            except OSError:
                self._state = _ClaimsFile.UNAVAILABLE
        if self._state is _ClaimsFile.UNAVAILABLE:
            return Claim.NOT_TAKEN
        try:
            fcntl.lockf(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, SEGMENT_CLAIM_BASE + index)
            return Claim.TAKEN
        except (BlockingIOError, PermissionError):
            return Claim.HELD_ELSEWHERE
        except OSError:
            return Claim.NOT_TAKEN

    def release(self, index):
        """Let segment ``index``'s claim go (taken by ``take``)."""
        fcntl.lockf(self._fd, fcntl.LOCK_UN, 1, SEGMENT_CLAIM_BASE + index)

    def close(self):
        """Close ``bus.meta`` (every claim goes with it); the next ``take`` opens it again."""
        if self._state is _ClaimsFile.OPEN:
            os.close(self._fd)
        self._fd, self._state = None, _ClaimsFile.UNOPENED


@dataclasses.dataclass(frozen=True)
class OpenSegment:
    """A segment a writer has open: its single-file writer, and a read-only descriptor to look
    at its limit."""
    writer: MappedBusWriter
    fd: int

    def close(self):
        """Unmap it and close the descriptor."""
        self.writer.close()
        os.close(self.fd)

    def close_later(self):
        """Close it, its mapping unmapped in the background: the ``BackgroundCall`` doing it
        (None: closed here)."""
        try:
            return BackgroundCall.unmap(self.writer)
        finally:
            os.close(self.fd)


@dataclasses.dataclass(frozen=True)
class Spare:
    """The segment after the current one, open and mapped ahead, for the roll."""
    index: int
    segment: OpenSegment


@dataclasses.dataclass(frozen=True)
class FullMark:
    """A roll out of segment ``index``, at ``when_ns`` (Unix ns): its mtime, set off the write
    that rolled."""
    index: int
    when_ns: int


class _SpareJob:
    """A writer's spare segment being prepared: its background call (``BackgroundCall``), and
    while being made its temporary file (path, descriptor); while being mapped, its writer and
    a read-only descriptor."""
    __slots__ = ("index", "call", "tmp", "fd", "writer", "early")

    def __init__(self, index, call, tmp, fd, early=False):
        self.index, self.call, self.tmp, self.fd = index, call, tmp, fd
        self.writer = None
        self.early = early      # made (and prefaulted) before the middle: linked from there


class SegmentRoller:
    """The roller's steps, for ``RollingBusWriter`` (a mixin: its state is the writer's, named
    in the writer's ``__init__``). ``RollingWriterBase`` (``_rolling.pyx``) calls three of
    them: ``_look_ahead`` when its countdown runs out, ``_make_spare`` when a write allocated
    the spare's trigger slot, ``_roll`` when the current segment is full."""
    __slots__ = ()

    def _segment_writer(self, index):
        p = segment_path(self.path, index)
        # Segments are made by create_segment only: never let an open create one.
        os.lstat(p)
        # No preallocate: create_segment preallocated the blocks already, and fallocate would
        # touch the mtime that records when the segment was first rolled into.
        return MappedBusWriter(p, self.segment_size, self.record_size, mode=self._mode,
                               preallocate=False, prefault=self._prefault,
                               allow_foreign=self._allow_foreign, _segment=True,
                               _wake=self._wake, _writers=self._writers,
                               frames=self._frames, serializer=self._serializer,
                               _position_base=join_position(index, 0, self.segment_size)).open()

    def _take_over(self):
        """Our slot's last holder died with a claim: roll back its uncommitted slots in the
        segment the claim lies in (if retention left it), then clear the claim."""
        claim = self._writers.claim_left
        if claim.empty:
            return
        index = claim.begin // self.segment_size
        if index == self._k:
            self._w._take_over(self._writers)
            return
        try:
            w = self._segment_writer(index)
        except (FileNotFoundError, ValueError):
            self._writers.clear()      # its segment is gone: nothing left to roll back
            return
        try:
            w._take_over(self._writers)
        finally:
            w.close()
        self._writers.clear()

    def _enter(self, index, writer=None, fd=None):
        """Make segment ``index`` current (opening it unless ``writer`` is given, and its
        read-only descriptor unless ``fd`` is). The old
        segment's mapping is closed later, at the next look-ahead (unmapping a populated
        16 MiB mapping takes a few hundred µs: not on the write that rolls)."""
        if writer is None:
            writer = self._segment_writer(index)
        if fd is None:
            fd, _ = open_file(segment_path(self.path, index), os.O_RDONLY,
                              allow_foreign=self._allow_foreign)
        if self._w is not None:
            self._retired.append(OpenSegment(self._w, self._fd))
        self._w, self._k, self._fd = writer, index, fd
        self._countdown = self._every
        self._trigger = spare_trigger(self.segment_size, self.record_size)

    def _close_retired(self):
        # Unmapped in the background (4-17 ms for 64 MiB): the calls are kept until done.
        self._unmaps = [call for call in self._unmaps if not call.done]
        for segment in self._retired:
            call = segment.close_later()
            if call is not None:
                self._unmaps.append(call)
        self._retired = []

    def _wait_unmaps(self):
        """Wait for the retired segments' background unmaps (close())."""
        for call in self._unmaps:
            call.wait()
        self._unmaps = []

    def _drop_early(self):
        """close() with a spare made early, not linked yet (the segment is short of its
        middle): its temporary file removed, as if never made."""
        job = self._job
        self._job = None
        job.call.wait()
        os.close(job.fd)
        try:
            os.unlink(job.tmp)
        except FileNotFoundError:
            pass

    def _roll(self):
        """Segment ``_k`` is full: move to the next one that exists or can be created."""
        if self._w is None:
            raise BusClosedError("write to a closed RollingBusWriter (call open() first)")
        target = self._k + 1
        if self._job is not None and not self._mapping_next(target):
            self._step(wait=True, then_map=True)
        if self._consumers_matter() and (self._registry is None
                                         or self._registry_error is not None):
            # Where the user acts: a registry that cannot be read (opened now, or found
            # unreadable by a look-ahead's retention) fails the write that rolls (nothing
            # written), at every roll until it can be; retention waits meanwhile.
            self._consumer_entries()
            self._registry_error = None
        self._wait_for_consumers(target)
        if self._job is not None and self._mapping_next(target):
            # Made, its pages still being mapped in the background: entered now, not after
            # the whole segment (64 MiB: 20-45 ms). The call goes on ahead of the writes,
            # which map what they reach first themselves (MADV_POPULATE_WRITE changes no
            # byte); _step finishes it, and close() waits for it before unmapping.
            self._mark_full()
            self._enter(target, self._job.writer, self._job.fd)
            return
        if self._spare is not None and self._spare.index == target:
            self._mark_full()
            spare = self._spare.segment
            self._spare = None
            self._enter(target, spare.writer, spare.fd)
            return
        if self._spare is not None:
            self._retired.append(self._spare.segment)
            self._spare = None
        while True:
            try:
                w = self._segment_writer(target)
                break
            except FileNotFoundError:
                pass
            later = [i for i in open_bus_segments(self.path, self.meta.id) if i > target]
            if later:
                # Retention removed it: the writers are further on.
                target, _ = choose_current(self.path, later, self._allow_foreign)
                continue
            self._make(target, wait=True)
        if target == self._k + 1:
            self._mark_full()
        self._enter(target, w)

    def _mark_full(self):
        # Only the time is taken here: the utime (~60 µs on tmpfs) is done by the next
        # look-ahead, off the write that rolls, with this time.
        self._mark = FullMark(self._k, time.time_ns())

    def _apply_mark(self):
        # A roll's deferred work: the full segment's mtime, then retention, which now counts
        # that segment as history (the creation of the one rolled into counted it as current).
        index, when = self._mark.index, self._mark.when_ns
        try:
            os.utime(segment_path(self.path, index), ns=(when, when), follow_symlinks=False)
        except FileNotFoundError:
            pass
        hold = self._hold_or_defer(self._k)
        if hold is _NO_HOLD_KNOWN:
            return      # kept: retried at the next look-ahead; the next roll raises why
        self._mark = None
        apply_retention(self.path, self.meta, self._k, self._k, hold_from=hold)

    def _make(self, index, wait):
        """Make segment ``index`` (absent) holding its claim. When another writer holds it:
        with ``wait`` (a roll), wait for the segment while it does (at most
        SEGMENT_CLAIM_WAIT_MS), then make it if it is still missing; else leave it to them."""
        deadline = time.monotonic() + SEGMENT_CLAIM_WAIT_MS / 1000
        while True:
            claim = self._claims.take(index)
            if claim is not Claim.HELD_ELSEWHERE:
                break
            if not wait or os.path.lexists(segment_path(self.path, index)):
                return
            if time.monotonic() >= deadline:
                claim = Claim.NOT_TAKEN
                break
            time.sleep(0.001)
        try:
            if not os.path.lexists(segment_path(self.path, index)):
                self._create(index, current=self._k)
        finally:
            if claim is Claim.TAKEN:
                self._claims.release(index)

    def _create(self, index, current):
        created = create_segment(self.path, index, self.segment_size, mode=self._mode)
        if created:
            self._after_create(index, current)
        return created

    def _after_create(self, index, current):
        # The creator's retention, with the new segment counted as the newest (none while
        # the consumers' holds cannot be read: the roll's retention runs once they can).
        hold = self._hold_or_defer(current)
        if hold is not _NO_HOLD_KNOWN:
            apply_retention(self.path, self.meta, index, min(current, index), hold_from=hold)
        remove_stale_tmp(self.path)

    def _consumers_matter(self):
        """Whether this bus's consumers hold its retention or block its writers."""
        meta = self.meta
        return bool(meta.max_consumer_lag) and (
            meta.on_consumer_lag == "block" or bool(meta.retain_segments or meta.retain_bytes
                                                    or meta.retain_age_ms))

    def _hold_or_defer(self, current):
        """``_consumer_hold(current)``, or _NO_HOLD_KNOWN when the registry cannot be read:
        retention then removes nothing (a consumer's position is never lost to a registry
        fault), and the error is kept for the next roll to raise."""
        try:
            return self._consumer_hold(current)
        except (MappedBusError, OSError) as e:
            self._registry_error = e
            return _NO_HOLD_KNOWN

    def _consumer_entries(self):
        # The registry is made by the first consumer; until then there is nothing to hold.
        if self._registry is None:
            self._registry = open_registry(self.path, self._allow_foreign, create=False)
            if self._registry is None:
                return []
        return bus_consumer_entries(self._registry, self.meta)

    def _consumer_hold(self, current):
        """Expire (policy ``expire``) the consumers too far behind ``current``; the oldest
        segment the others need, which retention keeps (None: no hold)."""
        meta = self.meta
        if not meta.max_consumer_lag or not (meta.retain_segments or meta.retain_bytes
                                             or meta.retain_age_ms):
            return None         # retention removes nothing: nothing to hold, nobody expires
        hold, expire = consumer_retention(self._consumer_entries(), self.meta, current)
        if expire:
            self._registry.expire([(e["index"], e["name"]) for e in expire])
        return hold

    def _wait_for_consumers(self, target):
        """Policy ``block``: before rolling into ``target``, wait while a consumer would lag
        more than ``max_consumer_lag`` segments; BusBackPressureError after
        ``consumer_block_ms``."""
        meta = self.meta
        if not meta.max_consumer_lag or meta.on_consumer_lag != "block":
            return
        deadline = None
        while True:
            blockers = consumer_blockers(self._consumer_entries(), meta, target)
            if not blockers:
                return
            now = time.monotonic()
            if deadline is None:
                deadline = now + meta.consumer_block_ms / 1000
            elif now >= deadline:
                e = blockers[0]
                lag = target - consumer_segment(e["position"], meta.segment_size,
                                                meta.record_size)
                raise BusBackPressureError(
                    f"{self.path!r}: consumer {e['name']!r} (position {e['position']}) would "
                    f"lag {lag} segments behind segment {target}, more than max_consumer_lag="
                    f"{meta.max_consumer_lag}; waited {meta.consumer_block_ms} ms for it "
                    f"(on_consumer_lag=block): nothing was written", e["name"], e["position"],
                    lag)
            time.sleep(0.001)

    def _look_ahead(self):
        """Past the middle of the segment: map the next one (made by the writer that took the
        slot past the middle, ``_make_spare``); past three quarters, make it if nobody did
        (that writer is gone, or wrote a batch over the slot, or is not of this project).
        A spare being prepared moves on to its next step once its background call is done."""
        self._countdown = self._every
        if self._mark is not None:
            self._apply_mark()
        if self._job is not None:
            self._step(wait=False)
            return
        if self._spare is not None:
            return
        limit = read_limit(self._fd)
        if limit < self._half:
            if self._early != self._k + 1:
                self._early = self._k + 1       # one attempt a segment
                self._start_spare(create=True, early=True)
            return
        self._start_spare(create=limit >= self._half + self._half // 2)

    def _make_spare(self):
        """This writer allocated the slot past the middle: make and map the next segment."""
        if self._job is not None and self._job.writer is self._w:
            # The current segment's mapping, which a roll entered before it was done: it ran
            # ahead of the writes for half a segment, so it is done or nearly.
            self._step(wait=True)
        elif self._job is not None and self._job.early:
            self._step(wait=False)      # made early: linked now if done
        if self._spare is None and self._job is None:
            self._start_spare(create=True)

    def _start_spare(self, create, early=False):
        """Segment _k + 1 as the spare, prepared beside the writes (as the Java writer's
        helper thread does): if it exists, opened and its pages mapped in the background;
        else, with ``create``, made under its claim, its temporary file preallocated in the
        background, then linked (and the creator's retention run) at a look-ahead, then
        mapped. Only the two slow system calls run off this thread (BackgroundCall: 64 MiB,
        fallocate about 14 ms, mapping 7-19 ms); nothing else is shared with it.

        ``early`` (the first look-ahead in a segment, short of its middle): only made, in a
        temporary file whose pages the background call also zeroes (prefault), so that it is
        ready well before the roll at full speed (64 MiB: ~50 ms of fallocate and zeroing,
        against ~12 ms of writes from the middle); linked from the middle on, as the spare
        is, so other processes see what they saw before. Not while another temporary file of
        that segment exists (another writer's early one): it is left to that writer."""
        self._close_retired()
        nxt = self._k + 1
        if os.path.lexists(segment_path(self.path, nxt)):
            if not early:
                self._start_mapping(nxt, made=False)
            return
        if not create or any(i > nxt for i in open_bus_segments(self.path, self.meta.id)):
            return      # not yet, or this writer is behind: it jumps ahead when it rolls
        claim = self._claims.take(nxt)
        if claim is Claim.HELD_ELSEWHERE:
            return      # another writer makes it: a look-ahead maps it
        try:
            if os.path.lexists(segment_path(self.path, nxt)):
                if not early:
                    self._start_mapping(nxt, made=False)
                return
            if early and temporary_exists(self.path, nxt):
                if claim is Claim.TAKEN:
                    self._claims.release(nxt)
                return
            tmp, fd = open_temporary(self.path, nxt, self._mode)
        except BaseException:
            if claim is Claim.TAKEN:
                self._claims.release(nxt)
            raise
        size = mapped_size(self.segment_size)
        if claim is Claim.TAKEN:      # the call releases the claim once it is done
            call = BackgroundCall.fallocate(fd, size, self._claims.fd, SEGMENT_CLAIM_BASE + nxt,
                                            prefault=early and PREFAULT_EARLY)
        else:
            call = BackgroundCall.fallocate(fd, size, prefault=early and PREFAULT_EARLY)
        self._job = _SpareJob(nxt, call, tmp, fd, early)
        self._countdown = min(self._every, SPARE_POLL_WRITES)

    def _start_mapping(self, index, made):
        try:
            w = self._segment_writer(index)
        except FileNotFoundError:
            return      # removed at once by retention: the writers are further on
        fd, _ = open_file(segment_path(self.path, index), os.O_RDONLY,
                          allow_foreign=self._allow_foreign)
        call = BackgroundCall.populate(w, made)
        if call is None:        # nothing to map ahead (prefault mapped it at open)
            self._spare = Spare(index, OpenSegment(w, fd))
            return
        job = _SpareJob(index, call, None, fd)
        job.writer = w
        self._job = job
        self._countdown = min(self._every, SPARE_POLL_WRITES)

    def _mapping_next(self, target):
        """The running job maps segment ``target``, already made and opened (no spare yet)."""
        job = self._job
        return job.writer is not None and job.index == target and self._spare is None

    def _step(self, wait, then_map=False):
        """The spare's background call is done (``wait``: wait for it): its next step. A roll
        waits for a spare's file to be made (``then_map``: then starts mapping it, which the
        roll does not wait for, see ``_roll``)."""
        job = self._job
        if job.early and not wait and read_limit(self._fd) < self._half:
            self._countdown = self._every       # made early: linked from the middle on
            return
        if not wait and not job.call.done:
            self._countdown = min(self._every, SPARE_POLL_WRITES)
            return
        rc = job.call.wait()
        self._job = None
        if job.writer is not None:              # mapped (or not: rc says, the writes do it)
            if job.writer is self._w:
                return          # entered by a roll before it was done: the current segment
            if rc == -1:
                job.writer.close()              # mapped in the parent of this forked child
                os.close(job.fd)
            elif job.index == self._k + 1 and self._spare is None:
                self._spare = Spare(job.index, OpenSegment(job.writer, job.fd))
            else:
                self._retired.append(OpenSegment(job.writer, job.fd))
            return
        # The temporary file's preallocation is over (and the claim released with it): linked,
        # unless it failed (the roll then makes the segment itself, and reports why), or it
        # ran in the parent of this forked child.
        if rc == -1:
            os.close(job.fd)
            return
        try:
            if rc != 0:
                preallocation_failed(rc, job.fd, mapped_size(self.segment_size),
                                      segment_path(self.path, job.index))
        except OSError:
            os.unlink(job.tmp)
            return
        finally:
            os.close(job.fd)
        linked = link_temporary(self.path, job.index, job.tmp)
        if linked:
            self._after_create(job.index, self._k)
        if job.index == self._k + 1 and (then_map or not wait):
            # Prefaulted (made early): its pages only mapped (MADV_POPULATE_READ, cheaper).
            self._start_mapping(job.index, made=linked and not (job.early and PREFAULT_EARLY))
