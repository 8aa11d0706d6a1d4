"""One export in a process of its own, SIGKILLed at its N-th fault point (``tests.log.
killing.FaultCounter``): ``python -m tests.lake.killed_export LOGS WAREHOUSE TABLE
KILL_AT WINDOW``; KILL_AT 0 runs to the end and prints the fault points it passed."""
import sys

from spark_kafkalog.lake import export_topics, open_catalog
from spark_kafkalog.lake.iceberg_table import RawRecords, open_table
from tests.log.killing import FaultCounter


def main(logs, warehouse, identifier, kill_at, window):
    fault = FaultCounter(int(kill_at) or None)
    catalog = open_catalog(warehouse)
    table = open_table(catalog, identifier, RawRecords())
    export_topics(logs, ["t"], catalog, table, identifier, window_records=int(window),
                  fault=fault)
    print(" ".join(fault.points))


if __name__ == "__main__":
    main(*sys.argv[1:])
