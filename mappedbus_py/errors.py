"""Exceptions raised by mappedbus_py. Bad arguments raise plain ValueError/TypeError."""

__all__ = ("MappedBusError", "BusFullError", "CorruptBusError", "BusClosedError")


class MappedBusError(Exception):
    """Base class of the errors that concern a bus file."""


class BusFullError(MappedBusError, EOFError):
    """The end of the bus file was reached: a writer found no room for its record, or a
    reader has consumed every record the file can hold (Java's EOFException)."""


class CorruptBusError(MappedBusError, ValueError):
    """The file holds something no correct writer puts there: a status other than 0/1/2,
    a stored length outside 0..record_size, or a limit off the record grid (which is also
    what a wrong ``record_size`` looks like). Nothing is written in response."""


class BusClosedError(MappedBusError, ValueError):
    """An operation on a writer or reader that is closed (or was never opened)."""
