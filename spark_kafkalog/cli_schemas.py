"""``kafkalog schemas``: what a schema registry's REST API would answer, from the
registry's own topic (``_schemas``) in a log dir, with no registry running. The state is
:func:`spark_kafkalog.log.read.schemas.read_registry`'s; this module parses and prints.
"""
from __future__ import annotations

import argparse
import json
from typing import TextIO

from spark_kafkalog import cli_cat
from spark_kafkalog._console import plain_uri
from spark_kafkalog.errors import InvalidOptionError, SchemaNotFoundError
from spark_kafkalog.jobkit import parse_kv
from spark_kafkalog.log.read.schemas import DEFAULT_TOPIC, read_registry
from spark_kafkalog.typed.registry import RegisteredSchema, RegistryState

__all__ = ["add_parser", "run"]

EXIT_NOT_FOUND = 1
#: what the registry answers when no global level / mode is set (its defaults)
DEFAULT_COMPATIBILITY = "BACKWARD"
DEFAULT_MODE = "READWRITE"

EPILOG = """\
queries (the registry's REST call in brackets):
  subjects                    [GET /subjects] (--deleted: soft-deleted ones too)
  versions SUBJECT            [GET /subjects/SUBJECT/versions] (--deleted)
  id N                        [GET /schemas/ids/N] (--subject S: ?subject=, a context)
  get SUBJECT VERSION|latest  [GET /subjects/SUBJECT/versions/VERSION] (--deleted)
  config [SUBJECT]            [GET /config, GET /config/SUBJECT] (--default-to-global)
  mode [SUBJECT]              [GET /mode, GET /mode/SUBJECT] (--default-to-global)
Subjects of a context are written qualified (:.ctx:name). Errors print one line with
the registry's error code (40401 subject, 40402 version, 40403 schema, 40408/40409 no
subject-level config/mode) and exit 1. With no global config or mode in _schemas, the
answer is the registry's default (BACKWARD, READWRITE) unless its properties set
another. --json prints the REST API's JSON (schemaType always given)."""

_ARITY = {"subjects": (0, 0), "versions": (1, 1), "id": (1, 1), "get": (2, 2),
          "config": (0, 1), "mode": (0, 1)}


def add_parser(sub, common) -> argparse.ArgumentParser:
    p = sub.add_parser("schemas", parents=[common],
                       help="what a schema registry would answer, from its _schemas topic",
                       description="Read the schema registry's own topic (Confluent Schema "
                                   "Registry's kafkastore.topic, _schemas; Karapace and "
                                   "Redpanda write the same records) from a log dir and "
                                   "answer as the registry's REST API would.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("path", metavar="PATH",
                   help="log dir (local path or URI; JBOD dirs comma-separated)")
    p.add_argument("query", nargs="*", metavar="QUERY",
                   help="subjects (default), versions S, id N, get S V, config [S], mode [S]")
    p.add_argument("--topic", default=DEFAULT_TOPIC,
                   help="the registry's topic (kafkastore.topic; default _schemas)")
    p.add_argument("--deleted", action="store_true",
                   help="include soft-deleted subjects and versions (?deleted=true)")
    p.add_argument("--subject", help="id: look the id up in this subject's context")
    p.add_argument("--default-to-global", action="store_true",
                   help="config/mode SUBJECT: fall back to the context's and the global "
                        "setting (?defaultToGlobal=true)")
    p.add_argument("--as-of", metavar="COMMIT",
                   help="read the topic as of a commit of its journal (a kafkalog writer's)")
    p.add_argument("--skip-bad-records", action="store_true",
                   help="pass over records the registry cannot read, as its reader does "
                        "(default: fail naming the offset)")
    cli_cat.add_remote_flags(p, "read _schemas below the local log, from the log dir's "
                                "__remote_log_metadata")
    _intermixed(p)
    return p


def _intermixed(p: argparse.ArgumentParser) -> None:
    """Let flags come between the query words (``PATH --json get S 1``): the parent
    parser hands a sub-command's words to its ``parse_known_args``, which argparse only
    intermixes through ``parse_known_intermixed_args`` (which itself calls
    ``parse_known_args``, hence the guard)."""
    base = type(p)

    class Intermixed(base):          # type: ignore[misc, valid-type]
        def parse_known_args(self, args=None, namespace=None):
            if self._nested:
                return base.parse_known_args(self, args, namespace)
            self._nested = True
            try:
                return self.parse_known_intermixed_args(args, namespace)
            finally:
                self._nested = False

    p.__class__ = Intermixed
    p._nested = False


def _query(args) -> tuple[str, list[str]]:
    words = list(args.query) or ["subjects"]
    what, rest = words[0], words[1:]
    if what not in _ARITY:
        raise InvalidOptionError(f"unknown query {what!r}: expected one of "
                                 f"{', '.join(_ARITY)}")
    lo, hi = _ARITY[what]
    if not lo <= len(rest) <= hi:
        raise InvalidOptionError(f"{what}: expected {lo}" + (f" to {hi}" if hi != lo else "")
                                 + f" argument(s), got {len(rest)}: {' '.join(rest)}")
    return what, rest


