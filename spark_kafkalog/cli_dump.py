"""``kafkalog dump``'s flags (Kafka's ``kafka-dump-log.sh`` names, ours as aliases) and its
run: the files in order, Kafka's text on stdout (whole record batches formatted compiled),
our own notes and problems on stderr. The byte parsing is
:mod:`spark_kafkalog.log.diagnose.dump`'s; this module parses and prints only.
"""
from __future__ import annotations

import argparse
import logging
import posixpath
from typing import TextIO

import pyarrow.fs as pafs

from spark_kafkalog._console import human_bytes, json_line, plain_uri
from spark_kafkalog.errors import InvalidOptionError, LogLayoutError
from spark_kafkalog.log import resolve_filesystem
from spark_kafkalog.log.diagnose.dump import FILE_KINDS, DumpOptions, dump_file, file_kind
from spark_kafkalog.log.read.scan import DEFAULT_WINDOW_BYTES

__all__ = ["add_parser", "run"]

log = logging.getLogger("spark_kafkalog.cli")
#: Kafka's default (and only built-in) --key/--value-decoder-class
STRING_DECODER = "org.apache.kafka.tools.api.StringDecoder"
#: Kafka's --max-message-size default
MAX_MESSAGE_SIZE = 5 * 1024 * 1024


def add_parser(sub, common, non_negative) -> argparse.ArgumentParser:
    p = sub.add_parser("dump", parents=[common],
                       help="print segments, indexes, snapshots, checkpoints like Kafka's "
                            "kafka-dump-log.sh",
                       description="Print .log (and KRaft .checkpoint) batches, .index, "
                                   ".timeindex, .txnindex, producer .snapshot and checkpoint "
                                   "files as Kafka's kafka-dump-log.sh (DumpLogSegments) "
                                   "prints them; Kafka's flag names work.")
    p.add_argument("paths", nargs="*", metavar="FILE")
    p.add_argument("--files", action="append", metavar="FILE1,FILE2,...",
                   help="comma-separated files (Kafka's flag; positional FILEs work too)")
    p.add_argument("--deep-iteration", "--records", dest="records", action="store_true",
                   help="print every record")
    p.add_argument("--print-data-log", "--print-data", dest="print_data", action="store_true",
                   help="also print keys and values (implies --deep-iteration): as UTF-8 "
                        "text, or as base64 with --json")
    p.add_argument("--skip-record-metadata", action="store_true",
                   help="record lines without their metadata; no control records")
    p.add_argument("--max-bytes", type=non_negative, default=None, metavar="N",
                   help="only the batches within the first N bytes of each segment")
    p.add_argument("--max-message-size", type=non_negative, default=MAX_MESSAGE_SIZE,
                   metavar="N", help="offset indexes: an entry whose batch is larger than "
                                     "N bytes stops the dump there, as it stops Kafka's tool "
                                     "(default 5242880); segments are read whatever their "
                                     "batches' size")
    p.add_argument("--index-sanity-check", action="store_true",
                   help="indexes: only check them (FILE passed sanity check.)")
    p.add_argument("--verify-index-only", action="store_true",
                   help="indexes: only report entries that do not match the log")
    p.add_argument("--verify-crc", action="store_true",
                   help="fail (exit 1) on checksum mismatches, inner legacy messages "
                        "included with --deep-iteration")
    p.add_argument("--key-decoder-class", default=STRING_DECODER, metavar="CLASS",
                   help="only Kafka's StringDecoder (the default)")
    p.add_argument("--value-decoder-class", default=STRING_DECODER, metavar="CLASS",
                   help="only Kafka's StringDecoder (the default)")
    dec = p.add_mutually_exclusive_group()
    for flag, const, what in (
            ("--offsets-decoder", "offsets", "__consumer_offsets records"),
            ("--transaction-log-decoder", "transaction-log", "__transaction_state records"),
            ("--cluster-metadata-decoder", "cluster-metadata", "KRaft __cluster_metadata "
             "records"),
            ("--remote-log-metadata-decoder", "remote-log-metadata",
             "__remote_log_metadata records"),
            ("--share-group-state-decoder", "share-group-state",
             "__share_group_state records")):
        dec.add_argument(flag, dest="decoder", action="store_const", const=const,
                         help=f"decode keys and values as {what} (implies --print-data-log)")
    p.add_argument("--window-bytes", type=int, default=DEFAULT_WINDOW_BYTES,
                   help=argparse.SUPPRESS)
    return p


