"""``kafkalog cat``'s flags (kcat's consumer flags, with kcat's meaning) and its run: which
log dirs, partition dirs or segment files to read, and one buffered writer for the output.
The formatting is :mod:`spark_kafkalog.kcat`'s; this module parses and prints only.
"""
from __future__ import annotations

import argparse
import io
import os
import posixpath
import sys
from typing import TextIO

import pyarrow.fs as pafs

from spark_kafkalog import kcat
from spark_kafkalog._console import non_negative, plain_uri
from spark_kafkalog.errors import InvalidOptionError, LogLayoutError
from spark_kafkalog.jobkit import parse_kv
from spark_kafkalog.log import LogDirs, parse_partition_dir_name, resolve_filesystem
from spark_kafkalog.log.io import FILESYSTEM_OPTIONS, list_dir
from spark_kafkalog.log.model.names import parse_segment_file_name

__all__ = ["add_parser", "add_remote_flags", "remote_storage", "run"]

EPILOG = """\
kcat's consumer flags: -C and -e are implied (a log dir is read to its end and cat exits);
-o beginning|end|N|-N|s@TS|e@TS; -f tokens %s %S %R %k %K %T %h %t %p %o %% and escapes
\\n \\r \\t \\xHH \\NNN; -J prints kcat's JSON envelope; -D/-K delimiters; -Z prints NULL
for null keys and values; -s key=FMT / value=FMT / FMT unpack with kcat's pack tokens
(bBhHiIqQcs$ and space), or -s value=avro / key=avro decode schema-registry framed Avro
with the writer schema of each id, from the log dir's _schemas or -r URL, printed as
kcat prints Avro (avro-c's JSON; with -J inside the envelope, with key_schema_id /
value_schema_id; kcat has no protobuf or json serde, so those are refused,
pointing at export_parquet and read_table); -X isolation.level=read_uncommitted|read_committed (default
read_committed, librdkafka's), -X s3.endpoint=... and other filesystem options; -b DIR
without a PATH reads DIR (a log dir, as kcat's -b names the cluster); with one, -b is
ignored (there is no broker). PATH is a log dir (a log.dirs entry), a
partition dir (<topic>-<n>: -t may be left out) or one segment file; several log dirs are
separate sources, printed one after the other, unless --jbod says they are one broker's."""


def add_parser(sub, fs_help: str) -> argparse.ArgumentParser:
    p = sub.add_parser("cat", help="print a topic's records, like kcat -C",
                       description="Print records of one topic, partition by partition in "
                                   "offset order, up to the high watermark (the last stable "
                                   "offset under read_committed), exactly as `kcat -C -e` "
                                   "prints them.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("paths", nargs="*", metavar="PATH",
                   help="log dir, partition dir or segment file (local path or URI); "
                        "-b PATH stands in for it, as kcat users type")
    p.add_argument("-t", "--topic", help="topic (optional for a partition dir or segment)")
    p.add_argument("-p", "--partition", type=int, action="append", metavar="N",
                   help="only this partition (repeatable; default: all)")
    p.add_argument("-o", "--offset", default="beginning",
                   help="beginning (default), end, N, -N (N before the end), s@TS, e@TS")
    p.add_argument("--from-time", metavar="TIME",
                   help="start at the first record at or after TIME (epoch ms or ISO-8601; "
                        "like -o s@TS)")
    p.add_argument("-c", "--count", type=non_negative, metavar="N",
                   help="exit after N records (in all)")
    p.add_argument("-f", "--format", metavar="FMT", help="kcat output format")
    p.add_argument("-J", "--json", action="store_true", help="kcat's JSON envelope")
    p.add_argument("-D", dest="delimiter", metavar="DELIM", default="\\n",
                   help="message delimiter (default \\n)")
    p.add_argument("-K", dest="key_delimiter", metavar="DELIM",
                   help="print keys before values, with this delimiter")
    p.add_argument("-Z", dest="null", action="store_true",
                   help='print null keys and values as "NULL"')
    p.add_argument("-s", dest="serdes", action="append", metavar="[key=|value=]FMT",
                   help="unpack keys/values with a kcat pack format (e.g. key=i)")
    p.add_argument("-r", dest="registry", metavar="URL",
                   help="schema registry URL for -s avro (default: the log dir's own "
                        "_schemas topic)")
    p.add_argument("-X", dest="props", action="append", metavar="PROP=VALUE",
                   help="isolation.level=..., or a filesystem option (s3.endpoint=...)")
    p.add_argument("--fs-option", action="append", metavar="KEY=VALUE", help=fs_help)
    p.add_argument("--ignore-data-loss", action="store_true",
                   help="print what is there when records the log's files promise are "
                        "missing (default: fail, exit 1)")
    add_remote_flags(p, "read below the local log, from the log dir's "
                        "__remote_log_metadata")
    # not jobkit.add_isolation_level: no default here, -X isolation.level may set it
    p.add_argument("--isolation-level", choices=("read_uncommitted", "read_committed"),
                   help="as -X isolation.level")
    p.add_argument("--jbod", action="store_true",
                   help="the PATHs are the log dirs of one broker (JBOD), not separate "
                        "sources")
    p.add_argument("-b", dest="brokers", metavar="BROKERS",
                   help="without PATH: the log dir to read; else ignored (no broker)")
    for flag, what in (("-C", "consumer mode (the only one)"), ("-e", "exit at the end "
                       "(always)"), ("-O", "kcat 1.7 ignores it when consuming"),
                       ("-E", "go on after a record fails to format"),
                       ("-u", "unbuffered output"), ("-q", "quiet: no end-of-partition "
                       "lines on stderr")):
        p.add_argument(flag, dest="flag_" + flag[1], action="store_true", help=what)
    p.add_argument("-v", "--verbose", action="count", default=0, help="log what is read")
    return p


