"""``kafkalog cat`` as kcat's consume mode, on logs we build: format tokens and escapes, -J,
-K/-D/-Z, -s pack formats, -o forms, -c, paths (log dir, partition dir, segment, several
sources, --jbod) and usage errors. Expected bytes follow kcat 1.7's format.c/json.c rules
(the kafka tier compares with kcat itself)."""
from __future__ import annotations

import io
import json
import struct

import pytest

from spark_kafkalog.cli import main
from spark_kafkalog.kcat import parse_delim, parse_format
from spark_kafkalog.format import _text


from .log.logbuilder import LogDirBuilder, rec, segment_name


def cat(*argv):
    raw = io.BytesIO()
    out = io.TextIOWrapper(raw, encoding="utf-8", newline="")
    err = io.StringIO()
    code = main(["cat", *map(str, argv)], stdout=out, stderr=err)
    out.flush()
    return code, raw.getvalue(), err.getvalue()


@pytest.fixture
def logs(tmp_path):
    b = LogDirBuilder(tmp_path / "logs")
    p = b.partition("t", 0, base_timestamp=1000)
    p.append([rec(b"\x00\x00\x00\x07", b"v\x01\"\\/\xc3\xa9\xff\n"),
              rec(None, b"", headers=[("a", b"1"), ("b", None), ("c", b"")])])
    p.append([rec(b"", None), rec(b"k3", b"\x00abc")])
    q = b.partition("t", 1, base_timestamp=2000)
    q.append([rec(b"x", b"y")])
    b.write()
    return b.roots[0]


def test_tokens_and_nulls(logs):
    code, out, _ = cat(logs, "-t", "t", "-p", "0", "-q", "-f", "%o|%k|%s|%K|%S|%T|%h|%t|%p\\n")
    assert code == 0
    assert out.split(b"\n")[:4] == [
        b"0|\x00\x00\x00\x07|v\x01\"\\/\xc3\xa9\xff",     # the value's own newline
        b"|4|9|1000||t|0",
        b"1|||-1|0|1001|a=1,b=NULL,c=|t|0",
        b"2|||0|-1|1002||t|0"]
    code, out, _ = cat(logs, "-t", "t", "-p", "0", "-q", "-Z", "-f", "%k,%s;")
    # -Z: a null and an empty key or value both print NULL (kcat tests the length)
    assert out == b"\x00\x00\x00\x07,v\x01\"\\/\xc3\xa9\xff\n;NULL,NULL;NULL,NULL;k3,\x00abc;"


def test_binary_length_and_escapes(logs):
    # \NNN is C's strtoul with base 0: decimal, or octal after a 0
    code, out, _ = cat(logs, "-t", "t", "-p", "1", "-q", "-f", "%R%s\\x41\\101\\0101\\t\\q%%")
    assert out == struct.pack(">i", 1) + b"yAeA\tq%"
    code, out, _ = cat(logs, "-t", "t", "-p", "1", "-q", "-f", "%s\\x00tail")
    assert out == b"y"                                  # kcat's literal ends at the NUL
    assert parse_delim(b"a\\x1e|\\n") == b"a\x1e|\n"
    assert parse_delim(b"\\x1eb") == b"\xeb"       # strtoul reads every hex digit
    assert parse_format(b"%%%o") == [(_text.OP_STR, b"%"), (_text.OP_OFFSET, b"")]


def test_key_and_message_delimiters(logs):
    code, out, _ = cat(logs, "-t", "t", "-p", "1", "-q", "-K", "\\t", "-D", "|")
    assert out == b"x\ty|"


def test_json_envelope(logs):
    code, out, _ = cat(logs, "-t", "t", "-p", "0", "-q", "-J", "-c", "2")
    lines = out.split(b"\n")
    assert lines[0] == (b'{"topic":"t","partition":0,"offset":0,"tstype":"create",'
                        b'"ts":1000,"broker":' + lines[0].split(b'"broker":')[1].split(b",")[0]
                        + b',"key":"\\u0000\\u0000\\u0000\\u0007","payload":'
                        b'"v\\u0001\\"\\\\/\xc3\xa9\xff\\n"}')
    assert json.loads(lines[1])["headers"] == ["a", "1", "b", None, "c", ""]
    assert json.loads(lines[1])["key"] is None and json.loads(lines[1])["payload"] == ""


