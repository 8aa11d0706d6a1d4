"""The same log dirs read from a loopback S3 endpoint give the same tables as from disk.

A moto server (its threaded server mode) listens on 127.0.0.1 for the whole session;
log dirs built by the test builder and a real broker's log dir are uploaded to it and
read back through ``pyarrow.fs.S3FileSystem`` (``filesystem_options`` with the endpoint)
by ``read_table``, by ``LogDirs.state`` and by the ``kafkalog`` command
(``--fs-option s3.endpoint=...``). Credentials are dummies and the EC2 metadata lookup is
disabled, so nothing leaves the machine.
"""
from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pyarrow.fs as pafs
import pytest

from spark_kafkalog.cli import main
from spark_kafkalog.log import LogDirs, read_table

from .logbuilder import LogDirBuilder, flip_byte, segment_name
from .test_read import TOPIC, _records, assert_same, build_rich

moto_server = pytest.importorskip("moto.server", reason="moto[server] is a dev dependency")

REGION = "us-east-1"
_DUMMY_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": REGION,
    "AWS_REGION": REGION,
    "AWS_EC2_METADATA_DISABLED": "true",
    "AWS_CONFIG_FILE": os.devnull,
    "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
}


@pytest.fixture(scope="session")
def s3_endpoint():
    """``http://127.0.0.1:<port>`` of a moto S3 server running for the session (stopped
    at its end), with dummy AWS settings in the environment meanwhile."""
    with pytest.MonkeyPatch.context() as mp:
        for key, value in _DUMMY_ENV.items():
            mp.setenv(key, value)
        mp.delenv("AWS_PROFILE", raising=False)
        mp.delenv("AWS_ENDPOINT_URL", raising=False)
        server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0,
                                                verbose=False)
        server.start()
        try:
            host, port = server.get_host_and_port()
            assert host == "127.0.0.1"
            yield f"http://{host}:{port}"
        finally:
            server.stop()


@pytest.fixture
def s3(s3_endpoint):
    """``(filesystem options, S3FileSystem, fresh bucket name)`` for one test."""
    options = {"s3.endpoint": s3_endpoint, "s3.region": REGION,
               "s3.access_key": "testing", "s3.secret_key": "testing"}
    host = s3_endpoint.split("://", 1)[1]
    fs = pafs.S3FileSystem(endpoint_override=host, scheme="http", region=REGION,
                           access_key="testing", secret_key="testing",
                           allow_bucket_creation=True)
    bucket = f"kafkalog-{uuid.uuid4().hex[:12]}"
    fs.create_dir(bucket)
    return options, fs, bucket


def upload(fs: pafs.S3FileSystem, local: Path, bucket: str, prefix: str) -> str:
    """Copy a local log dir into the bucket; returns its ``s3://`` URI."""
    pafs.copy_files(str(local), f"{bucket}/{prefix}",
                    source_filesystem=pafs.LocalFileSystem(), destination_filesystem=fs)
    return f"s3://{bucket}/{prefix}"


