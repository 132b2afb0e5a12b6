"""The options of a rolling bus, checked at once: retention, the consumer policy, the sizes
(given, or taken from ``bus.meta``); and the reopening of a pickled writer or reader, by path
with the same options. The single-file checks these build on are ``mappedbus_py._core._checks``."""
import dataclasses
from typing import Optional

from .._core._checks import check_sizes as _check_sizes
from ..formats.layout import ON_CONSUMER_LAG

__all__ = ("Retention", "ConsumerPolicy", "check_retention", "check_consumer_policy",
           "check_segment_sizes", "reopen")


@dataclasses.dataclass(frozen=True)
class Retention:
    """What a writer asks retention to keep, as ``bus.meta`` stores it (0: no limit):
    ``segments`` (retain_segments), ``bytes`` (retain_bytes), ``age_ms`` (retain_age in ms)."""
    segments: int = 0           # retain_segments
    bytes: int = 0              # retain_bytes
    age_ms: int = 0             # retain_age, in ms


@dataclasses.dataclass(frozen=True)
class ConsumerPolicy:
    """What a writer asks retention to do about consumers, as ``bus.meta`` stores it:
    ``max_lag`` (max_consumer_lag, segments; 0: consumers hold nothing), ``on_lag``
    (on_consumer_lag, "expire" or "block"), ``block_ms`` (consumer_block_timeout in ms; None:
    bus.meta's default)."""
    max_lag: int = 0                    # max_consumer_lag, segments (0: consumers hold nothing)
    on_lag: str = "expire"              # on_consumer_lag: "expire" or "block"
    block_ms: Optional[int] = None      # consumer_block_timeout in ms; None: bus.meta's default


def check_retention(retain_segments, retain_bytes, retain_age):
    """The writer's retention arguments as a ``Retention`` (``retain_age`` in seconds)."""
    for name, v in (("retain_segments", retain_segments), ("retain_bytes", retain_bytes)):
        if not isinstance(v, int) or v < 0:
            raise ValueError(f"{name} must be a non-negative integer, got {v!r}")
    if retain_age is not None and (not isinstance(retain_age, (int, float)) or retain_age < 0):
        raise ValueError(f"retain_age must be a non-negative number of seconds, got {retain_age!r}")
    return Retention(retain_segments, retain_bytes, int(round((retain_age or 0) * 1000)))


def check_consumer_policy(max_consumer_lag, on_consumer_lag, block_timeout):
    """The writer's consumer arguments as a ``ConsumerPolicy`` (``block_timeout`` in
    seconds)."""
    if isinstance(max_consumer_lag, bool) or not isinstance(max_consumer_lag, int) \
            or max_consumer_lag < 0:
        raise ValueError(f"max_consumer_lag must be a non-negative number of segments, got "
                         f"{max_consumer_lag!r}")
    if on_consumer_lag not in ON_CONSUMER_LAG:
        raise ValueError(f"on_consumer_lag must be one of {', '.join(map(repr, ON_CONSUMER_LAG))}, "
                         f"got {on_consumer_lag!r}")
    if block_timeout is not None and (isinstance(block_timeout, bool)
                                      or not isinstance(block_timeout, (int, float))
                                      or not 0 <= block_timeout < 2**31 / 1000):
        raise ValueError(f"consumer_block_timeout must be a number of seconds, got "
                         f"{block_timeout!r}")
    return ConsumerPolicy(max_consumer_lag, on_consumer_lag,
                          None if block_timeout is None else int(round(block_timeout * 1000)))


def check_segment_sizes(segment_size, record_size):
    """The single-file checks of the sizes (``_check_sizes``), the error naming
    ``segment_size`` where a single file's names ``file_size``."""
    try:
        return _check_sizes(segment_size, record_size)
    except (TypeError, ValueError) as e:
        raise type(e)(str(e).replace("file_size", "segment_size")) from None


def reopen(cls, path, segment_size, record_size, kwargs, opened):
    """Unpickling a rolling writer or reader: a new one on the same path, opened if it was."""
    obj = cls(path, segment_size, record_size, **kwargs)
    if opened:
        obj.open()
    return obj
