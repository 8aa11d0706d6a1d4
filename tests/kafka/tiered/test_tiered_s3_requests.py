"""Reading the remote tier from S3 costs requests per remote segment read, never a
listing: a counting proxy between the S3 client and the loopback moto server records
every request of a read of the broker's tiered topics."""
from __future__ import annotations

import logging
from collections import Counter

import pyarrow.fs as pafs
import pytest

from spark_kafkalog.log import LogDirs, read_table
from spark_kafkalog.log.read.reader import load_remote_metadata
from tests.log.s3count import CountingProxy
from tests.log.test_s3 import s3, s3_endpoint  # noqa: F401  (session moto)


@pytest.fixture
def counted(s3, s3_endpoint):  # noqa: F811
    options, fs, bucket = s3
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    proxy = CountingProxy(s3_endpoint)
    yield proxy, dict(options, **{"s3.endpoint": proxy.endpoint}), fs, bucket
    proxy.close()


@pytest.mark.parametrize("isolation", ("read_uncommitted", "read_committed"))
def test_remote_reads_are_bounded_per_segment_and_never_list(tiered, counted, isolation):
    proxy, options, fs, bucket = counted
    pafs.copy_files(tiered.remote, f"{bucket}/tiered", source_filesystem=pafs.LocalFileSystem(),
                    destination_filesystem=fs)
    segs = [s for s in load_remote_metadata(LogDirs(tiered.logdir)).segments().to_pylist()
            if s["topic"] == "tiered-txn" and s["readable"]]
    with_txn = sum(not s["txn_index_empty"] for s in segs)
    proxy.requests.clear()
    table = read_table(tiered.logdir, "tiered-txn", isolation_level=isolation,
                       remote_storage=f"s3://{bucket}/tiered", filesystem_options=options)
    assert table.num_rows == len(tiered.expected("tiered-txn", isolation))
    methods = Counter(m for m, _, _ in proxy.requests)
    listings = [r for r in proxy.requests if r[0] == "GET" and ("list-type" in r[2]
                                                                or "prefix=" in r[2])]
    assert listings == []
    budget = 2 * len(segs) + (2 * with_txn if isolation == "read_committed" else 0)
    assert len(proxy.requests) <= budget, (methods, len(segs), with_txn)
