"""Random Protobuf schemas and messages for the hypothesis tests (reading and writing):
specs of every scalar type, enums, nested and repeated messages, maps, oneofs,
Timestamp/Duration and field numbers up to 2**29-1, rendered as .proto text, compiled by
protoc (proto_oracle.compile_module) and filled with random values."""
from __future__ import annotations

import itertools
import random

from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st

from tests.typed.proto_oracle import compile_module

_COUNTER = itertools.count()

SCALARS = ["double", "float", "int32", "int64", "uint32", "uint64", "sint32", "sint64",
           "fixed32", "fixed64", "sfixed32", "sfixed64", "bool", "string", "bytes"]
MAP_KEYS = ["int32", "int64", "uint32", "sint64", "fixed32", "bool", "string"]
#: no shrinking: each example runs protoc, and a shrink would take minutes on a shared
#: machine; a failure prints its seed and schema text
PHASES = [Phase.explicit, Phase.reuse, Phase.generate]


@st.composite
def fields(draw, depth, proto2):
    """A message spec: a list of field dicts (kind, type, label, number, oneof)."""
    n = draw(st.integers(1, 6))
    numbers = draw(st.lists(st.one_of(st.integers(1, 40), st.integers(1000, 2**29 - 1)),
                            min_size=n, max_size=n, unique=True))
    numbers = [x for x in numbers if not 19000 <= x <= 19999]   # protobuf's reserved range
    out = []
    for i, num in enumerate(numbers):
        kinds = ["scalar", "scalar", "enum", "map", "time"] + (["message"] if depth < 2 else [])
        kind = draw(st.sampled_from(kinds))
        f = {"name": f"f{i}", "number": num, "kind": kind}
        if kind == "scalar":
            f["type"] = draw(st.sampled_from(SCALARS))
        elif kind == "map":
            f["key"] = draw(st.sampled_from(MAP_KEYS))
            f["value"] = draw(st.sampled_from(SCALARS + ["E"]))
        elif kind == "time":
            f["type"] = draw(st.sampled_from(["google.protobuf.Timestamp",
                                              "google.protobuf.Duration"]))
        elif kind == "message":
            f["fields"] = draw(fields(depth + 1, proto2))
        labels = ["", "repeated", "optional"] + (["required"] if proto2 else [])
        f["label"] = "" if kind == "map" else draw(st.sampled_from(labels))
        if proto2 and f["label"] == "" and kind != "map":
            f["label"] = "optional"
        out.append(f)
    # some singular fields of the message share a oneof
    singles = [f for f in out if f["label"] in ("", "optional") and f["kind"] != "map"]
    if len(singles) >= 2 and draw(st.booleans()):
        for f in singles[:draw(st.integers(2, len(singles)))]:
            f["oneof"] = True
    return out


def render(fields_, name, proto2, out):
    """Declare message ``name`` (and its nested ones) into ``out`` lines."""
    out.append(f"message {name} {{")
    # a map's enum values must start at 0, in proto2 too (a closed enum there)
    out.append("  enum E { E0 = 0; E1 = 1; E9 = 9; }")
    plain, oneof = [], []
    for f in fields_:
        if f["kind"] == "message":
            render(f["fields"], f"M{f['name']}", proto2, out)
        typ = {"scalar": f.get("type"), "enum": "E", "time": f.get("type"),
               "message": f"M{f['name']}"}.get(f["kind"])
        if f["kind"] == "map":
            decl = f"map<{f['key']}, {f['value']}> {f['name']} = {f['number']};"
        else:
            decl = f"{typ} {f['name']} = {f['number']};"
        if f.get("oneof"):
            oneof.append(decl)
        else:
            plain.append((f["label"] + " " + decl).strip())
    out += ["  " + d for d in plain]
    if oneof:
        out.append("  oneof choice { " + " ".join(oneof) + " }")
    out.append("}")


def proto_text(spec, proto2, package):
    lines = [f'syntax = "{"proto2" if proto2 else "proto3"}";', f"package {package};",
             'import "google/protobuf/timestamp.proto";',
             'import "google/protobuf/duration.proto";']
    render(spec, "Top", proto2, lines)
    return "\n".join(lines) + "\n"