def test_pack_formats(logs):
    code, out, err = cat(logs, "-t", "t", "-p", "0", "-q", "-o", "0", "-c", "1",
                         "-s", "key=i", "-f", "%k\\n")
    assert code == 0 and out == b"7\n"
    code, out, err = cat(logs, "-t", "t", "-p", "0", "-q", "-o", "3", "-s", "value=bs",
                         "-f", "%s\\n")
    assert out == b"0abc\n"                       # b reads the NUL, s the rest
    code, out, err = cat(logs, "-t", "t", "-p", "0", "-q", "-s", "key=q", "-f", "%o:%k\\n")
    assert code == 1 and out == b"0:"
    assert "Failed to format message in t [0] at offset 0: key truncated, expected 8 " \
           "bytes to unpack q but only 4 bytes remaining" in err
    code, out, err = cat(logs, "-t", "t", "-p", "0", "-q", "-E", "-s", "key=i$",
                         "-f", "%o:%k\\n")
    assert code == 0 and out == b"0:7\n1:\n2:\n3:"
    assert "expected key end-of-input, but 0 bytes" not in err and "3:" not in err
    assert "at offset 3: expected key end-of-input" not in err
    code, out, err = cat(logs, "-t", "t", "-s", "key=x")
    assert code == 2 and "Invalid token 'x' in key pack-format" in err


def test_offsets_and_counts(logs):
    assert cat(logs, "-t", "t", "-q", "-o", "-1", "-f", "%p/%o ")[1] == b"0/3 1/0 "
    assert cat(logs, "-t", "t", "-q", "-o", "s@1002", "-f", "%p/%o ")[1] == b"0/2 0/3 1/0 "
    assert cat(logs, "-t", "t", "-q", "-o", "e@1002", "-f", "%p/%o ")[1] == b"0/0 0/1 "
    assert cat(logs, "-t", "t", "-q", "-o", "end", "-f", "%o ")[1] == b""
    assert cat(logs, "-t", "t", "-q", "-c", "3", "-f", "%o ")[1] == b"0 1 2 "
    code, _, err = cat(logs, "-t", "t", "-o", "stored")
    assert code == 2 and "no committed offsets" in err
    _, _, err = cat(logs, "-t", "t", "-f", "")
    assert err == "% Reached end of topic t [0] at offset 4\n" \
                  "% Reached end of topic t [1] at offset 1: exiting\n"


def test_paths_sources_and_jbod(logs, tmp_path):
    seg = logs / "t-0" / segment_name(0, ".log")
    assert cat(logs / "t-0", "-q", "-f", "%o ")[1] == b"0 1 2 3 "
    assert cat(seg, "-q", "-f", "%t/%o ")[1] == b"t/0 t/1 t/2 t/3 "
    b = LogDirBuilder(tmp_path / "other")
    b.partition("t", 0, base_timestamp=5).append([rec(b"o", b"o")])
    b.write()
    # two log dirs holding the same partition: two sources, one after the other
    assert cat(logs, b.roots[0], "-t", "t", "-p", "0", "-q", "-f", "%s ")[1] \
        .endswith(b"\x00abc o ")
    code, _, err = cat(logs, b.roots[0], "-t", "t", "--jbod")
    assert code == 2 and "two log dirs" in err
    code, _, err = cat(logs / "t-0", "-t", "u")
    assert code == 2 and "partition of topic t" in err


def test_usage_errors_name_the_subcommand(logs):
    code, _, err = cat(logs, "-t", "t", "--fromat", "%s")
    assert code == 2 and err.startswith("usage: kafkalog cat")
    assert "did you mean --format" in err
    err_io = io.StringIO()
    assert main(["dmp", "x"], stdout=io.StringIO(), stderr=err_io) == 2
    assert "did you mean dump?" in err_io.getvalue()


# one broker's JBOD: topic j's partitions spread over two log dirs (partition -> log dir,
# base timestamp, (key, value) records), and a topic only the second dir holds
JBOD = {0: (0, 100, [(b"k0", b"a"), (b"k1", b"b")]),
        1: (1, 200, [(None, b"c")]),
        2: (0, 300, [(b"k3", b"d"), (b"", b"e"), (b"k5", b"f")]),
        3: (1, 400, [(b"k6", None)])}


@pytest.fixture
def jbod(tmp_path):
    b = LogDirBuilder(tmp_path / "d1", tmp_path / "d2")
    for n, (root, ts, records) in JBOD.items():
        b.partition("j", n, root=root, base_timestamp=ts).append(
            [rec(k, v) for k, v in records])
    b.partition("only2", 0, root=1).append([rec(b"x", b"y")])
    return b.write()


