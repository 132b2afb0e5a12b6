from typing import Any, Iterable, Mapping, Optional, Type, TypeVar, Union

from ..messages import Message

_M = TypeVar("_M", bound=Message)

class Record:
    """One committed record, as returned by ``read()``, ``records()`` and iteration."""
    position: int
    meta: int
    payload: bytes
    topic: Optional[str]
    flags: int
    framed: bool
    def __init__(self, position: int, meta: int, payload: bytes, topic: Optional[str] = ...,
                 flags: int = ..., framed: bool = ..., serializer: Optional[Any] = ...) -> None: ...
    def object(self) -> Any: ...
    @property
    def type(self) -> int: ...
    @property
    def length(self) -> int: ...
    @property
    def data(self) -> bytes: ...
    def decode(self, types: Union[Mapping[int, Type[_M]], Iterable[Type[_M]]]) -> Union[_M, bytes]: ...
    def __eq__(self, other: object) -> bool: ...