def _scalar(fd, rng):
    from google.protobuf.descriptor import FieldDescriptor as FD
    t = fd.type
    if t in (FD.TYPE_DOUBLE, FD.TYPE_FLOAT):
        return rng.choice([0.0, -0.0, 1.5, -2.25, 1e30 if t == FD.TYPE_FLOAT else 1e300])
    if t == FD.TYPE_BOOL:
        return rng.random() < 0.5
    if t == FD.TYPE_STRING:
        return rng.choice(["", "a", "héllo", "日本", "x" * 40])
    if t == FD.TYPE_BYTES:
        return rng.choice([b"", b"\0", b"\xff\x00\x01"])
    if t == FD.TYPE_ENUM:
        vals = [v.number for v in fd.enum_type.values]
        return rng.choice(vals + ([] if fd.enum_type.is_closed else [77]))
    bits = 64 if t in (FD.TYPE_INT64, FD.TYPE_UINT64, FD.TYPE_SINT64, FD.TYPE_FIXED64,
                       FD.TYPE_SFIXED64) else 32
    unsigned = t in (FD.TYPE_UINT32, FD.TYPE_UINT64, FD.TYPE_FIXED32, FD.TYPE_FIXED64)
    lo, hi = (0, 2**bits - 1) if unsigned else (-2**(bits - 1), 2**(bits - 1) - 1)
    return rng.choice([0, 1, lo, hi, rng.randint(lo, hi)])


def fill(msg, rng):
    """Random values in ``msg`` (required fields always set, so it serializes)."""
    for fd in msg.DESCRIPTOR.fields:
        if not fd.is_required and rng.random() < 0.3:
            continue
        mt = fd.message_type
        if mt is not None and mt.GetOptions().map_entry:
            m = getattr(msg, fd.name)
            kfd, vfd = mt.fields_by_name["key"], mt.fields_by_name["value"]
            for _ in range(rng.randint(0, 3)):
                m[_scalar(kfd, rng)] = _scalar(vfd, rng)
        elif mt is not None and mt.name in ("Timestamp", "Duration"):
            items = [getattr(msg, fd.name).add() for _ in range(rng.randint(0, 2))] \
                if fd.is_repeated else [getattr(msg, fd.name)]
            for t in items:
                t.seconds = rng.choice([0, 1, -1, 2**33, rng.randint(-10**10, 10**10)])
                t.nanos = rng.choice([0, 999_999_999, 1000]) * (-1 if t.seconds < 0 else 1)
        elif mt is not None:
            if fd.is_repeated:
                for _ in range(rng.randint(0, 2)):
                    fill(getattr(msg, fd.name).add(), rng)
            else:
                getattr(msg, fd.name).SetInParent()
                fill(getattr(msg, fd.name), rng)
        elif fd.is_repeated:
            getattr(msg, fd.name).extend(_scalar(fd, rng) for _ in range(rng.randint(0, 4)))
        else:
            setattr(msg, fd.name, _scalar(fd, rng))


#: a random spec: proto2 or proto3, and a top-level message's fields
SPECS = st.booleans().flatmap(lambda p2: st.tuples(st.just(p2), fields(0, p2)))
SEEDS = st.integers(0, 2**32)


def random_settings(examples: int):
    """Hypothesis settings for tests that run protoc in each example."""
    return settings(max_examples=examples, deadline=None, phases=PHASES,
                    suppress_health_check=[HealthCheck.too_slow,
                                           HealthCheck.function_scoped_fixture])


def package(prefix: str, seed: int) -> str:
    """A package name no other example of this process uses (protoc's modules are
    imported by it)."""
    return f"{prefix}{next(_COUNTER)}_{seed}"


def random_messages(tmp_path, spec, seed, prefix, count, rng=None):
    """A spec's .proto text, compiled by protoc, and ``count`` random messages of its
    ``Top`` (filled from ``rng``, else from ``random.Random(seed)``):
    (text, module, messages)."""
    proto2, f = spec
    pkg = package(prefix, seed)
    text = proto_text(f, proto2, pkg)
    mod = compile_module(tmp_path, text, pkg)
    rng = rng or random.Random(seed)
    msgs = []
    for _ in range(count):
        m = mod.Top()
        fill(m, rng)
        msgs.append(m)
    return text, mod, msgs
