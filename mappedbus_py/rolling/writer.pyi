import os
from types import TracebackType
from typing import (Any, AsyncIterator, Coroutine, Iterator, List, Literal, Optional, Sequence,
                    Tuple, Type, TypeVar, Union)

from typing_extensions import Buffer, Self

from .._core._message import MessageBase
from .._core._record import Record
from ..formats.busmeta import BusMeta

_Path = Union[str, "os.PathLike[str]"]
_Msg = TypeVar("_Msg", bound=MessageBase)

class RollingBusWriter:
    """Writes records onto a rolling bus (a directory of segments)."""
    path: str
    segment_size: int
    record_size: int
    meta: Optional[BusMeta]
    def __init__(self, path: _Path, segment_size: Optional[int] = ...,
                 record_size: Optional[int] = ..., *, retain_segments: int = ..., retain_bytes: int = ...,
                 retain_age: Optional[float] = ..., max_consumer_lag: int = ...,
                 on_consumer_lag: Literal["expire", "block"] = ...,
                 consumer_block_timeout: Optional[float] = ..., mode: int = ...,
                 allow_foreign: bool = ..., prefault: bool = ...,
                 sync: Literal["none", "segment", "interval"] = ...,
                 sync_interval: Optional[float] = ..., time_index: Optional[bool] = ...,
                 archive: Optional[_Path] = ..., archive_after: Optional[int] = ...,
                 archive_age: Optional[float] = ...,
                 compress: Optional[Literal["zstd", "lz4"]] = ...,
                 archive_retain_segments: Optional[int] = ..., archive_retain_bytes: Optional[int] = ...,
                 archive_retain_age: Optional[float] = ...) -> None: ...
    def sync(self) -> None: ...
    @property
    def sync_policy(self) -> Any: ...
    @property
    def archiver(self) -> Any: ...
    @property
    def bus_id(self) -> Optional[str]: ...
    @property
    def segment(self) -> int: ...
    @property
    def closed(self) -> bool: ...
    def open(self) -> Self: ...
    def close(self) -> None: ...
    def __enter__(self) -> Self: ...
    def __exit__(self, exc_type: Optional[Type[BaseException]],
                 exc: Optional[BaseException], tb: Optional[TracebackType]) -> None: ...
    def write(self, data: Union[MessageBase, Buffer], offset: int = ..., length: int = ...) -> bool: ...
    def write_batch(self, rows: Buffer, meta: Union[int, Sequence[int], Buffer] = ...) -> int: ...
