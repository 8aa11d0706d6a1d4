"""Type stubs of the compiled Avro kernel (_avro.pyx): the interpreter of a program built by
avro_program.py over a binary column of Avro values."""
import numpy as np
import pyarrow as pa

OPS: dict[str, int]
KINDS: dict[str, int]
NODE_WORDS: int
ERRORS: dict[int, str]

def set_buffer_cache_limit(limit: int) -> None: ...

class Kernel:
    def __init__(self, nodes: np.ndarray, kids: np.ndarray, ints: np.ndarray,
                 consts: bytes, colspec: np.ndarray) -> None: ...
    def run(self, values: pa.Array, confluent: bool, ids: np.ndarray, entries: np.ndarray,
            entry: int, mode: int, top: int
            ) -> tuple[list[tuple[int, int, pa.Buffer | None, pa.Buffer | None,
                                  pa.Buffer | None]],
                       list[tuple[int, str, int | None, int]],
                       np.ndarray | None]: ...
