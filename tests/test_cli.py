"""The ``kafkalog`` command on real broker log dirs and on logs built by tests/log's builder.

``verify`` must find every planted fault with its file and byte position and report
nothing on clean logs; ``dump`` and ``inspect --json`` must give the numbers the fixtures'
MANIFEST.md (computed with kafka-python) and the builder's ground truth give. The CLI is
run in-process through ``main(argv)``; one test runs the installed console script."""
from __future__ import annotations

import io
import json
import struct
import subprocess
import sys
from pathlib import Path

import crc32c
import pytest

from spark_kafkalog.cli import Progress, format_table, main

from .log.logbuilder import LogDirBuilder, encode_v2_batch, segment_name
from .log.test_read import TOPIC, _records, build_rich

CLEAN_REAL_ROOTS = ("donaldy-kafka-2.7.1", "iechenyb-data", "kafka-0.10-magic1",
                    "niloufar-ldi-poc", "seanorth-kafka-server")
INVALID_CRC = "fetch2.mytopic.nocompression.invalid_crc.kafka.0900"


def run(*argv):
    out, err = io.StringIO(), io.StringIO()
    code = main([str(a) for a in argv], stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def run_json(*argv):
    code, out, err = run(*argv, "--json")
    return code, json.loads(out)


def dump_json_lines(*argv):
    code, out, err = run("dump", "--json", *argv)
    return code, [json.loads(line) for line in out.splitlines()]


def seg_file(d: Path, base: int, suffix: str) -> Path:
    return d / segment_name(base, suffix)


# ---- verify: real broker files -----------------------------------------------------------

@pytest.mark.parametrize("root", CLEAN_REAL_ROOTS)
def test_verify_real_broker_log_dirs_are_clean(real_broker, root):
    code, doc = run_json("verify", real_broker / root)
    assert code == 0, doc["findings"]
    assert doc["ok"] and doc["findings"] == [] and doc["partitions"] >= 1


def test_verify_real_broker_deep_is_clean(real_broker):
    code, doc = run_json("verify", "--deep", *(real_broker / r for r in CLEAN_REAL_ROOTS))
    assert code == 0, doc["findings"]
    # every data record of the manifest's partitions was decoded
    assert doc["records"] == 3 + 2 + 3 + 5 + 3 + 0 + 28162 + 21211 + 860 + 204 + 5 + 0 + 3 \
        + 4928 + 13 + 69 + 9


def test_verify_reports_the_kafka_rust_invalid_crc_partition(real_broker):
    code, doc = run_json("verify", real_broker / "kafka-rust-testdata")
    assert code == 1 and not doc["ok"]
    [f] = doc["findings"]
    assert (f["severity"], f["kind"], f["topic"], f["partition"]) == \
        ("error", "corrupt", INVALID_CRC, 0)
    assert f["path"].endswith(f"{INVALID_CRC}-0/00000000000000000000.log")
    assert f["position"] == 0 and f["offset"] == 0
    assert "CRC-32 mismatch" in f["message"] and "0x58585858" in f["message"]
    # the other five partitions, named one by one, are clean
    clean = [real_broker / "kafka-rust-testdata" / f"{t}-0" for t in (
        "fetch1.mytopic.1p.gzip.kafka.0821", "fetch1.mytopic.1p.nocompression.kafka.0821",
        "fetch1.mytopic.1p.snappy.kafka.0821", "fetch1.mytopic.1p.snappy.kafka.0822",
        "fetch2.mytopic.nocompression.kafka.0900")]
    code, doc = run_json("verify", *clean)
    assert code == 0 and doc["partitions"] == 5 and doc["records"] == 4 * 42 + 1


def test_verify_text_output_names_file_and_position(real_broker):
    code, out, err = run("verify", real_broker / "kafka-rust-testdata")
    assert code == 1
    assert out.startswith(f"ERROR    {INVALID_CRC}-0: corrupt: CRC-32 mismatch")
    assert f"{INVALID_CRC}-0/00000000000000000000.log, position 0, offset 0" in out
    assert "1 error, 0 warnings" in out
    assert "\r" not in err                  # no progress bar: stderr is not a terminal


def test_console_script_runs_verify(real_broker):
    script = Path(sys.executable).parent / "kafkalog"
    if not script.exists():
        pytest.skip(f"console script not installed at {script} (pip install -e .)")
    proc = subprocess.run([str(script), "verify", "--json",
                           str(real_broker / "kafka-rust-testdata")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr
    doc = json.loads(proc.stdout)
    assert [f["topic"] for f in doc["findings"]] == [INVALID_CRC]
    proc = subprocess.run([str(script), "verify", str(real_broker / "seanorth-kafka-server")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "0 errors, 0 warnings" in proc.stdout
    assert proc.stderr == ""


# ---- verify: planted faults ----------------------------------------------------------------

@pytest.fixture
def rich(tmp_path):
    b, p = build_rich(tmp_path / "logs", snapshot=True)
    return b, p, b.roots[0] / f"{TOPIC}-0"


def verify(root, *extra):
    return run_json("verify", *extra, root)


def only(findings, kind):
    got = [f for f in findings if f["kind"] == kind]
    assert got, findings
    return got


def test_verify_clean_built_logs(tmp_path):
    b, p = build_rich(tmp_path / "a", preallocate=4096, snapshot=True)
    code, doc = verify(b.roots[0], "--deep", "--strict")
    assert code == 0 and doc["findings"] == []
    assert doc["batches"] == len(p.batches) and doc["records"] == len(p.rows)
    # without .txnindex files the aborts are still in the log's markers: warnings only
    b2, p2 = build_rich(tmp_path / "b", txnindex=False)
    code, doc = verify(b2.roots[0])
    assert code == 0 and doc["errors"] == 0
    aborted = [t for t in p2.txns if t.committed is False]
    assert sorted((f["kind"], f["offset"]) for f in doc["findings"]) == \
        [("txnindex", t.marker_offset) for t in aborted]
    assert verify(b2.roots[0], "--strict")[0] == 1
    # JBOD: one topic over two log dirs
    j = LogDirBuilder(tmp_path / "d1", tmp_path / "d2")
    for q in range(4):
        jp = j.partition(TOPIC, q, root=q % 2)
        jp.append(_records(5, b"p%d" % q), compression="zstd")
        jp.roll()
        jp.append(_records(3, b"q%d" % q))
        jp.high_watermark = jp.log_end_offset
    j.write()
    code, doc = run_json("verify", tmp_path / "d1", tmp_path / "d2")
    assert code == 0 and doc["partitions"] == 4 and doc["findings"] == []


def test_verify_flipped_byte_mid_segment(rich):
    b, p, d = rich
    seg = p.segments[1][0]
    victim = p.segment_batches(seg)[1]
    path = seg_file(d, seg, ".log")
    data = bytearray(path.read_bytes())
    data[victim.position + 30] ^= 0x5A
    path.write_bytes(bytes(data))
    code, doc = verify(b.roots[0])
    assert code == 1
    [f] = doc["findings"]
    assert (f["severity"], f["kind"], f["path"], f["position"], f["offset"]) == \
        ("error", "corrupt", str(path), victim.position, victim.base_offset)
    assert "CRC-32C mismatch" in f["message"]


def test_verify_torn_tail_is_a_warning_unless_strict(rich):
    b, p, d = rich
    path = seg_file(d, p.segments[-1][0], ".log")
    size = path.stat().st_size
    batch = encode_v2_batch([(0, 1_700_000_999_000, b"k", b"v" * 200, [])],
                            base_offset=p.log_end_offset)
    with open(path, "ab") as f:
        f.write(batch[:len(batch) // 2])         # the crash cut the last append short
    code, doc = verify(b.roots[0])
    assert code == 0 and doc["ok"] and doc["warnings"] == 1
    [f] = doc["findings"]
    assert (f["severity"], f["kind"], f["path"], f["position"]) == \
        ("warning", "torn_tail", str(path), size)
    code, doc = verify(b.roots[0], "--strict")
    assert code == 1 and doc["errors"] == 1
    code, out, _ = run("verify", b.roots[0])
    assert code == 0 and out.startswith("WARNING  ") and "--strict fails on them" in out


def test_verify_batch_cut_short_in_a_rolled_segment_is_an_error(rich):
    b, p, d = rich
    path = seg_file(d, p.segments[0][0], ".log")
    last = p.segment_batches(p.segments[0][0])[-1]
    with open(path, "r+b") as f:
        f.truncate(last.position + last.size - 3)
    code, doc = verify(b.roots[0])
    assert code == 1
    f = only(doc["findings"], "corrupt")[0]
    assert (f["severity"], f["path"], f["position"]) == ("error", str(path), last.position)
    assert "not the last" in f["message"]


def test_verify_garbage_between_batches(rich):
    b, p, d = rich
    seg = p.segments[1][0]
    at = p.segment_batches(seg)[2].position
    path = seg_file(d, seg, ".log")
    data = path.read_bytes()
    path.write_bytes(data[:at] + b"\x07" * 37 + data[at:])
    code, doc = verify(b.roots[0])
    assert code == 1
    [f] = only(doc["findings"], "corrupt")
    assert (f["severity"], f["path"], f["position"], f["offset"]) == \
        ("error", str(path), at, None)
    assert "37 bytes" in f["message"]
    # the shifted batches also make the segment's index lie: reported, with its entry
    assert all(x["severity"] == "error" for x in doc["findings"])


def test_verify_offsets_going_backwards(rich):
    b, p, d = rich
    seg = p.segments[0][0]
    batches = p.segment_batches(seg)
    victim = batches[3]
    path = seg_file(d, seg, ".log")
    data = bytearray(path.read_bytes())
    struct.pack_into(">q", data, victim.position, batches[1].base_offset)   # CRC-free field
    path.write_bytes(bytes(data))
    code, doc = verify(b.roots[0])
    assert code == 1
    [f] = only(doc["findings"], "corrupt")
    assert (f["path"], f["position"], f["offset"]) == \
        (str(path), victim.position, batches[1].base_offset)
    assert "offsets going backwards" in f["message"]


def test_verify_index_entry_past_the_log(rich):
    b, p, d = rich
    seg = p.segments[0][0]
    idx = seg_file(d, seg, ".index")
    data = idx.read_bytes()
    n = len(data) // 8
    idx.write_bytes(data + struct.pack(">ii", p.segment_batches(seg)[-1].last_offset - seg,
                                       10 ** 6))
    code, doc = verify(b.roots[0])
    assert code == 1
    [f] = doc["findings"]
    assert (f["kind"], f["path"], f["position"]) == ("index", str(idx), n * 8)
    assert "past the end of the log" in f["message"]


def test_verify_index_entry_at_a_non_boundary(rich):
    b, p, d = rich
    seg = p.segments[0][0]
    idx = seg_file(d, seg, ".index")
    data = bytearray(idx.read_bytes())
    rel, pos = struct.unpack_from(">ii", data, 8)
    struct.pack_into(">ii", data, 8, rel, pos + 1)
    idx.write_bytes(bytes(data))
    code, doc = verify(b.roots[0])
    assert code == 1
    [f] = doc["findings"]
    assert (f["kind"], f["path"], f["position"], f["offset"]) == \
        ("index", str(idx), 8, seg + rel)
    assert f"position {pos + 1}, which is not a batch start" in f["message"]


def test_verify_index_entry_beyond_the_segment(rich):
    """An entry whose position is a real batch but whose offset is past the log end:
    a reader seeking that offset would be sent into the segment."""
    b, p, d = rich
    seg = p.segments[-1][0]
    idx = seg_file(d, seg, ".index")
    data = bytearray(idx.read_bytes())
    n = len(data) // 8
    assert n >= 1
    struct.pack_into(">i", data, (n - 1) * 8, p.log_end_offset + 5 - seg)
    idx.write_bytes(bytes(data))
    code, doc = verify(b.roots[0])
    assert code == 1
    [f] = doc["findings"]
    assert (f["kind"], f["path"], f["position"], f["offset"]) == \
        ("index", str(idx), (n - 1) * 8, p.log_end_offset + 5)
    assert "beyond the segment's last offset" in f["message"]


def test_verify_time_index_out_of_order(rich):
    b, p, d = rich
    seg = p.segments[0][0]
    tidx = seg_file(d, seg, ".timeindex")
    data = bytearray(tidx.read_bytes())
    first_ts = struct.unpack_from(">q", data, 0)[0]
    struct.pack_into(">q", data, 12, first_ts - 5)
    tidx.write_bytes(bytes(data))
    code, doc = verify(b.roots[0])
    assert code == 1
    [f] = doc["findings"]
    assert (f["kind"], f["path"], f["position"]) == ("timeindex", str(tidx), 12)
    assert "out of order" in f["message"]


@pytest.mark.parametrize("name", ["replication-offset-checkpoint",
                                  "log-start-offset-checkpoint",
                                  "recovery-point-offset-checkpoint"])
def test_verify_checkpoint_past_log_end(rich, name):
    b, p, d = rich
    path = b.roots[0] / name
    text = f"0\n2\nother-topic 3 5\n{TOPIC} 0 {p.log_end_offset + 10}\n"
    path.write_text(text)
    code, doc = verify(b.roots[0])
    assert code == 1
    [f] = only(doc["findings"], "checkpoint")
    assert (f["severity"], f["path"], f["offset"]) == \
        ("error", str(path), p.log_end_offset + 10)
    assert f["position"] == text.index(TOPIC)          # the byte position of its line
    assert f"past the log end offset {p.log_end_offset}" in f["message"]


def test_verify_leader_epoch_checkpoint_and_snapshot(rich):
    b, p, d = rich
    (d / "leader-epoch-checkpoint").write_text("0\n2\n1 0\n0 50\n")
    snap = next(d.glob("*.snapshot"))
    data = bytearray(snap.read_bytes())
    data[-1] ^= 1
    snap.write_bytes(bytes(data))
    code, doc = verify(b.roots[0])
    assert code == 1
    [epoch] = only(doc["findings"], "checkpoint")
    assert epoch["path"] == str(d / "leader-epoch-checkpoint") and epoch["position"] == 8
    assert "must both increase" in epoch["message"]
    [s] = only(doc["findings"], "snapshot")
    assert s["path"] == str(snap) and "CRC mismatch" in s["message"]


def test_verify_txnindex_that_lies(rich):
    b, p, d = rich
    seg = p.segments[1][0]
    path = seg_file(d, seg, ".txnindex")
    data = bytearray(path.read_bytes())
    struct.pack_into(">q", data, 2 + 8 + 8, seg + 3)    # lastOffset: no ABORT marker there
    path.write_bytes(bytes(data))
    code, doc = verify(b.roots[0])
    assert code == 1
    f = only(doc["findings"], "txnindex")[0]
    assert f["path"] == str(path) and f["offset"] == seg + 3


def test_verify_abort_marker_missing_from_txnindex(rich):
    b, p, d = rich
    t3 = p.txns[2]
    assert t3.committed is False
    seg = max(base for base, _ in p.segments if base <= t3.marker_offset)
    path = seg_file(d, seg, ".txnindex")
    path.write_bytes(b"")                        # the entry for t3 is lost
    marker = next(bi for bi in p.batches if bi.base_offset == t3.marker_offset)
    code, doc = verify(b.roots[0])
    assert code == 1
    [f] = doc["findings"]
    assert (f["severity"], f["kind"], f["path"], f["position"], f["offset"]) == \
        ("error", "txnindex", str(seg_file(d, seg, ".log")), marker.position,
         t3.marker_offset)


def test_verify_deep_finds_payloads_that_checksum_but_do_not_decode(rich):
    b, p, d = rich
    seg = p.segments[0][0]
    victim = p.segment_batches(seg)[1]            # the gzip batch
    path = seg_file(d, seg, ".log")
    data = bytearray(path.read_bytes())
    start = victim.position
    data[start + 61 + 20] ^= 0xFF                 # inside the compressed payload
    # a producer bug, not disk damage: the CRC was computed over the bad payload
    struct.pack_into(">I", data, start + 17,
                     crc32c.crc32c(bytes(data[start + 21:start + victim.size])))
    path.write_bytes(bytes(data))
    code, doc = verify(b.roots[0])
    assert code == 0                             # the header scan cannot see it
    code, doc = verify(b.roots[0], "--deep")
    assert code == 1
    [f] = doc["findings"]
    assert (f["kind"], f["path"], f["position"], f["offset"]) == \
        ("corrupt", str(path), start, victim.base_offset)
    # dump --records shows every other batch's records and says which batch is bad
    code, lines = dump_json_lines("--records", path)
    assert code == 1
    [problem] = [x for x in lines if x["type"] == "problem"]
    assert (problem["position"], problem["offset"]) == (start, victim.base_offset)
    got = [x["offset"] for x in lines if x["type"] == "record"]
    assert got == [r.offset for r in p.rows if r.offset < p.segments[1][0]
                   and not victim.base_offset <= r.offset <= victim.last_offset]


def test_verify_usage_errors(tmp_path):
    code, out, err = run("verify", tmp_path / "missing")
    assert code == 2 and "no such log directory" in err
    code, out, err = run("verify", "--fs-option", "s3.nope=1", tmp_path)
    assert code == 2 and "s3.nope" in err
    code, out, err = run("verify", "--fs-option", "novalue", tmp_path)
    assert code == 2 and "KEY=VALUE" in err
    code, out, err = run("verify")
    assert code == 2



# a mistyped flag of each subcommand: (argv, the flag suggested)
TYPOS = {
    "inspect": (["--segmnts"], "--segments"),
    "dump": (["--print-data-lg"], "--print-data-log"),
    "verify": (["--stirct"], "--strict"),
    "report": (["--no-verfy"], "--no-verify"),
    "cat": (["--fromat", "%s"], "--format"),
}


@pytest.mark.parametrize("command", sorted(TYPOS))
def test_a_mistyped_flag_gets_the_subcommands_usage_and_a_suggestion(tmp_path, command):
    words, suggestion = TYPOS[command]
    code, out, err = run(command, tmp_path, *words)
    assert code == 2 and out == ""
    lines = err.splitlines()
    # the subcommand's usage, not the top-level one (which lists the commands)
    assert lines[0].startswith(f"usage: kafkalog {command} ")
    assert "COMMAND" not in err and "{inspect" not in err
    assert f"kafkalog {command}: error: unrecognized arguments: {' '.join(words)}" in lines
    hint = next(x for x in lines if "did you mean" in x)
    assert hint.startswith(f"kafkalog {command}: did you mean {suggestion}")
    # the flag before the path: the same
    code, _, err2 = run(command, *words, tmp_path)
    assert code == 2 and err2.startswith(f"usage: kafkalog {command} ")
    assert f"did you mean {suggestion}" in err2


def test_another_subcommands_flag_is_not_suggested(tmp_path):
    # --manifest is verify's: inspect says it does not know it and suggests nothing
    code, _, err = run("inspect", tmp_path, "--manifest", "m")
    assert code == 2 and err.startswith("usage: kafkalog inspect ")
    assert "unrecognized arguments: --manifest m" in err and "did you mean" not in err
    # a bad value is the subcommand's usage too
    code, _, err = run("dump", "--max-bytes", "abc", tmp_path)
    assert code == 2 and err.startswith("usage: kafkalog dump ")
    assert "argument --max-bytes" in err


def test_a_jobs_mistyped_flag_gets_a_suggestion(capsys):
    # a job's usage error is one line (spark-submit logs): the suggestion is on it, also
    # when the typo makes a required flag missing
    assert main(["job", "copy_topic", "--path", "p", "--outptu", "o"]) == 2
    line, = capsys.readouterr().err.splitlines()
    assert line.startswith("copy_topic: UsageError: the following arguments are "
                           "required: --output")
    assert "--outptu: did you mean --output" in line


# ---- inspect ------------------------------------------------------------------------------

# partition dir -> (segments, batches, data records, log end offset, min ts, max ts, codecs)
REAL_INSPECT = {
    "donaldy-kafka-2.7.1/__consumer_offsets-39": (2, 4, 5, 20, 1685796189987, 1686446865837,
                                                  ["none"]),
    "donaldy-kafka-2.7.1/myTopic-0": (1, 0, 0, 38, None, None, []),
    "iechenyb-data/string-key-0": (1, 28068, 28162, 28162, 1560826431818, 1560846226580,
                                   ["none"]),
    "kafka-0.10-magic1/TEST-TOPIC-0": (1, 21211, 21211, 21211, 1479456751844, 1479457144513,
                                       ["none"]),
    "kafka-0.10-magic1/__consumer_offsets-40": (1, 860, 860, 860, 1479457454628,
                                                1479459073222, ["none"]),
    "kafka-rust-testdata/fetch1.mytopic.1p.gzip.kafka.0821-0": (1, 1, 42, 42, None, None,
                                                                ["gzip"]),
    "kafka-rust-testdata/fetch1.mytopic.1p.snappy.kafka.0822-0": (1, 1, 42, 42, None, None,
                                                                  ["snappy"]),
    "niloufar-ldi-poc/__cluster_metadata-0": (1, 4814, 4928, 4929, 1769791434545,
                                              1769793835851, ["none"]),
    "niloufar-ldi-poc/Retry.TestTopicPatient-0": (1, 0, 0, 0, None, None, []),
    "seanorth-kafka-server/some-topic-0": (1, 9, 9, 9, 1641710433813, 1641716403222,
                                           ["snappy"]),
}


@pytest.mark.parametrize("name", sorted(REAL_INSPECT))
def test_inspect_json_real_broker_numbers(real_broker, name):
    segs, batches, records, leo, min_ts, max_ts, codecs = REAL_INSPECT[name]
    code, doc = run_json("inspect", real_broker / name)        # a partition dir
    assert code == 0
    [s] = doc["partitions"]
    assert s["path"] == str(real_broker / name)
    assert (s["segment_count"], s["batches"], s["records"], s["log_end_offset"]) == \
        (segs, batches, records, leo)
    assert (s["min_timestamp"], s["max_timestamp"], s["codecs"]) == (min_ts, max_ts, codecs)
    assert s["problems"] == []


def test_inspect_json_high_watermark_and_log_start(real_broker):
    code, doc = run_json("inspect", real_broker / "kafka-0.10-magic1",
                         real_broker / "donaldy-kafka-2.7.1")
    assert code == 0
    parts = {(s["topic"], s["partition"]): s for s in doc["partitions"]}
    assert len(parts) == 10 and len(doc["roots"]) == 2
    co = parts[("__consumer_offsets", 40)]
    assert (co["log_start_offset"], co["high_watermark"], co["last_stable_offset"],
            co["log_end_offset"]) == (0, 856, 856, 860)      # HW lags the log end
    my = parts[("myTopic", 0)]
    assert (my["log_start_offset"], my["high_watermark"], my["log_end_offset"],
            my["size_bytes"]) == (38, 38, 38, 0)
    assert my["snapshots"] == [38]
    assert parts[("__consumer_offsets", 17)]["checkpoints"]["cleaner-offset-checkpoint"] \
        is not None
    assert [x["base_offset"] for x in parts[("__consumer_offsets", 39)]["segments"]] == [0, 18]
    code, doc = run_json("inspect", "--topic", "foo", real_broker / "kafka-0.10-magic1")
    assert [(s["topic"], s["records"]) for s in doc["partitions"]] == [("foo", 204)]


def test_inspect_json_built_log(tmp_path):
    b, p = build_rich(tmp_path / "logs", snapshot=True)
    code, doc = run_json("inspect", b.roots[0])
    assert code == 0
    [s] = doc["partitions"]
    assert s["topic"] == TOPIC and s["partition"] == 0
    assert (s["log_start_offset"], s["high_watermark"], s["last_stable_offset"],
            s["log_end_offset"]) == (11, p.high_watermark, p.txns[3].first_offset,
                                     p.log_end_offset)
    assert s["records"] == len(p.rows) and s["batches"] == len(p.batches)
    assert s["control_batches"] == sum(bi.control for bi in p.batches)
    assert s["codecs"] == ["gzip", "lz4", "none", "snappy", "zstd"]
    assert s["size_bytes"] == sum(len(buf) for _, buf in p.segments)
    assert [x["base_offset"] for x in s["segments"]] == [base for base, _ in p.segments]
    assert [x["records"] for x in s["segments"]] == [
        sum(1 for r in p.rows if base <= r.offset < end) for base, end in
        zip([b_ for b_, _ in p.segments], [b_ for b_, _ in p.segments][1:] + [1 << 62])]
    data = [bi for bi in p.batches if not bi.control]
    assert s["max_timestamp"] == max(bi.max_timestamp for bi in data)
    assert s["segments"][1]["aborted_txns"] == 1
    # --no-scan: the offsets without reading every batch
    code, fast = run_json("inspect", "--no-scan", b.roots[0])
    [f] = fast["partitions"]
    assert (f["log_start_offset"], f["high_watermark"], f["last_stable_offset"],
            f["log_end_offset"]) == (s["log_start_offset"], s["high_watermark"],
                                     s["last_stable_offset"], s["log_end_offset"])
    assert f["records"] is None and f["codecs"] is None


def test_inspect_table_for_people(real_broker):
    code, out, err = run("inspect", "--segments", real_broker / "kafka-0.10-magic1")
    assert code == 0
    lines = out.splitlines()
    header = next(line for line in lines if line.startswith("TOPIC"))
    row = next(line for line in lines if line.startswith("__consumer_offsets"))
    assert header.split()[:4] == ["TOPIC", "PART", "LOG", "START"]
    assert row.split()[:6] == ["__consumer_offsets", "40", "0", "856", "856", "860"]
    assert "2016-11-18T08:51:13.222Z" in row
    # columns line up: the HW value ends where the HW header ends
    assert row.index("856") + 3 == header.index("HW") + 2
    assert "4 partitions, 4 segments" in out and "22,280 records" in out
    assert "  BASE OFFSET" in out


# ---- dump -----------------------------------------------------------------------------------

def test_dump_real_segment_and_its_indexes(real_broker):
    d = real_broker / "niloufar-ldi-poc" / "__consumer_offsets-6"
    code, out, err = run("dump", d / "00000000000000000000.log")
    assert code == 0 and err == ""
    batches = [line for line in out.splitlines() if line.startswith("baseOffset:")]
    assert len(batches) == 13
    assert [int(line.split()[1]) for line in batches] == list(range(13))
    # the index entries the manifest cross-checked: offset 3 at 4730, offset 7 at 9571
    by_offset = {int(line.split()[1]): line for line in batches}
    assert " position: 4730 " in by_offset[3] and " position: 9571 " in by_offset[7]
    assert all("magic: 2 compresscodec: none" in line and line.endswith("isvalid: true")
               for line in batches)
    code, out, err = run("dump", d / "00000000000000000000.index",
                         d / "00000000000000000000.timeindex")
    assert code == 0 and err == ""
    body = [line for line in out.splitlines() if not line.startswith("Dumping")]
    assert body == ["offset: 3 position: 4730", "offset: 7 position: 9571",
                    "timestamp: 1769791783399 offset: 3", "timestamp: 1769792518093 offset: 7",
                    "timestamp: 1769793578176 offset: 12"]


def test_dump_records_of_a_kraft_metadata_log(real_broker):
    path = real_broker / "niloufar-ldi-poc" / "__cluster_metadata-0" / \
        "00000000000000000000.log"
    code, lines = dump_json_lines("--records", path)
    assert code == 0
    batches = [x for x in lines if x["type"] == "batch"]
    records = [x for x in lines if x["type"] == "record"]
    assert len(batches) == 4814
    assert sum(1 for x in records if not x.get("control")) == 4928
    assert batches[0]["isControl"] and batches[0]["partitionLeaderEpoch"] == 1
    assert records[0]["controlType"] == "LeaderChangeMessage" and records[0]["offset"] == 0
    assert records[0]["decoded"].startswith('LeaderChange: {"version":0,"leaderId":')
    assert [x["offset"] for x in records] == list(range(4929))
    assert all(x["keySize"] == -1 for x in records[1:])          # null keys
    assert batches[-1]["lastOffset"] == 4928


def test_dump_legacy_message_sets(real_broker):
    gz = real_broker / "kafka-rust-testdata" / "fetch1.mytopic.1p.gzip.kafka.0821-0" / \
        "00000000000000000000.log"
    code, out, err = run("dump", "--records", "--verify-crc", gz)
    assert code == 0
    lines = out.splitlines()
    [batch] = [line for line in lines if line.startswith("offset:")]
    assert batch.startswith("offset: 41 position: 0 NoTimestampType: -1 size: 6025 magic: 0 "
                            "compresscodec: gzip")
    recs = [line for line in lines if line.startswith("| offset:")]
    assert [int(line.split()[2]) for line in recs] == list(range(42))
    m1 = real_broker / "kafka-0.10-magic1" / "topic1-0" / "00000000000000000000.log"
    code, out, err = run("dump", "--records", "--print-data", m1)
    recs = [line for line in out.splitlines() if line.startswith("| offset:")]
    assert recs[0] == ("| offset: 0 CreateTime: 1479457582140 keySize: -1 valueSize: 9 "
                       "isValid: true crc: 385527893 payload: Message_1")
    assert len(recs) == 5


def test_dump_invalid_crc(real_broker):
    path = real_broker / "kafka-rust-testdata" / f"{INVALID_CRC}-0" / "00000000000000000000.log"
    code, out, err = run("dump", "--records", path)
    assert code == 0                            # shown, as DumpLogSegments shows it
    assert "crc: 1482184792 isvalid: false" in out         # 0x58585858, "XXXX"
    assert "| offset: 0 NoTimestampType: -1" in out
    code, out, err = run("dump", "--verify-crc", path)
    assert code == 1
    assert err.strip().endswith(f"({path}, position 0, offset 0)")
    assert err.count("problem:") == 1


def test_dump_snapshot_and_checkpoint_files(real_broker):
    snap = real_broker / "donaldy-kafka-2.7.1" / "myTopic-0" / "00000000000000000038.snapshot"
    code, lines = dump_json_lines(snap)
    assert code == 0
    entries = [x for x in lines if x["type"] == "snapshot_entry"]
    assert [x["producerId"] for x in entries] == [4001, 4002, 4003]
    assert entries[1]["lastOffset"] == 23 and entries[1]["currentTxnFirstOffset"] is None
    ckpt = real_broker / "kafka-0.10-magic1" / "replication-offset-checkpoint"
    code, out, err = run("dump", ckpt)
    assert code == 0 and "topic: __consumer_offsets partition: 40 offset: 856" in out
    epochs = real_broker / "niloufar-ldi-poc" / "__cluster_metadata-0" / \
        "leader-epoch-checkpoint"
    code, out, err = run("dump", epochs)
    assert out.splitlines()[1:] == ["epoch: 1 startOffset: 0"]
    boot = real_broker / "niloufar-ldi-poc" / "bootstrap.checkpoint"
    code, out, err = run("dump", "--records", boot)
    assert code == 0 and "KRaft bootstrap snapshot" in out
    # as Kafka 4.4 prints a KRaft snapshot's control records
    assert 'SnapshotHeader {"version":0,"lastContainedLogTimestamp":' in out
    assert 'SnapshotFooter {"version":0}' in out
    code, out, err = run("dump", real_broker / "niloufar-ldi-poc" / "meta.properties")
    assert code == 2 and "cannot dump" in err


def test_dump_built_segment_with_transactions(tmp_path):
    b, p = build_rich(tmp_path / "logs", preallocate=4096)
    d = b.roots[0] / f"{TOPIC}-0"
    seg = p.segments[1][0]
    code, lines = dump_json_lines("--records", seg_file(d, seg, ".log"))
    assert code == 0
    batches = [x for x in lines if x["type"] == "batch"]
    records = [x for x in lines if x["type"] == "record"]
    truth = p.segment_batches(seg)
    assert [(x["baseOffset"], x["lastOffset"], x["position"], x["size"]) for x in batches] == \
        [(t.base_offset, t.last_offset, t.position, t.size) for t in truth]
    assert [x["isControl"] for x in batches] == [t.control for t in truth]
    markers = [x for x in records if x.get("control")]
    assert [(m["offset"], m["endTxnMarker"], m["coordinatorEpoch"]) for m in markers] == \
        [(t.marker_offset, "ABORT", 0) for t in p.txns if t.marker_offset is not None
         and seg <= t.marker_offset < p.segments[2][0]]
    data_offsets = [x["offset"] for x in records if not x.get("control")]
    assert data_offsets == [r.offset for r in p.rows if seg <= r.offset < p.segments[2][0]]
    txn = [x for x in batches if x["isTransactional"] and not x["isControl"]]
    assert {x["producerId"] for x in txn} == {101, 202}
    # text form: Kafka's field order
    code, out, err = run("dump", "--records", seg_file(d, seg, ".log"))
    marker = next(line for line in out.splitlines() if "endTxnMarker" in line)
    assert marker.endswith("headerKeys: [] endTxnMarker: ABORT coordinatorEpoch: 0")
    first = next(line for line in out.splitlines() if line.startswith("baseOffset"))
    assert first.split()[::2][:12] == [
        "baseOffset:", "lastOffset:", "count:", "baseSequence:", "lastSequence:",
        "producerId:", "producerEpoch:", "partitionLeaderEpoch:", "isTransactional:",
        "isControl:", "deleteHorizonMs:", "position:"]
    # headers of the first segment's records
    code, out, err = run("dump", "--records", seg_file(d, p.segments[0][0], ".log"))
    assert "headerKeys: [h,n]" in out
    # the txn index and the preallocated active index
    code, out, err = run("dump", seg_file(d, seg, ".txnindex"))
    t1 = p.txns[0]
    assert f"version: 0 producerId: 101 firstOffset: {t1.first_offset} lastOffset: " \
           f"{t1.marker_offset}" in out
    last = p.segments[-1][0]
    code, lines = dump_json_lines(seg_file(d, last, ".index"))
    entries = [x for x in lines if x["type"] == "index_entry"]
    truth = [(bi.last_offset, bi.position) for bi in p.segment_batches(last)]
    assert entries and all((x["offset"], x["position"]) in truth for x in entries)
    assert (seg_file(d, last, ".index").stat().st_size // 8) > len(entries)   # zero tail


def test_dump_reports_damage_with_positions(tmp_path):
    b, p = build_rich(tmp_path / "logs")
    d = b.roots[0] / f"{TOPIC}-0"
    seg = p.segments[1][0]
    at = p.segment_batches(seg)[2].position
    path = seg_file(d, seg, ".log")
    data = path.read_bytes()
    path.write_bytes(data[:at] + b"\x07" * 37 + data[at:])
    code, out, err = run("dump", path)
    assert code == 1
    assert f"skipped 37 bytes up to position {at + 37} ({path}, position {at})" in err
    # every batch is still shown, the ones after the garbage at their shifted positions
    positions = [int(line.split(" position: ")[1].split()[0])
                 for line in out.splitlines() if line.startswith("baseOffset")]
    truth = [t.position if t.position < at else t.position + 37
             for t in p.segment_batches(seg)]
    assert positions == truth
    # an index entry pointing at no batch
    idx = seg_file(d, p.segments[0][0], ".index")
    raw = bytearray(idx.read_bytes())
    rel, pos = struct.unpack_from(">ii", raw, 0)
    struct.pack_into(">ii", raw, 0, rel, pos + 3)
    idx.write_bytes(bytes(raw))
    code, out, err = run("dump", idx)
    assert code == 1 and f"({idx}, position 0, offset {p.segments[0][0] + rel})" in err
    # a torn tail is no problem: Kafka's line on stdout, where it is on stderr
    last = seg_file(d, p.segments[-1][0], ".log")
    with open(last, "ab") as f:
        f.write(b"\x00\x00\x00")
    code, out, err = run("dump", last)
    assert code == 0 and out.endswith(f"Found 3 invalid bytes at the end of {last.name}\n")
    assert "(position " in err


def test_dump_streams_in_windows(tmp_path):
    """A window far smaller than the segment gives the same output (nothing relies on
    reading the segment whole)."""
    b, p = build_rich(tmp_path / "logs")
    path = seg_file(b.roots[0] / f"{TOPIC}-0", p.segments[0][0], ".log")
    big = run("dump", "--records", path)
    small = run("dump", "--records", "--window-bytes", "64", path)
    assert big == small and big[0] == 0


# ---- presentation ---------------------------------------------------------------------------

class _Tty(io.StringIO):
    def isatty(self):
        return True


def test_progress_bar_only_on_a_terminal():
    tty = _Tty()
    bar = Progress(1000, "verify", tty, min_interval=0)
    bar.update(250)
    bar.update(1000)
    bar.close()
    text = tty.getvalue()
    assert "verify [#######" in text and " 25.0%" in text and "100.0%" in text
    assert text.endswith("\r")                  # erased at the end
    plain = io.StringIO()
    bar = Progress(1000, "verify", plain, min_interval=0)
    bar.update(500)
    bar.close()
    assert plain.getvalue() == ""


def test_progress_bar_drawn_during_a_cli_scan(tmp_path):
    b, p = build_rich(tmp_path / "logs")
    out, err = io.StringIO(), _Tty()
    code = main(["verify", str(b.roots[0])], stdout=out, stderr=err)
    assert code == 0 and "verify [" in err.getvalue() and "\r" not in out.getvalue()
    err = _Tty()
    main(["verify", "--no-progress", str(b.roots[0])], stdout=io.StringIO(), stderr=err)
    assert err.getvalue() == ""


def test_format_table_aligns_columns():
    lines = format_table(["A", "NUM"], [["x", 5], ["longer", 12345], ["y", None]], right=[1])
    assert lines == ["A         NUM", "x           5", "longer  12345", "y           -"]


def test_partition_dir_and_root_together(tmp_path):
    b, p = build_rich(tmp_path / "logs")
    extra = LogDirBuilder(tmp_path / "logs")
    q = extra.partition("other", 3)
    q.append(_records(4, b"o"))
    extra.write_checkpoints = False
    extra.write()
    code, doc = run_json("inspect", b.roots[0] / f"{TOPIC}-0")
    assert [(s["topic"], s["partition"]) for s in doc["partitions"]] == [(TOPIC, 0)]
    code, doc = run_json("inspect", b.roots[0], b.roots[0] / "other-3")
    assert [(s["topic"], s["partition"]) for s in doc["partitions"]] == \
        [(TOPIC, 0), ("other", 3)]


# ---- Kafka tool behaviours (issue 20) ------------------------------------------------------

def _small_log(tmp_path: Path):
    """topic ``t``: partition 0 holds 5 records in two batches (binary values, a header,
    a null key), partition 1 holds 2; record timestamps 1000 + offset."""
    from .log.logbuilder import rec

    b = LogDirBuilder(tmp_path / "logs")
    p0 = b.partition("t", 0, base_timestamp=1000)
    p0.append([rec(b"k0", b"\x00\xff\xfe binary"), rec(None, "é ü".encode())])
    p0.append([rec(b"k2", b"v2", headers=[("h", b"\x01\x02")]), rec(b"k3", b"v3"),
               rec(b"k4", None)])
    p1 = b.partition("t", 1, base_timestamp=1000)
    p1.append([rec(b"a", b"x"), rec(b"b", b"y")])
    b.write()
    return b.roots[0], b.roots[0] / "t-0" / segment_name(0, ".log")


def test_version(capsys):
    from spark_kafkalog import __version__
    code, out, err = run("--version")
    assert code == 0
    assert __version__ in capsys.readouterr().out      # argparse prints to sys.stdout


def test_dump_print_data_implies_records(tmp_path):
    _root, seg = _small_log(tmp_path)
    code, out, err = run("dump", "--print-data", seg)
    recs = [line for line in out.splitlines() if line.startswith("| offset:")]
    assert code == 0 and len(recs) == 5
    assert "key: k2 payload: v2" in recs[2]


def test_dump_skips_unknown_files_with_a_note(tmp_path):
    root, seg = _small_log(tmp_path)
    (seg.parent / "notes.txt").write_text("hello")
    files = sorted(seg.parent.iterdir())             # what `dump t-0/*` passes
    code, out, err = run("dump", *files)
    assert code == 0
    assert f"Ignoring unknown file {seg.parent / 'notes.txt'}" in err
    assert f"Dumping {seg}" in out and "baseOffset: 2 lastOffset: 4 count: 3" in out
    # nothing dumpable at all: exit 2
    code, out, err = run("dump", seg.parent / "notes.txt")
    assert code == 2 and "Ignoring unknown file" in err and "none of the files" in err


def test_dump_max_bytes_stops_like_kafka(tmp_path):
    _root, seg = _small_log(tmp_path)
    code, lines = dump_json_lines(seg)
    batches = [x for x in lines if x["type"] == "batch"]
    assert len(batches) == 2
    first_end = batches[0]["position"] + batches[0]["size"]
    for limit, expected in ((first_end, 1), (first_end - 1, 0), (first_end + 1, 1),
                            (seg.stat().st_size, 2)):
        code, lines = dump_json_lines("--max-bytes", limit, seg)
        assert code == 0
        assert len([x for x in lines if x["type"] == "batch"]) == expected, limit
        assert not [x for x in lines if x["type"] == "problem"]
    code, out, err = run("dump", "--max-bytes", first_end, seg)
    assert f"Stopped at --max-bytes {first_end} of {seg.stat().st_size} bytes" in err
    assert "invalid bytes" not in err               # the cut is not a torn tail
    code, out, err = run("dump", "--max-bytes", "-1", seg)
    assert code == 2


def test_dump_json_keeps_binary_data_as_base64(tmp_path):
    import base64
    _root, seg = _small_log(tmp_path)
    code, lines = dump_json_lines("--print-data", seg)
    recs = [x for x in lines if x["type"] == "record"]
    assert code == 0 and len(recs) == 5
    assert base64.b64decode(recs[0]["payload"]) == b"\x00\xff\xfe binary"
    assert recs[1]["key"] is None and base64.b64decode(recs[1]["payload"]) == "é ü".encode()
    assert recs[4]["payload"] is None


@pytest.mark.parametrize("command", ["verify", "inspect"])
def test_nothing_found_exits_non_zero(tmp_path, command):
    empty = tmp_path / "empty"
    empty.mkdir()
    code, out, err = run(command, empty)
    assert code == 2 and "no partitions found" in err
    code, out, err = run(command, tmp_path / "mistyped")
    assert code == 2 and "no such log directory" in err
    root, _seg = _small_log(tmp_path)
    code, out, err = run(command, root, "--topic", "nosuch")
    assert code == 2 and "no partitions of topic nosuch found" in err


def test_counts_are_singular_for_one(tmp_path):
    b = LogDirBuilder(tmp_path / "logs")
    b.partition("t", 0).append(_records(1, b"one"))
    b.write()
    code, out, err = run("verify", b.roots[0])
    assert code == 0
    assert "verified 1 partition, 1 segment, 1 batch, 1 record," in out
    assert ": 0 errors, 0 warnings" in out
    code, out, err = run("inspect", b.roots[0])
    assert "1 partition, 1 segment," in out and ", 1 record\n" in out


def test_verbose_logs_what_it_reads(tmp_path):
    """``-v`` logs what is read on the command's stderr; without it, nothing."""
    root, seg = _small_log(tmp_path)
    code, out, err = run("verify", "-v", root)
    assert code == 0
    assert "2 partitions selected" in err and "verified 2 partitions in" in err
    code, out, err = run("dump", "-v", seg)
    assert f"dumping {seg}" in err
    code, out, err = run("verify", root)
    assert "kafkalog: INFO" not in err and "selected" not in err


def test_cat_offsets_counts_formats_and_json(tmp_path):
    import base64
    root, _seg = _small_log(tmp_path)
    code, out, err = run("cat", root, "-t", "t", "-p", "0", "-o", "2", "-c", "2",
                         "-f", "%p:%o %k=%s %T %h\\n")
    assert code == 0
    assert out == "0:2 k2=v2 1002 h=\x01\x02\n0:3 k3=v3 1003 \n"
    # all partitions, partition by partition; -N is N before the end of each
    code, out, err = run("cat", root, "-t", "t", "-o", "-1", "-f", "%p/%o %K %S\\n")
    assert out == "0/4 2 -1\n1/1 1 1\n"
    code, out, err = run("cat", root, "-t", "t", "--from-time", "1003", "-f", "%o,")
    assert out == "3,4,"                        # partition 1's records are older
    code, out, err = run("cat", root, "-t", "t", "--from-time", "1970-01-01T00:00:01.004Z",
                         "-f", "%o,")
    assert out == "4,"
    code, out, err = run("cat", root, "-t", "t", "-c", "3", "-J")
    docs = [json.loads(line) for line in out.splitlines()]
    assert [(d["partition"], d["offset"]) for d in docs] == [(0, 0), (0, 1), (0, 2)]
    # kcat's envelope: tstype/ts, the broker id, headers only when the record has any
    assert docs[0] == {"topic": "t", "partition": 0, "offset": 0, "tstype": "create",
                       "ts": 1000, "broker": docs[0]["broker"], "key": "k0",
                       "payload": "\x00\ufffd\ufffd binary"}
    assert docs[1]["key"] is None and "headers" not in docs[1]
    assert docs[2]["headers"] == ["h", "\x01\x02"]
    code, out, err = run("cat", root, "-t", "t", "-f", "%x")
    assert code == 2 and "Unsupported formatter: %x" in err
    code, out, err = run("cat", root, "-t", "nosuch")
    assert code == 2


def test_cat_writes_raw_bytes_to_a_pipe(tmp_path):
    root, _seg = _small_log(tmp_path)
    proc = subprocess.run([sys.executable, "-m", "spark_kafkalog.cli", "cat", str(root),
                           "-t", "t", "-p", "0", "-c", "1"], capture_output=True)
    assert proc.returncode == 0 and proc.stdout == b"\x00\xff\xfe binary\n"


def test_cat_count_is_records_not_offsets(tmp_path):
    from .log.logbuilder import rec

    b = LogDirBuilder(tmp_path / "logs")
    p = b.partition("c", 0)                       # a compacted batch: offsets 0, 5, 9
    p.append([rec(b"a", b"1"), rec(b"b", b"2"), rec(b"c", b"3")], offset_deltas=[0, 5, 9])
    b.write()
    code, out, err = run("cat", b.roots[0], "-t", "c", "-c", "2", "-f", "%o:%s ")
    assert code == 0 and out == "0:1 5:2 "
    code, out, err = run("cat", b.roots[0], "-t", "c", "-o", "1", "-f", "%o ")
    assert out == "5 9 "


def test_main_leaves_the_library_logger_as_it_found_it(tmp_path, caplog):
    """A command run in process (a notebook, a test) logs to its own stderr while it runs
    and then puts the ``spark_kafkalog`` logger back: the library's warnings still reach
    the caller's logging afterwards."""
    import logging

    logger = logging.getLogger("spark_kafkalog")
    before = (logger.level, logger.propagate, list(logger.handlers))
    err = io.StringIO()
    assert main(["inspect", str(tmp_path / "missing")], stdout=io.StringIO(), stderr=err) == 2
    assert err.getvalue()
    assert (logger.level, logger.propagate, list(logger.handlers)) == before
    with caplog.at_level(logging.WARNING, logger="spark_kafkalog"):
        logging.getLogger("spark_kafkalog.log.read").warning("data loss in t-0")
    assert "data loss in t-0" in caplog.text
