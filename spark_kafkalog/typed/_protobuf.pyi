from typing import Any

import numpy as np
import pyarrow as pa

ERRORS: dict[int, str]
E_NOMEM_CODE: int
E_TOOBIG_CODE: int

class Kernel:
    def __init__(self, tables: dict[str, Any]) -> None: ...
    def run(self, values: pa.Array, framed: bool, ids: np.ndarray, path_off: np.ndarray,
            paths: np.ndarray, mode: int, top: int
            ) -> tuple[list[tuple[int, int, Any, Any, Any]],
                       list[tuple[int, int, int, int | None, int | None]], np.ndarray]: ...
