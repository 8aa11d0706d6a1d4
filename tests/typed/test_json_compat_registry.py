"""``typed/json_compat`` against Confluent Schema Registry's own JSON diff, run.

Opt-in: set ``KAFKALOG_JSON_DIFF_SRC`` to a checkout of confluentinc/schema-registry (the
registry is not on Maven Central, so its classes are compiled from that source: the
``json/diff`` package and the two helpers it uses, beside tests/typed/json_diff_oracle's
stand-in for ``JsonSchema`` and a line-in/line-out driver). The loader is everit 1.14.6
from Maven Central, the version the registry pins. Then the cases of test_json_compat.py
must give the registry's differences exactly, and seeded random pairs (objects open,
closed and partially open, tuples, combined schemas, ``not``, ``const``, ``$ref``, draft 4)
its verdict and its incompatible differences (compatible ones found inside combined
branches may pair branches differently: the registry's matching iterates a hash set).
"""
from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from spark_kafkalog.errors import SchemaError
from spark_kafkalog.typed.json_compat import COMPATIBLE_STRICT, differences
from tests.typed.test_json_compat import CASES

SRC = os.environ.get("KAFKALOG_JSON_DIFF_SRC")
HERE = Path(__file__).parent / "json_diff_oracle"
PKG = "json-schema-provider/src/main/java/io/confluent/kafka/schemaregistry/json"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not SRC, reason="KAFKALOG_JSON_DIFF_SRC (a schema-registry checkout) "
                                       "not set"),
    pytest.mark.skipif(not (shutil.which("mvn") and shutil.which("javac")),
                       reason="needs mvn and javac"),
]


@pytest.fixture(scope="module")
def registry_diff(tmp_path_factory):
    work = tmp_path_factory.mktemp("jsondiff")
    cp_file = work / "cp.txt"
    subprocess.run(["mvn", "-q", "-f", str(HERE / "pom.xml"), "dependency:build-classpath",
                    f"-Dmdep.outputFile={cp_file}"], check=True)
    cp = cp_file.read_text().strip()
    root = Path(SRC) / PKG
    sources = sorted((root / "diff").glob("*.java")) + [
        root / "utils" / "Edge.java", root / "utils" / "MaximumCardinalityMatch.java",
        root / "JsonSchemaCancellation.java", HERE / "JsonSchema.java", HERE / "DiffMain.java"]
    out = work / "classes"
    subprocess.run(["javac", "-nowarn", "-d", str(out), "-cp", cp] + [str(s) for s in sources],
                   check=True)

    def run(pairs):
        text = "".join(json.dumps(p) + "\n" for p in pairs)
        done = subprocess.run(["java", "-cp", f"{out}{os.pathsep}{cp}", "oracle.DiffMain"],
                              input=text, capture_output=True, text=True, check=True)
        return [json.loads(line) for line in done.stdout.splitlines()]
    return run


def test_cases_give_the_registry_differences(registry_diff):
    pairs = [(c[1], c[2]) for c in CASES] + [(c[2], c[1]) for c in CASES]
    for (old, new), theirs in zip(pairs, registry_diff(pairs)):
        assert not isinstance(theirs, dict), (old, new, theirs)
        ours = differences(json.dumps(old), json.dumps(new))
        assert Counter(ours) == Counter(tuple(d) for d in theirs), (old, new)


def _leaf(r):
    t = r.choice(["string", "integer", "number", "boolean", "null"])
    s = {"type": t}
    if t == "string":
        for k, v in (("maxLength", r.randint(1, 9)), ("minLength", r.randint(0, 3)),
                     ("pattern", r.choice(["^a", "^b"])), ("format", "date")):
            if r.random() < 0.25:
                s[k] = v
    if t in ("integer", "number"):
        for k in ("maximum", "minimum", "exclusiveMinimum", "multipleOf"):
            if r.random() < 0.2:
                s[k] = r.choice([1, 2, 4, 10, 0.5])
    for k, v in (("enum", r.sample(["a", "b", "c", 1, None], r.randint(1, 3))),
                 ("default", r.choice([1, "x", None])), ("title", r.choice(["t", "u"]))):
        if r.random() < 0.1:
            s[k] = v
    return {"type": [t, "null"]} if r.random() < 0.05 else s


