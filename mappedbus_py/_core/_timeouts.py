"""The check of a read call's timeout, shared by the readers (``_reader``), the rolling readers
and the asyncio waits (``aio``): one home below all three, so that ``aio`` needs nothing of the
reader it waits on."""

__all__ = ("check_timeout",)


def check_timeout(value, what="timeout"):
    """A read call's timeout: a number of seconds >= 0 (``math.inf`` waits for ever, as
    None does; huge values are clamped when the deadline is computed)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
        raise ValueError(f"{what} must be a non-negative number of seconds (or None: no "
                         f"limit), got {value!r}")
    return value
