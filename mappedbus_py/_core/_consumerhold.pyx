# cython: language_level=3, embedsignature=True
"""A reader's hold on one named consumer of its bus (Java: ConsumerHold): claimed in the
registry beside the bus (``PATH.consumers``), its commits (``hold_commit`` in
_consumerhold.pxd, inline in the reader's ``commit``), its release at close."""
from libc.stdint cimport int64_t

from ._consumers cimport ConsumerRegistry, consumer_entry

from ..errors import BusClosedError

cdef int NEVER = 0     # what dead and fork point to once released


cdef class ConsumerHold:
    """Consumer ``name`` of the bus at ``bus_path`` (id ``bus_id``) in ``registry`` (the
    registry beside the bus, which the hold closes when it lets go, or when the claim fails),
    held until ``release()``; made at ``start`` the first time (internal: MappedBusReader and
    RollingBusReader hold one)."""

    def __cinit__(self, ConsumerRegistry registry, name, bus_id, int64_t start, bus_path):
        self.dead = &NEVER
        self.fork = &NEVER
        self.name = name
        reg = registry
        index, position, made = reg.claim(name, bus_id, start, bus_path)
        self.registry = reg
        self.index = index
        self.position = position
        self.made = made
        self.entry = consumer_entry(reg.base, index)
        self.dead = reg.dead_flag()
        self.fork = reg.fork_flag()
        self.clock = reg.clock()
        self.gen = self.fork[0]

    @property
    def registry_path(self):
        """The registry's path."""
        return self.registry.path if self.registry is not None else None

    cdef int refused(self) except -1:
        if self.entry == NULL:
            raise BusClosedError(f"consumer {self.name!r} was let go: its reader is closed")
        return self.registry.refuse_commit(self.name, self.gen)

    def release(self):
        """Let the name go and close the registry. Twice is harmless."""
        if self.registry is not None:
            reg, self.registry = self.registry, None
            self.entry = NULL
            self.dead = &NEVER
            self.fork = &NEVER
            try:
                reg.release(self.index)
            finally:
                reg.close()
