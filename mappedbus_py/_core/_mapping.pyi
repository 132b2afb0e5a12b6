import os
from typing import Optional, Union

DEFAULT_LOCK_TIMEOUT: float

def check_mode(mode: int) -> None: ...
def check_lock_timeout(timeout: float) -> None: ...

class MappedFile:
    """A bus file mapped shared (see the Cython module's docstring)."""
    mapped_size: int
    file_size: int
    path: str
    read_only: bool
    bus_id: Optional[str]
    st_dev: int
    st_ino: int
    limit_at_open: int
    def __init__(self, path: Union[str, os.PathLike[str]], file_size: int, *,
                 read_only: bool = ..., mode: int = ..., preallocate: bool = ...,
                 prefault: bool = ..., create: Optional[bool] = ..., record_size: int = ...,
                 init: bool = ..., allow_foreign: bool = ..., lock_timeout: float = ...,
                 segment: bool = ...) -> None: ...
    @property
    def closed(self) -> bool: ...
    @property
    def is_dead(self) -> bool: ...
    def check_path(self) -> None: ...
    def check_intact(self) -> None: ...
    def close(self) -> None: ...
    def __buffer__(self, flags: int) -> memoryview: ...