def _jbod_lines(parts):
    """kcat's '%p/%o %k|%s %T' lines for partitions ``parts`` in that order, from the
    fixture's construction (offsets from 0, timestamps base + offset)."""
    return b"".join(b"%d/%d %s|%s %d\n" % (n, o, k or b"", v or b"", JBOD[n][1] + o)
                    for n in parts for o, (k, v) in enumerate(JBOD[n][2]))


def test_jbod_log_dirs_are_one_source(jbod):
    d1, d2 = jbod
    code, out, err = cat(d1, d2, "-t", "j", "--jbod", "-f", "%p/%o %k|%s %T\\n")
    assert code == 0
    # every partition once, in partition order, whichever dir holds it
    assert out == _jbod_lines([0, 1, 2, 3])
    ends = [f"% Reached end of topic j [{n}] at offset {len(JBOD[n][2])}" for n in JBOD]
    assert err == "\n".join(ends) + ": exiting\n"
    code, out, _ = cat(d1, d2, "-t", "j", "--jbod", "-q", "-J")
    docs = [json.loads(line) for line in out.splitlines()]
    assert [(d["partition"], d["offset"], d["key"], d["payload"], d["ts"]) for d in docs] \
        == [(n, o, None if k is None else k.decode(), None if v is None else v.decode(),
             JBOD[n][1] + o) for n in JBOD for o, (k, v) in enumerate(JBOD[n][2])]
    # -p picks from both dirs; a topic only one dir holds is found
    assert cat(d2, d1, "-t", "j", "--jbod", "-q", "-p", "3", "-p", "2",
               "-f", "%p/%o %k|%s %T\\n")[1] == _jbod_lines([2, 3])
    assert cat(d1, d2, "-t", "only2", "--jbod", "-q", "-f", "%s\\n") == (0, b"y\n", "")
    # a partition dir of the same broker as well: still once
    assert cat(d1, d2 / "j-1", d2, "-t", "j", "--jbod", "-q",
               "-f", "%p/%o %k|%s %T\\n")[1] == _jbod_lines([0, 1, 2, 3])


def test_log_dirs_without_jbod_are_separate_sources(jbod):
    d1, d2 = jbod
    # each dir is a source of its own: d1's partitions, then d2's
    code, out, _ = cat(d1, d2, "-t", "j", "-q", "-f", "%p/%o %k|%s %T\\n")
    assert code == 0 and out == _jbod_lines([0, 2]) + _jbod_lines([1, 3])
    # a topic or partition one source lacks is an error of that source
    code, out, err = cat(d1, d2, "-t", "only2")
    assert code == 2 and "topic 'only2' not found in log dirs" in err and str(d1) in err
    code, out, err = cat(d1, d2, "-t", "j", "-p", "1")
    assert code == 2 and "partition j-1 not found" in err


def test_kcat_habit_b_dir_stands_in_for_the_path(logs):
    """``kafkalog cat -C -b DIR -t T`` (kcat's spelling): DIR is read as the log dir, with
    no "ignoring -b" note; -b that is no path, or no PATH at all, is a usage error saying
    what to give."""
    want = cat(logs, "-t", "t", "-q", "-f", "%p/%o %s\\n")
    assert want[0] == 0 and want[1]
    assert cat("-C", "-b", logs, "-t", "t", "-q", "-f", "%p/%o %s\\n") == want
    code, out, err = cat("-C", "-b", "localhost:9092", "-t", "t")
    assert code == 2 and out == b"" and err == (
        "kafkalog cat: error: -b localhost:9092: no such log dir; kafkalog cat reads a log "
        "dir, not a broker: give the log dir as PATH (or -b PATH)\n")
    code, _, err = cat("-C", "-t", "t")
    assert code == 2 and err.startswith("kafkalog cat: error: PATH missing: give the log dir")
    # with a PATH, -b is ignored as before
    code, out, err = cat(logs, "-b", "localhost:9092", "-t", "t", "-f", "%p/%o %s\\n")
    assert (code, out) == want[:2] and "ignoring -b" in err


def test_unknown_topic_lists_the_topics_there(logs, tmp_path):
    code, _, err = cat(logs, "-t", "nope")
    assert code == 2 and err == (f"kafkalog cat: error: topic 'nope' not found in log dirs "
                                 f"{logs} (it has t)\n")
    empty = tmp_path / "empty"
    empty.mkdir()
    code, _, err = cat(empty, "-t", "nope")
    assert code == 2 and err.endswith("(it holds no topic)\n"), err