def cli(*argv):
    out, err = io.StringIO(), io.StringIO()
    code = main([str(a) for a in argv], stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def fs_flags(options):
    return [x for k, v in options.items() for x in ("--fs-option", f"{k}={v}")]


def test_rich_log_reads_the_same_from_s3(tmp_path, s3):
    options, fs, bucket = s3
    b, p = build_rich(tmp_path / "logs", snapshot=True, preallocate=4096)
    uri = upload(fs, b.roots[0], bucket, "kafka-logs")
    for level in ("read_uncommitted", "read_committed"):
        local = read_table(str(b.roots[0]), TOPIC, isolation_level=level)
        remote = read_table(uri, TOPIC, isolation_level=level, filesystem_options=options)
        assert_same(remote, local)
        assert_same(remote, p.expected_table(level))
    remote = read_table(uri, TOPIC, read_past_high_watermark=True, filesystem_options=options,
                        starting_offsets={0: 20}, window_bytes=512)
    assert_same(remote, p.expected_table("read_uncommitted", start=20,
                                         read_past_high_watermark=True))
    logdirs = LogDirs(uri, options)
    assert logdirs.filesystem.type_name == "s3"
    s = logdirs.state(logdirs.partition(TOPIC, 0), isolation_level="read_committed")
    assert (s.log_start_offset, s.high_watermark, s.last_stable_offset, s.log_end_offset) == \
        (11, p.high_watermark, p.txns[3].first_offset, p.log_end_offset)


def test_jbod_reads_the_same_from_s3(tmp_path, s3):
    options, fs, bucket = s3
    b = LogDirBuilder(tmp_path / "d1", tmp_path / "d2")
    for q in range(4):
        jp = b.partition(TOPIC, q, root=q % 2)
        jp.append(_records(6 + q, b"p%d" % q), compression="snappy")
        jp.roll()
        jp.append(_records(3, b"q%d" % q), compression="lz4")
        jp.high_watermark = jp.log_end_offset - (q % 2)
    b.write()
    u1 = upload(fs, tmp_path / "d1", bucket, "d1")
    u2 = upload(fs, tmp_path / "d2", bucket, "d2")
    local = read_table(b.uris(), TOPIC)
    remote = read_table(f"{u1},{u2}", TOPIC, filesystem_options=options)
    assert_same(remote, local)
    assert sorted(set(remote.column("partition").to_pylist())) == [0, 1, 2, 3]


def test_real_broker_log_dir_reads_the_same_from_s3(real_broker, s3):
    options, fs, bucket = s3
    for name in ("kafka-0.10-magic1", "niloufar-ldi-poc"):
        local_root = real_broker / name
        uri = upload(fs, local_root, bucket, name)
        local_dirs = LogDirs(str(local_root), include_internal=True)
        remote_dirs = LogDirs(uri, options, include_internal=True)
        assert remote_dirs.topics() == local_dirs.topics()
        for topic in local_dirs.topics():
            for past_hw in (False, True):
                local = read_table(str(local_root), topic, read_past_high_watermark=past_hw)
                remote = read_table(uri, topic, filesystem_options=options,
                                    read_past_high_watermark=past_hw)
                assert_same(remote, local)
    # the manifest's numbers, through S3: __consumer_offsets-40 holds 860 records and
    # its high watermark is 856
    uri = f"s3://{bucket}/kafka-0.10-magic1"
    assert read_table(uri, "__consumer_offsets", filesystem_options=options).num_rows == 856
    assert read_table(uri, "TEST-TOPIC", filesystem_options=options).num_rows == 21211


def _comparable(doc):
    """inspect --json without the parts that name where the files are."""
    out = []
    for s in doc["partitions"]:
        s = {k: v for k, v in s.items() if k not in ("root", "path")}
        s["segments"] = [{k: v for k, v in x.items() if not k.endswith("path")}
                         for x in s["segments"]]
        out.append(s)
    return out


def test_cli_inspect_verify_dump_on_s3(tmp_path, s3, real_broker):
    options, fs, bucket = s3
    b, p = build_rich(tmp_path / "logs", snapshot=True)
    uri = upload(fs, b.roots[0], bucket, "logs")
    code, out, err = cli("inspect", "--json", *fs_flags(options), uri)
    assert code == 0, err
    remote = json.loads(out)
    code, out, err = cli("inspect", "--json", b.roots[0])
    local = json.loads(out)
    assert _comparable(remote) == _comparable(local)
    [s] = remote["partitions"]
    assert s["path"] == f"{bucket}/logs/{TOPIC}-0"
    assert (s["log_end_offset"], s["records"]) == (p.log_end_offset, len(p.rows))
    # one partition dir as the PATH, as on local disk
    code, out, err = cli("inspect", "--json", *fs_flags(options), f"{uri}/{TOPIC}-0")
    assert code == 0 and len(json.loads(out)["partitions"]) == 1
    code, out, err = cli("verify", *fs_flags(options), uri)
    assert code == 0 and "0 errors, 0 warnings" in out, out + err
    seg = p.segments[1][0]
    code, out, err = cli("dump", "--records", *fs_flags(options),
                         f"{uri}/{TOPIC}-0/{segment_name(seg, '.log')}")
    assert code == 0 and "endTxnMarker: ABORT coordinatorEpoch: 0" in out
    # damage found through S3 names the object and the byte position
    victim = p.segment_batches(seg)[1]
    flip_byte(b.roots[0] / f"{TOPIC}-0" / segment_name(seg, ".log"), victim.position + 30)
    bad = upload(fs, b.roots[0], bucket, "damaged")
    code, out, err = cli("verify", "--json", *fs_flags(options), bad)
    assert code == 1
    [f] = json.loads(out)["findings"]
    assert (f["kind"], f["path"], f["position"]) == \
        ("corrupt", f"{bucket}/damaged/{TOPIC}-0/{segment_name(seg, '.log')}",
         victim.position)
    # without the endpoint option the CLI fails cleanly instead of reaching out
    code, out, err = cli("inspect", "--fs-option", "s3.bogus=1", uri)
    assert code == 2 and "s3.bogus" in err


def test_console_script_inspects_s3(tmp_path, s3):
    options, fs, bucket = s3
    b, p = build_rich(tmp_path / "logs")
    uri = upload(fs, b.roots[0], bucket, "logs")
    script = Path(sys.executable).parent / "kafkalog"
    if not script.exists():
        pytest.skip(f"console script not installed at {script}")
    proc = subprocess.run([str(script), "inspect", "--json", *fs_flags(options), uri],
                          capture_output=True, text=True, timeout=120, env=dict(os.environ))
    assert proc.returncode == 0, proc.stderr
    [s] = json.loads(proc.stdout)["partitions"]
    assert (s["log_start_offset"], s["high_watermark"], s["log_end_offset"]) == \
        (11, p.high_watermark, p.log_end_offset)