def add_remote_flags(p: argparse.ArgumentParser, use: str) -> None:
    """``--remote-storage URI`` and ``--remote-layout TEMPLATE`` (:func:`remote_storage`
    reads them; ``kafkalog inspect`` and ``verify`` have them too); ``use`` says what the
    command does with the remote tier."""
    p.add_argument("--remote-storage", metavar="URI",
                   help=f"the remote tier's root (KIP-405 tiered storage): {use}")
    p.add_argument("--remote-layout", metavar="TEMPLATE",
                   help="how the remote store names objects: local-tiered-storage "
                        "(default, Kafka's LocalTieredStorage layout) or a path template "
                        "(see README)")


def remote_storage(args, fs_options: dict):
    """The remote tier ``--remote-storage`` names (None without it)."""
    if getattr(args, "remote_storage", None) is None:
        if getattr(args, "remote_layout", None) is not None:
            raise InvalidOptionError("--remote-layout needs --remote-storage")
        return None
    from spark_kafkalog.log.read.remote import RemoteStorage

    return RemoteStorage(plain_uri(args.remote_storage), args.remote_layout, fs_options)


def _parent(uri: str) -> str:
    return uri.rstrip("/").rsplit("/", 1)[0] or "/"


def _sources(args, fs_options: dict) -> list[kcat.Selection]:
    """One Selection per log dir PATH (one in all with --jbod), each with its partitions."""
    groups: list[tuple[list[str], list[tuple]]] = []    # (roots, wanted)
    for raw in args.paths:
        uri = plain_uri(raw)
        fs, path = resolve_filesystem(uri, fs_options)
        info = fs.get_file_info(path)
        if info.type == pafs.FileType.NotFound:
            raise LogLayoutError("no such log dir, partition dir or segment", path=raw)
        name = posixpath.basename(path.rstrip("/"))
        if info.type == pafs.FileType.File:
            seg = parse_segment_file_name(name)
            part = parse_partition_dir_name(posixpath.basename(posixpath.dirname(path)))
            if seg is None or seg[1] != "log" or part is None:
                raise LogLayoutError("not a segment in its partition dir (expected "
                                     "<topic>-<n>/<base offset>.log)", path=raw)
            groups.append(([_parent(_parent(uri))], [(part[0], part[1], seg[0])]))
            continue
        children = list_dir(fs, path)
        is_root = any(c.type == pafs.FileType.Directory
                      and parse_partition_dir_name(c.base_name) is not None for c in children)
        part = parse_partition_dir_name(name)
        if not is_root and part is not None:
            groups.append(([_parent(uri)], [(part[0], part[1], None)]))
        else:
            groups.append(([uri], [(None, None, None)]))
    if args.jbod and len(groups) > 1:
        groups = [([r for g in groups for r in g[0]], [w for g in groups for w in g[1]])]
    sources = []
    for roots, wanted in groups:
        logdirs = LogDirs(list(dict.fromkeys(roots)), fs_options, include_internal=True)
        parts = []
        for topic, partition, base in wanted:
            topic = _topic(args.topic, topic)
            if partition is None:
                chosen = logdirs.partitions(topic)
                if args.partition:
                    chosen = [logdirs.partition(topic, q) for q in sorted(set(args.partition))]
                parts += [(p, None, None) for p in chosen]
                continue
            if args.partition and partition not in args.partition:
                continue
            p = logdirs.partition(topic, partition)
            if base is None:
                parts.append((p, None, None))
                continue
            bases = [s.base_offset for s in p.segments]
            if base not in bases:
                raise LogLayoutError(f"segment {base} is not one of {topic}-{partition}'s",
                                     path=p.path)
            k = bases.index(base)
            parts.append((p, base, bases[k + 1] if k + 1 < len(bases) else None))
        sources.append(kcat.Selection(logdirs, _once(parts)))
    return sources


