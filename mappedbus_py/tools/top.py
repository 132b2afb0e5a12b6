"""``mappedbus top PATH``: a live view of one bus, refreshed every second: records written
per second, rollbacks, parked readers, each consumer's lag and rate, and each work group's
acks, pending records, redeliveries and dead letters.

Plain ANSI (cursor home, clear to end of line); ``--once`` prints one frame without escape
sequences, the rates measured over one interval. Reads as the exporter does (``metrics``):
nothing is written.
"""
import time

from .views import escape
from ..formats.positions import records_to
from .metrics import list_consumers, open_bus, parked_readers

__all__ = ("frame", "run")

_HOME, _CLEAR_EOL, _CLEAR_EOS = "\x1b[H", "\x1b[K", "\x1b[J"
_HIDE, _SHOW = "\x1b[?25l", "\x1b[?25h"


def _rate(n, dt):
    return f"{n / dt:,.0f}/s" if dt > 0 else "-"


def _ago(now, t):
    if not t:
        return "never"
    s = max(0.0, now - t)
    return f"{s:.1f} s ago" if s < 120 else f"{s / 60:.0f} min ago"


def frame(path, before, after, cons_before, cons_after, dt, groups_before=(), groups_after=()):
    """The lines of one frame: ``before``/``after`` are BusSnapshots ``dt`` seconds apart,
    ``cons_before``/``cons_after`` the consumers at the same moments, ``groups_before``/
    ``groups_after`` the work groups (``mappedbus_py.groups``' GroupInfo)."""
    s = after
    seg = s.segment_size
    lines = [f"mappedbus top  {escape(path)}  ({s.kind}, record_size {s.record_size}"
             + (f", {s.segments} segments" if seg else "") + ")   "
             + time.strftime("%H:%M:%S", time.localtime(s.taken)),
             f"written   {_rate(s.allocated - before.allocated, dt):>12}   slots {s.allocated:,}"
             f"   limit {s.limit}" + ("   FULL" if s.full else ""),
             f"committed {_rate(s.committed - before.committed, dt):>12}   total "
             f"{s.committed:,}",
             f"rolled back {_rate(s.rolled_back - before.rolled_back, dt):>10}   total "
             f"{s.rolled_back:,}   not set now {s.not_set}"
             + (f"   corrupt {s.corrupt}" if s.corrupt else ""),
             f"parked readers {s.parked}", ""]
    prev = {c.name: c for c in cons_before}
    now = s.taken
    if not cons_after:
        lines.append("no consumers registered")
        lines += _group_lines(groups_before, groups_after, dt)
        return lines
    lines.append(f"{'consumer':<24} {'position':>16} {'lag':>12} {'rate':>10}  "
                 f"{'state':<10} {'pid':>8}  last commit")
    for c in sorted(cons_after, key=lambda c: c.name):
        p = prev.get(c.name)
        rate = "-" if p is None else _rate(records_to(p.position, c.position,
                                                      s.record_size, seg), dt)
        state = "expired" if c.expired else ("alive" if c.alive else "stopped")
        lag = "-" if c.lag is None else f"{c.lag:,}"
        lines.append(f"{escape(c.name):<24} {c.position:>16} {lag:>12} {rate:>10}  "
                     f"{state:<10} {c.pid or '-':>8}  {_ago(now, c.committed_at)}")
    lines += _group_lines(groups_before, groups_after, dt)
    return lines


def _group_lines(groups_before, groups_after, dt):
    # The work groups section: nothing when the bus has none.
    if not groups_after:
        return []
    prev = {g.name: g for g in groups_before}
    lines = ["", f"{'group':<24} {'acked':>12} {'rate':>10} {'pending':>8} {'in flight':>9} "
                 f"{'redelivered':>11} {'dead':>6} {'oldest':>8}  members"]
    for g in sorted(groups_after, key=lambda g: g.name):
        p = prev.get(g.name)
        rate = "-" if p is None else _rate(g.acked - p.acked, dt)
        alive = len(g.live_members)
        lines.append(f"{escape(g.name):<24} {g.acked:>12,} {rate:>10} {g.pending:>8} "
                     f"{sum(m.in_flight for m in g.live_members):>9} {g.redelivered:>11} "
                     f"{g.dead_lettered:>6} {g.oldest_unacked_age:>7.1f}s  "
                     f"{alive} alive of {len(g.members)}")
    return lines


def _groups(path):
    from .metrics import list_groups
    return list_groups(path)


def _sample(counter, path):
    counter.refresh()
    s = counter.snapshot()
    s.parked = parked_readers(path, counter.rolling)
    return s, list_consumers(path)


def run(path, out, *, interval=1.0, once=False):
    """Show the bus at ``path`` on ``out`` every ``interval`` seconds until Ctrl-C
    (KeyboardInterrupt propagates, the terminal restored); ``once``: one plain frame."""
    counter = open_bus(path)
    try:
        before, cb = _sample(counter, path)
        gb = _groups(path)
        if once:
            time.sleep(interval)
            after, ca = _sample(counter, path)
            ga = _groups(path)
            out.write("\n".join(frame(path, before, after, cb, ca, after.taken - before.taken,
                                      gb, ga)) + "\n")
            return 0
        out.write(_HIDE + "\x1b[2J")
        try:
            while True:
                time.sleep(interval)
                after, ca = _sample(counter, path)
                ga = _groups(path)
                lines = frame(path, before, after, cb, ca, after.taken - before.taken, gb, ga)
                out.write(_HOME + "".join(ln + _CLEAR_EOL + "\n" for ln in lines) + _CLEAR_EOS)
                out.flush()
                before, cb, gb = after, ca, ga
        finally:
            out.write(_SHOW)
            out.flush()
    finally:
        counter.close()
