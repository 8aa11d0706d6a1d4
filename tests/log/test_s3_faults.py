"""A failing, throttling, slow or truncating object store under reads and writes.

A fault proxy (:mod:`tests.log.s3faults`, 127.0.0.1) sits between pyarrow's S3 client and
the session's moto server. Reads: a fault the client's retries absorb (each request is
tried ``s3.retry_max_attempts`` times) gives exactly the right rows; one that outlasts
them fails with our error naming the object, after a bounded number of requests and
time; a response cut short is never taken for a torn tail. Writes: an outage from any
request of a commit on (every later PUT, POST and DELETE refused) never leaves a
half-commit visible -- a reader through a working endpoint sees the old log or the new
one -- and the write completes once the store is back, with no staging object left.
"""
from __future__ import annotations

import time
import warnings

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pytest

from spark_kafkalog.errors import InvalidOptionError, KafkaLogError
from spark_kafkalog.log import read_table
from spark_kafkalog.log.io import resolve_filesystem
from spark_kafkalog.log.files import journal as jr
from spark_kafkalog.log.write import write_table
from tests.log.s3faults import FaultProxy, Faults
from tests.log.test_s3 import REGION, s3, s3_endpoint  # noqa: F401  (session moto server)

ERRORS = ["500", "503", "slowdown", "reset", "short"]


@pytest.fixture(scope="module")
def proxy(s3_endpoint):  # noqa: F811
    p = FaultProxy(s3_endpoint)
    yield p
    p.close()


def opts(endpoint: str, **more) -> dict:
    return {"s3.endpoint": endpoint, "s3.region": REGION, "s3.access_key": "testing",
            "s3.secret_key": "testing", "s3.connect_timeout": "2",
            "s3.request_timeout": "5", **more}


def rows(tag: int, n: int = 2000) -> pa.Table:
    return pa.table({"key": [b"k%d" % (i % 13) for i in range(n)],
                     "value": [b"%d-%d-" % (tag, i) + b"v" * 30 for i in range(n)],
                     "partition": pa.array([i % 2 for i in range(n)], pa.int32())})


@pytest.fixture
def log(s3, s3_endpoint):  # noqa: F811
    """A two-partition topic in a fresh bucket and its rows, read without faults."""
    _, fs, bucket = s3
    write_table(bucket, "t", rows(1), partitions=2, filesystem=fs, batch_bytes=4000)
    write_table(bucket, "t", rows(2, 500), filesystem=fs, batch_bytes=4000)
    good = read_table(f"s3://{bucket}", "t", filesystem_options=opts(s3_endpoint))
    assert good.num_rows == 2500
    return fs, bucket, good


def content(table: pa.Table) -> list:
    """What a write decides (the timestamps are the write's clock)."""
    return list(zip(*(table[c].to_pylist() for c in ("partition", "offset", "key", "value"))))


def read_via(proxy, bucket, **more):
    return read_table(f"s3://{bucket}", "t", filesystem_options=opts(proxy.endpoint, **more))


# ---- reads ----------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ERRORS)
def test_read_retries_a_passing_fault(proxy, log, kind):
    """Two faulted segment GETs (each retried by the client): exactly the right rows."""
    _, bucket, good = log
    proxy.set(Faults(kind, methods=("GET",), count=2, path_part=".log"))
    assert read_via(proxy, bucket).equals(good)
    assert proxy.faulted() == 2


@pytest.mark.parametrize("kind", ERRORS)
@pytest.mark.parametrize("target", [".log", ".journal", ""])
def test_read_fails_clearly_when_the_fault_lasts(proxy, log, kind, target):
    """Every GET of the segments (or of the journal, or every GET) fails: our error
    naming the object, after at most ``retry_max_attempts`` tries of a request, in
    bounded time; never rows."""
    _, bucket, good = log
    faults = proxy.set(Faults(kind, methods=("GET",), count=None, path_part=target))
    t0 = time.monotonic()
    with pytest.raises(KafkaLogError) as info:
        read_via(proxy, bucket, **{"s3.retry_max_attempts": "2"})
    assert time.monotonic() - t0 < 30
    text = str(info.value)
    assert bucket in text, text
    if target:
        assert target in text, text
    # a request is tried twice at most: a read stops at its first failing object
    assert 1 <= len(faults.picked) <= 2 * 4, faults.picked