def _broker_path(brokers: str | None, fs_options: dict) -> str:
    """kcat's ``-b`` standing in for the missing PATH: a log dir, partition dir or segment
    that exists; anything else (a broker's host:port) is a usage error saying so."""
    if brokers:
        try:
            fs, path = resolve_filesystem(plain_uri(brokers), fs_options)
            found = fs.get_file_info(path).type != pafs.FileType.NotFound
        except (OSError, ValueError, InvalidOptionError):
            found = False
        if found:
            return brokers
        raise InvalidOptionError(f"-b {brokers}: no such log dir; kafkalog cat reads a log "
                                 "dir, not a broker: give the log dir as PATH (or -b PATH)")
    raise InvalidOptionError("PATH missing: give the log dir (a broker's log.dirs entry), "
                             "a partition dir or a segment file to read (or -b PATH)")


def _once(parts: list[tuple]) -> list[tuple]:
    """Each partition once (--jbod merges the paths' selections: two log dirs each ask
    for the topic's every partition, of the whole broker); a segment of a partition
    printed whole is not printed again."""
    whole = {(p.topic, p.partition) for p, base, _ in parts if base is None}
    seen: set = set()
    kept = []
    for item in parts:
        p, base, _ = item
        key = (p.topic, p.partition, base)
        if key in seen or (base is not None and key[:2] in whole):
            continue
        seen.add(key)
        kept.append(item)
    return kept


def _topic(asked: str | None, named: str | None) -> str:
    if named is not None and asked is not None and asked != named:
        raise InvalidOptionError(f"-t {asked}: the path is a partition of topic {named}")
    topic = asked or named
    if topic is None:
        raise InvalidOptionError("-t <topic> missing (a log dir path needs one)")
    return topic


