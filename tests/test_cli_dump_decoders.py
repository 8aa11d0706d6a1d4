"""``kafkalog dump --offsets-decoder`` / ``--transaction-log-decoder`` without a broker
(the kafka tier compares the text with Kafka's DumpLogSegments): decoded keys and
payloads in the text and in ``--json``, a keyless record is a problem (exit 1)."""
from __future__ import annotations

import io
import json

import pyarrow as pa
import pytest

from spark_kafkalog.cli import main
from spark_kafkalog.format import encode
from tests.conftest import require_real_broker
from tests.format import coordinator_builders as cb


def run(*argv):
    out, err = io.StringIO(), io.StringIO()
    return main(list(argv), stdout=out, stderr=err), out.getvalue(), err.getvalue()


def test_offsets_decoder_on_a_real_broker_segment():
    seg = require_real_broker() / "kafka-0.10-magic1" / "__consumer_offsets-40" / \
        "00000000000000000000.log"
    code, out, _err = run("dump", "--offsets-decoder", str(seg))
    assert code == 0
    assert ('key: {"type":"1","data":{"group":"GroupA","topic":"foo","partition":0}} '
            'payload: {"version":"1","data":{"offset":2,"metadata":"",'
            '"commitTimestamp":1479457455691,"expireTimestamp":1479543855691}}') in out
    code, out, _err = run("dump", "--offsets-decoder", "--json", str(seg))
    recs = [json.loads(x) for x in out.splitlines() if '"type":"record"' in x]
    assert len(recs) == 860 and recs[1]["decodedKey"].startswith('{"type":"1"')


def test_keyless_record_is_a_problem_and_decoders_exclude_each_other(tmp_path):
    d = tmp_path / "__transaction_state-0"
    d.mkdir()
    t = pa.table({"key": pa.array([cb.txn_key("t1"), None], pa.binary()),
                  "value": pa.array([None, b"x"], pa.binary())})
    (d / "00000000000000000000.log").write_bytes(encode(t))
    code, out, err = run("dump", "--transaction-log-decoder", str(d / "00000000000000000000.log"))
    assert code == 1
    assert 'key: {"type":"0","data":{"transactionalId":"t1"}} payload: <DELETE>' in out
    assert "missing key" in err and "offset 1" in err
    code, _out, err = run("dump", "--offsets-decoder", "--transaction-log-decoder", "x.log")
    assert code == 2                    # argparse: not allowed together


def test_remote_log_metadata_decoder_skips_a_value_kafka_rejects(tmp_path):
    """A value that is no remote-log-metadata record (two bytes) prints Kafka's own
    "Error at offset N, skipping." as its payload, and the dump goes on (exit 0)."""
    from tests.log.logbuilder import LogDirBuilder, rec
    b = LogDirBuilder(tmp_path / "logs")
    b.partition("__remote_log_metadata", 0).append([rec(None, b"\x00\x00")])
    b.write()
    seg = b.roots[0] / "__remote_log_metadata-0" / "00000000000000000000.log"
    code, out, err = run("dump", "--remote-log-metadata-decoder", str(seg))
    assert code == 0, err
    assert "| offset: 0 " in out and "payload: Error at offset 0, skipping." in out, out


def test_cluster_metadata_and_share_decoders_are_accepted(tmp_path):
    from tests.kafka.test_dump_parity import metadata_records, share_records
    from tests.log.logbuilder import LogDirBuilder
    b = LogDirBuilder(tmp_path / "logs")
    b.partition("__cluster_metadata", 0).append(metadata_records())
    b.partition("__share_group_state", 0).append(share_records())
    b.write()
    seg = b.roots[0] / "__cluster_metadata-0" / "00000000000000000000.log"
    code, out, _ = run("dump", "--cluster-metadata-decoder", str(seg))
    assert code == 0 and 'payload: {"type":"CLIENT_QUOTA_RECORD","version":0,' in out
    assert '"value":1048576.0' in out and '"value":2.5E10' in out
    assert "Unknown metadata id 99" in out
    seg = b.roots[0] / "__share_group_state-0" / "00000000000000000000.log"
    code, out, _ = run("dump", "--share-group-state-decoder", str(seg))
    assert code == 0 and 'key: {"type":"0","data":{"groupId":"sg",' in out