@pytest.mark.parametrize("target", [".log", ".journal"])
def test_truncated_response_is_never_read_as_data(proxy, log, target):
    """A well-formed response holding half the bytes asked for (``Content-Length`` says
    so): pyarrow's S3 file returns the whole length asked for, the missing half being
    whatever its buffer held. The batches' CRC-32C and the journal's checksum catch it
    (or the buffer happened to hold the right bytes): never wrong rows."""
    _, bucket, good = log
    for _ in range(3):
        proxy.set(Faults("truncated", methods=("GET",), count=None, path_part=target))
        try:
            got = read_via(proxy, bucket)
        except KafkaLogError as err:
            assert target in str(err), str(err)
        else:
            assert got.equals(good)


def test_retry_budget_is_the_option(proxy, log):
    """``s3.retry_max_attempts`` bounds the client's tries: one fault fails a read
    allowed one attempt and not one allowed two; the option is range-checked."""
    _, bucket, good = log
    proxy.set(Faults("503", methods=("GET",), count=1, path_part=".log"))
    with pytest.raises(KafkaLogError, match="cannot read segment"):
        read_via(proxy, bucket, **{"s3.retry_max_attempts": "1"})
    proxy.set(Faults("503", methods=("GET",), count=1, path_part=".log"))
    assert read_via(proxy, bucket, **{"s3.retry_max_attempts": "2"}).equals(good)
    for bad in ("0", "21", "x"):
        with pytest.raises(InvalidOptionError, match="s3.retry_max_attempts"):
            resolve_filesystem("s3://b", {"s3.retry_max_attempts": bad})


def test_latency(proxy, log):
    """Slow answers: right rows; answers slower than ``s3.request_timeout``: our error,
    within the tries' bound."""
    _, bucket, good = log
    proxy.set(Faults("latency", methods=("GET", "HEAD"), count=6, delay_s=0.2))
    assert read_via(proxy, bucket).equals(good)
    faults = proxy.set(Faults("latency", methods=("GET",), count=None, delay_s=1.5,
                              path_part=".log"))
    t0 = time.monotonic()
    with pytest.raises(KafkaLogError, match=r"\.log"):
        read_via(proxy, bucket, **{"s3.request_timeout": "0.5", "s3.retry_max_attempts": "2"})
    assert time.monotonic() - t0 < 20
    assert len(faults.picked) <= 8


# ---- writes ---------------------------------------------------------------------------------
WRITE_METHODS = ("PUT", "POST", "DELETE")


def write_requests(proxy, s3_endpoint, fs, bucket) -> int:  # noqa: F811
    """How many PUT/POST/DELETE requests the test's write makes (on a copy of the log)."""
    copy = f"{bucket}-n"
    fs.create_dir(copy)
    pafs.copy_files(bucket, copy, source_filesystem=fs, destination_filesystem=fs)
    faults = proxy.set(Faults("500", methods=WRITE_METHODS, count=0))
    write_via(proxy, copy)
    return faults.matched


def write_via(proxy, bucket, wid="batch:w3"):
    pfs, root = resolve_filesystem(f"s3://{bucket}", opts(proxy.endpoint, **{
        "s3.retry_max_attempts": "2"}))
    return write_table(root, "t", rows(3, 700), filesystem=pfs, batch_bytes=4000,
                       write_id=wid)


@pytest.mark.parametrize("kind,stride", [
    # fast tier: every sixth request (and the last), the kinds of ERRORS taking turns
    # (500 at k=0, 503 at k=6, slowdown at 12, reset at 18, short at 24, 500 again at 30,
    # ...); the slow tier below fails every request
    ("mixed", 6),
    # slow tier: every request, a throttle (SlowDown, retried with back-off) and a dropped
    # connection taking turns (slowdown at even k, reset at odd k): every request fails
    # once, in half the time of a full sweep of each kind (~330 s each on a loaded machine)
    pytest.param("slowdown|reset", 1, marks=pytest.mark.slow)])