def _options(args, err: TextIO) -> tuple[kcat.CatOptions, dict]:
    fs_options = parse_kv(args.fs_option, "--fs-option", InvalidOptionError)
    isolation = "read_committed"          # librdkafka's default isolation.level
    for prop in args.props or ():
        key, sep, value = prop.partition("=")
        if not sep:
            raise InvalidOptionError(f"-X expects property=value, not {prop!r}")
        if key == "isolation.level":
            if value not in ("read_committed", "read_uncommitted"):
                raise InvalidOptionError(f"-X isolation.level={value}: expected "
                                         "read_committed or read_uncommitted")
            isolation = value
        elif key.split(".", 1)[0] in FILESYSTEM_OPTIONS:
            fs_options[key] = value
        elif not args.flag_q:
            err.write(f"% kafkalog cat: ignoring -X {key} (a client property; there is no "
                      "broker)\n")
    if args.isolation_level:
        isolation = args.isolation_level
    env = os.fsencode
    delim = kcat.parse_delim(env(args.delimiter))
    if args.format is not None:
        fmt = env(args.format)
    elif args.json:
        fmt = delim
    elif args.key_delimiter is not None:
        fmt = b"%k" + kcat.parse_delim(env(args.key_delimiter)) + b"%s" + delim
    else:
        fmt = b"%s" + delim
    program = kcat.parse_format(fmt)
    key_pack = value_pack = None
    avro: list[str] = []
    for spec in args.serdes or ():
        field, t = None, spec
        for name in ("key", "value"):
            if spec.startswith(name + "="):
                field, t = name, spec[len(name) + 1:]
        if t == "avro":
            # kcat's -s avro: schemas from -r, or from the log dir's own _schemas
            avro += [n for n in ("key", "value") if field in (None, n) and n not in avro]
            continue
        if t in ("protobuf", "json"):
            # kcat's serdes are pack formats and avro only: no kcat rendering to follow
            col = field or "value"
            raise InvalidOptionError(
                f"-s {spec}: kcat deserializes only avro (and pack formats); for {t} "
                f"values use kafkalog job export_parquet --{col}-format {t}, read_table("
                f"{col}_format={t!r}) or the Spark read option {col}Format={t}")
        for name in ("key", "value"):
            if field in (None, name):
                kcat.check_pack(name, t)
        if field in (None, "key"):
            key_pack = t.encode()
        if field in (None, "value"):
            value_pack = t.encode()
    if set(avro) & {n for n, pack in (("key", key_pack), ("value", value_pack)) if pack}:
        raise InvalidOptionError("-s: a column is either avro or a pack format, not both")
    if args.registry and not avro:
        raise InvalidOptionError("-r: a schema registry is only used with -s avro")
    start, stop = kcat.parse_offset(args.offset)
    if args.from_time:
        start = kcat.OffsetSpec("time", kcat.parse_time(args.from_time))
    if args.brokers and args.paths and not args.flag_q:
        err.write("% kafkalog cat: ignoring -b (kafkalog reads log dirs, not brokers)\n")
    json_delim = program[0][1] if program and program[0][0] == 0 else b""
    return kcat.CatOptions(
        program=program, json=args.json, json_delimiter=json_delim,
        null_str=kcat.NULL_STR if args.null else None, key_pack=key_pack,
        value_pack=value_pack, start=start or kcat.OffsetSpec("beginning"),
        stop_timestamp=stop, count=args.count, isolation_level=isolation,
        exit_on_error=not args.flag_E, unbuffered=args.flag_u,
        fail_on_data_loss=not args.ignore_data_loss, avro_columns=tuple(avro),
        registry_url=args.registry.rstrip("/") if args.registry else None), fs_options


def run(args, out: TextIO, err: TextIO) -> int:
    """``kafkalog cat``: 0 when printed; errors are raised (the command maps them)."""
    opts, fs_options = _options(args, err)
    if not args.paths:
        args.paths = [_broker_path(args.brokers, fs_options)]
    sources = _sources(args, fs_options)
    storage = remote_storage(args, fs_options)
    if storage is not None:
        from spark_kafkalog.log.diagnose.remote import remote_tiers

        for src in sources:
            src.remote = storage
            src.tiers = {k: t.plan for k, t in
                         remote_tiers(src.logdirs, storage, [q for q, _, _ in src.parts],
                                      option="--remote-storage").items()}
    if opts.json:
        brokers = {kcat.broker_id(s.logdirs) for s in sources}
        opts.broker = brokers.pop() if len(brokers) == 1 else -1
    raw = getattr(out, "buffer", None)
    if raw is not None:
        out.flush()
        fd = _fileno(raw)
        # one buffered writer over the descriptor: whole formatted batches go straight out
        sink = io.open(fd, "wb", buffering=1 << 20, closefd=False) if fd is not None else raw
        write, flush = sink.write, sink.flush
    else:
        sink = None

        def write(data: bytes) -> None:
            out.write(data.decode("utf-8", "replace"))
        flush = out.flush
    note = (lambda text: None) if args.flag_q else (lambda text: err.write(text + "\n"))
    try:
        kcat.cat(sources, opts, write, flush, note)
    finally:
        flush()
        if sink is not None and sink is not raw:
            sink.close()
    return 0


def _fileno(raw) -> int | None:
    try:
        return raw.fileno()
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
        return None


if __name__ == "__main__":          # pragma: no cover
    sys.exit("use `kafkalog cat`")
