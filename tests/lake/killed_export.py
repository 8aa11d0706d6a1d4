"""One export in a process of its own, SIGKILLed at its N-th fault point (``tests.log.
killing.FaultCounter``): ``python -m tests.lake.killed_export LOGS WAREHOUSE TABLE
KILL_AT WINDOW [MODE]``; KILL_AT 0 runs to the end and prints the fault points it passed.
MODE: append (default) or upsert."""
import sys

from spark_kafkalog.lake import export_topics, open_catalog
from spark_kafkalog.lake.iceberg_table import RawRecords, open_table
from tests.log.killing import FaultCounter


def main(logs, warehouse, identifier, kill_at, window, mode="append"):
    fault = FaultCounter(int(kill_at) or None)
    catalog = open_catalog(warehouse)
    shape = RawRecords(mode)
    table = open_table(catalog, identifier, shape)
    export_topics(logs, ["t"], catalog, table, identifier, window_records=int(window),
                  shape=shape, fault=fault)
    print(" ".join(fault.points))


if __name__ == "__main__":
    main(*sys.argv[1:])