def _schema_doc(s: RegisteredSchema, with_subject: bool) -> dict:
    """The REST API's Schema / SchemaString JSON (null and empty fields left out)."""
    doc: dict = {"subject": s.subject, "version": s.version, "id": s.id} if with_subject \
        else {}
    doc["schemaType"] = s.schema_type
    if s.references:
        doc["references"] = [{"name": r.name, "subject": r.subject, "version": r.version}
                             for r in s.references]
    if s.metadata is not None:
        doc["metadata"] = json.loads(s.metadata)
    if s.rule_set is not None:
        doc["ruleSet"] = json.loads(s.rule_set)
    doc["schema"] = s.schema
    if s.deleted:
        doc["deleted"] = True
    return doc


def _schema_text(s: RegisteredSchema, head: str, out: TextIO) -> None:
    out.write(f"{head}  {s.schema_type}" + ("  (soft-deleted)" if s.deleted else "") + "\n")
    if s.references:
        out.write("references:\n")
        for r in s.references:
            out.write(f"  {r.name} -> {r.subject} version {r.version}\n")
    out.write(s.schema.rstrip("\n") + "\n")


class _NotConfigured(Exception):
    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code


def _setting(state: RegistryState, what: str, subject: str | None, to_global: bool) -> str:
    """config / mode: the level or mode the registry would answer (its default when the
    global one is unset; 40408 / 40409 for a subject without its own)."""
    get = state.config if what == "config" else state.mode
    found = get(subject, default_to_global=to_global)
    if found is None and subject is not None and not to_global:
        noun = "compatibility" if what == "config" else "mode"
        raise _NotConfigured(40408 if what == "config" else 40409,
                             f"Subject '{subject}' does not have subject-level {noun} "
                             "configured")
    if found is None:
        found = DEFAULT_COMPATIBILITY if what == "config" else DEFAULT_MODE
    return found


def run(args, out: TextIO, err: TextIO) -> int:
    """``kafkalog schemas``: 0 answered, 1 not found (the registry's 404 codes)."""
    what, rest = _query(args)
    fs_options = parse_kv(args.fs_option, "--fs-option", InvalidOptionError)
    roots = [plain_uri(r) for r in args.path.split(",") if r]
    state = read_registry(roots, args.topic,
                          remote_storage=cli_cat.remote_storage(args, fs_options),
                          filesystem_options=fs_options, as_of=args.as_of,
                          on_error="skip" if args.skip_bad_records else "fail")
    for bad in state.skipped:
        err.write(f"kafkalog schemas: skipped {args.topic}-{bad.partition} offset "
                  f"{bad.offset}: {bad.reason}\n")
    try:
        doc, text = _answer(state, what, rest, args)
    except (SchemaNotFoundError, _NotConfigured) as e:
        code = e.error_code if isinstance(e, SchemaNotFoundError) else e.code
        message = e.reason if isinstance(e, SchemaNotFoundError) else str(e)
        if args.json:
            err.write(json.dumps({"error_code": code, "message": message}) + "\n")
        else:
            err.write(f"kafkalog schemas: error {code}: {message}\n")
        return EXIT_NOT_FOUND
    if args.json:
        out.write(json.dumps(doc) + "\n")
    else:
        text(out)
    return 0


def _version_arg(word: str) -> int | str:
    if word == "latest":
        return word
    try:
        return int(word)
    except ValueError:
        raise InvalidOptionError(f"version {word!r}: expected a number or latest") from None


def _answer(state: RegistryState, what: str, rest: list[str], args):
    """(the REST JSON, a function printing the text form)."""
    if what == "subjects":
        names = state.subjects(include_deleted=args.deleted)
        return names, lambda out: out.writelines(n + "\n" for n in names)
    if what == "versions":
        found = state.versions(rest[0], include_deleted=args.deleted)
        return found, lambda out: out.writelines(f"{v}\n" for v in found)
    if what == "id":
        try:
            sid = int(rest[0])
        except ValueError:
            raise InvalidOptionError(f"id {rest[0]!r}: expected a number") from None
        s = state.by_id(sid, subject=args.subject)
        return _schema_doc(s, False), lambda out: _schema_text(
            s, f"id {s.id}  (subject {s.subject} version {s.version})", out)
    if what == "get":
        s = state.version(rest[0], _version_arg(rest[1]), include_deleted=args.deleted)
        return _schema_doc(s, True), lambda out: _schema_text(
            s, f"subject {s.subject}  version {s.version}  id {s.id}", out)
    subject = rest[0] if rest else None
    found = _setting(state, what, subject, args.default_to_global)
    if what == "config":
        doc = dict(state.config_value(subject, args.default_to_global) or {})
        doc["compatibilityLevel"] = found
        return doc, lambda out: out.write(found + "\n")
    return {"mode": found}, lambda out: out.write(found + "\n")