def test_write_outage_from_every_request(proxy, s3, s3_endpoint, kind, stride):  # noqa: F811
    """The store refuses every write request from the k-th of a commit on, for every k
    (``short``: it stores the object but the answer is cut short, so the client
    retries). A reader through a working endpoint then sees the old log or, once the
    commit point (the journal object) is in, the new one; the same write retried when
    the store is back lands exactly once and leaves no staging object."""
    _, fs, bucket = s3
    write_table(bucket, "t", rows(1), partitions=2, filesystem=fs, batch_bytes=4000)
    old = content(read_table(f"s3://{bucket}", "t", filesystem_options=opts(s3_endpoint)))
    n = write_requests(proxy, s3_endpoint, fs, bucket)
    assert n >= 8
    new = content(read_table(f"s3://{bucket}-n", "t", filesystem_options=opts(s3_endpoint)))
    outcomes = {}
    cycle = ERRORS if kind == "mixed" else kind.split("|")
    for k in sorted(set(range(0, n, stride)) | {n - 1}):
        b = f"{bucket}-{k}"
        fs.create_dir(b)
        pafs.copy_files(bucket, b, source_filesystem=fs, destination_filesystem=fs)
        kind_k = cycle[(k // stride) % len(cycle)]
        faults = proxy.set(Faults(kind_k, methods=WRITE_METHODS, count=None, after=k))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                write_via(proxy, b)
                outcome = "ok"
            except KafkaLogError:
                outcome = "failed"
            except OSError as err:             # pyarrow's own: must not escape as such
                pytest.fail(f"request {k}: not our error: {err}")
        proxy.set(None)
        assert faults.picked, k
        seen = content(read_table(f"s3://{b}", "t", filesystem_options=opts(s3_endpoint)))
        committed = jr.load(fs, b, "t").is_committed("batch:w3")
        # what failed after the commit point is a warning of a write that is in; the
        # writer lease a dead endpoint kept is said to expire (either way)
        said = [str(w.message) for w in caught]
        assert all(committed or "committed, but" not in m for m in said), (k, said)
        assert all("committed, but" in m or "writer lease" in m for m in said), (k, said)
        assert seen == (new if committed else old), (k, outcome, committed)
        if outcome == "ok":
            assert committed
        again = write_via(proxy, b)
        assert again.noop == committed
        assert content(read_table(f"s3://{b}", "t",
                                  filesystem_options=opts(s3_endpoint))) == new
        assert not [i for i in fs.get_file_info(pafs.FileSelector(b))
                    if i.base_name.startswith(jr.STAGING_PREFIX)], k
        outcomes[k] = (kind_k, outcome, "new" if committed else "old")
    print(f"s3 writes, {kind}: {n} requests: {outcomes}")
    assert {o for _, _, o in outcomes.values()} == {"old", "new"}
    assert {k for k, _, _ in outcomes.values()} == set(cycle)


def test_passing_write_faults_are_retried(proxy, s3, s3_endpoint):  # noqa: F811
    """One faulted request of each kind in a commit. A 5xx or a slow answer is retried
    by the client: the write lands. A reset or cut-short answer to a request the store
    did carry out (completing a multipart upload) may make the client's retry fail: then
    the write fails with our error, and the same write retried lands it. Either way each
    write is in exactly once."""
    _, fs, bucket = s3
    write_table(bucket, "t", rows(1), partitions=2, filesystem=fs, batch_bytes=4000)
    kinds = ["500", "503", "slowdown", "latency", "reset", "short"]
    for i, kind in enumerate(kinds):
        faults = proxy.set(Faults(kind, methods=WRITE_METHODS, count=1, after=2 + i))
        try:
            assert not write_via(proxy, bucket, wid=f"batch:r{i}").noop
        except KafkaLogError as err:
            assert kind in ("reset", "short"), f"{kind}: {err}"
            proxy.set(None)
            write_via(proxy, bucket, wid=f"batch:r{i}")
        assert faults.picked
    proxy.set(None)
    got = read_table(f"s3://{bucket}", "t", filesystem_options=opts(s3_endpoint))
    assert got.num_rows == 2000 + len(kinds) * 700
    # each write landed once: contiguous offsets, no duplicate
    for p in (0, 1):
        offsets = got.filter(pc.equal(got["partition"], p))["offset"].to_pylist()
        assert offsets == list(range(len(offsets)))