def _schema(r, d=0):
    x = r.random()
    if d > 2 or x < 0.35:
        return _leaf(r)
    if x < 0.7:
        props = {k: _schema(r, d + 1) for k in r.sample("abcde", r.randint(0, 4))}
        s = {"type": "object", "properties": props}
        if props and r.random() < 0.4:
            s["required"] = r.sample(list(props), 1)
        if props and r.random() < 0.2:
            k = r.choice(list(props))
            props[k] = {**props[k], "default": r.choice([0, "d", None])}
        if r.random() < 0.15:
            props["e"] = r.choice([{}, True, False, {"title": "x"}])
        s.update(r.choice([{}, {}, {"additionalProperties": False},
                           {"additionalProperties": True}, {"additionalProperties": _leaf(r)},
                           {"patternProperties": {"^x": _leaf(r)}}, {"maxProperties": 3}]))
        return s
    if x < 0.85:
        s = {"type": "array"}
        if r.random() < 0.7:
            s["items"] = _schema(r, d + 1)
        else:
            s["items"] = [_schema(r, d + 1) for _ in range(r.randint(1, 3))]
            if r.random() < 0.5:
                s["additionalItems"] = r.choice([False, True, _leaf(r)])
        s.update(r.choice([{}, {"maxItems": r.randint(1, 5)}, {"uniqueItems": True}]))
        return s
    if x < 0.9:
        return r.choice([{"not": _leaf(r)}, {"const": r.choice(["a", 1, {"k": 1}, [1]])},
                         {"type": "object", "definitions": {"x": _schema(r, 3)},
                          "properties": {"a": {"$ref": "#/definitions/x"}, "b": _leaf(r)},
                          "dependencies": r.choice([{}, {"a": ["b"]}, {"a": ["b", "c"]},
                                                    {"b": _leaf(r)}])},
                         {"$schema": "http://json-schema.org/draft-04/schema#",
                          "type": "number", "maximum": r.choice([1, 5]),
                          "exclusiveMaximum": r.choice([True, False])}])
    return {r.choice(["oneOf", "anyOf", "allOf"]): [_schema(r, d + 1)
                                                   for _ in range(r.randint(1, 3))]}


def _mutate(r, s, d=0):
    s = json.loads(json.dumps(s))
    if not isinstance(s, dict) or r.random() < 0.15:
        return _schema(r, d)
    props = s.get("properties")
    if props and r.random() < 0.6:
        k = r.choice(list(props))
        op = r.random()
        if op < 0.3:
            del props[k]
            if k in s.get("required", []):
                s["required"].remove(k)
                if not s["required"]:
                    del s["required"]
        elif op < 0.6:
            props[k] = _mutate(r, props[k], d + 1)
        else:
            props["z" + k] = _leaf(r)
        return s
    if props and "required" not in s and r.random() < 0.3:
        s["required"] = [r.choice(list(props))]
        return s
    keys = [k for k in s if k not in ("type", "definitions", "$schema")]
    if keys and r.random() < 0.4:
        del s[r.choice(keys)]
        return s
    for k in ("maxLength", "maximum", "minimum", "maxItems", "multipleOf"):
        if k in s:
            s[k] = r.choice([1, 2, 4, 8, 3])
            return s
    for k in ("oneOf", "anyOf", "allOf"):
        if k in s:
            if r.random() < 0.5:
                s[k].append(_leaf(r))
            elif len(s[k]) > 1:
                s[k].pop()
            else:
                s[k][0] = _mutate(r, s[k][0], d + 1)
            return s
    s.update(_leaf(r))
    return s


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_pairs_get_the_registry_verdict(registry_diff, seed):
    r = random.Random(seed)
    pairs = []
    for _ in range(1000):
        a = _schema(r)
        b = _mutate(r, a)
        pairs += [(a, b), (b, a)]
    checked = 0
    for (old, new), theirs in zip(pairs, registry_diff(pairs)):
        try:
            ours = differences(json.dumps(old), json.dumps(new))
        except SchemaError:
            assert isinstance(theirs, dict), (old, new, theirs)   # neither loads it
            continue
        assert not isinstance(theirs, dict), (old, new, theirs)
        bad = Counter(d for d in ours if d[0] not in COMPATIBLE_STRICT)
        assert bad == Counter(tuple(d) for d in theirs if d[0] not in COMPATIBLE_STRICT), \
            (old, new, theirs, ours)
        checked += 1
    assert checked > 1500