def _files(args) -> list[str]:
    files = list(args.paths)
    for group in args.files or ():
        files += [f.strip() for f in group.split(",") if f.strip()]
    if not files:
        raise InvalidOptionError("no files: give --files FILE1,FILE2 or FILE arguments")
    return files


def _as_given(text: str, path: str, name: str) -> str:
    """A line about the file (``FILE passed sanity check.``, ``FILE is empty.``) with the
    file as the user typed it, as Kafka's tool prints it, not as resolved."""
    return name + text[len(path):] if text.startswith(path + " ") else text


def run(args, out: TextIO, err: TextIO, fs_options: dict) -> int:
    """``kafkalog dump``: 0 ok, 1 problems found, 2 nothing dumpable."""
    for flag in ("key_decoder_class", "value_decoder_class"):
        if getattr(args, flag) != STRING_DECODER:
            raise InvalidOptionError(f"--{flag.replace('_', '-')} {getattr(args, flag)}: "
                                     f"only {STRING_DECODER} (Java classes cannot be loaded)")
    opts = DumpOptions(records=args.records, print_data=args.print_data,
                       verify_crc=args.verify_crc, max_bytes=args.max_bytes,
                       window_bytes=args.window_bytes, decoder=args.decoder,
                       text_only=not args.json, skip_metadata=args.skip_record_metadata,
                       max_message_size=args.max_message_size,
                       index_mode="sanity" if args.index_sanity_check
                       else "verify" if args.verify_index_only else None)
    raw = None if args.json else getattr(out, "buffer", None)
    if raw is not None:
        out.flush()
    dumped = problems = 0
    stopped = False
    for name in _files(args):
        if stopped:
            break
        fs, path = resolve_filesystem(plain_uri(name), fs_options)
        if file_kind(posixpath.basename(path)) is None:
            # Kafka's DumpLogSegments skips what it does not know, so `dump dir/*` works
            note = f"Ignoring unknown file {name} (cannot dump it: expected a {FILE_KINDS})"
            if args.json:
                json_line({"type": "note", "message": note, "path": name}, out)
            else:
                err.write(note + "\n")
            continue
        info = fs.get_file_info(path)
        if info.type == pafs.FileType.NotFound:
            raise LogLayoutError("no such file", path=name)
        if info.type != pafs.FileType.File:
            raise LogLayoutError("not a file", path=name)
        log.info("dumping %s (%s)", name, human_bytes(info.size))
        dumped += 1
        if not args.json:
            out.write(f"Dumping {name}\n")
        for item in dump_file(fs, path, opts):
            if item.kind == "problem":
                problems += 1
                # where Kafka's tool dies (--max-message-size): no more of any file, so
                # that stdout is what the tool prints
                stopped = stopped or bool(item.fields.get("fatal"))
            if args.json:
                json_line(item.fields, out)
            elif item.kind == "block":
                if raw is not None:
                    out.flush()
                    raw.write(item.fields["data"])
                else:
                    out.write(item.fields["data"].decode("utf-8"))
            elif item.kind == "line":
                out.write(_as_given(item.text, path, name) + "\n")
            elif item.kind == "note":
                err.write(_as_given(item.text, path, name) + "\n")
            else:
                f = item.fields
                where = [f["path"]] + [f"{k} {f[k]}" for k in ("position", "offset")
                                       if f[k] is not None]
                err.write(f"problem: {item.text} ({', '.join(where)})\n")
    if raw is not None:
        raw.flush()
    if not dumped:
        err.write("kafkalog dump: error: none of the files is one dump reads\n")
        return 2
    return 1 if problems else 0
