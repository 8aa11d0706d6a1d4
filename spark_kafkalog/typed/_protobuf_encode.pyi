from typing import Any

import numpy as np
import pyarrow as pa

KINDS: dict[str, int]
MODES: dict[str, int]
CONVS: dict[str, int]
ERRORS: dict[str, int]

class Program:
    def node(self, kind: str, mode: str, tag: bytes = ..., conv: str = ...,
             lo: int | None = ..., hi: int | None = ..., from_u64: bool = ...,
             per: int = ..., duration: bool = ..., oneof: int = ...) -> int: ...
    def oneof_slot(self) -> int: ...
    def children(self, idx: int, kids: list[int]) -> None: ...
    def bind(self, idx: int, valid: pa.Array, data: pa.Array | np.ndarray | None = ...,
             offs: pa.Array | None = ...) -> None: ...
    def unbind(self) -> None: ...
    def encode(self, top: int, nrows: int, prefix: bytes
               ) -> tuple[pa.BinaryArray | None, tuple[int, int, int, int] | None]: ...
