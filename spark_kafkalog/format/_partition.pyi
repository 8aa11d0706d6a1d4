"""Type stubs of the compiled partitioner (_partition.pyx): the Java producer's default
partitioner over an Arrow key column."""
import numpy as np
import pyarrow as pa

def murmur2(key: bytes | bytearray | memoryview) -> int: ...
def partition_for_keys(keys: pa.Array | pa.ChunkedArray, num_partitions: int,
                       null_start: int = 0) -> np.ndarray: ...
def group_by_partition(parts: np.ndarray, num_partitions: int
                       ) -> tuple[np.ndarray, np.ndarray]: ...
