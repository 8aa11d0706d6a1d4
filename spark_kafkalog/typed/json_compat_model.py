"""JSON Schema documents loaded into the model the registry's JSON diff works on.

Confluent Schema Registry loads a JSON schema (drafts 4, 6, 7) with the everit library and
diffs the loaded objects, not the text, so the diff's answer depends on how keywords become
schemas. :func:`load` reproduces that loading: ``$ref`` alone makes a reference (its
siblings other than id/title/description/default are ignored); otherwise ``enum``,
``allOf``/``anyOf``/``oneOf``, ``not``, ``const``, ``type`` (a list: an anyOf of one schema
per type) and then the keywords no earlier step took (object, array, number, string,
``if``/``then``/``else`` keywords, each giving a schema of its kind) each add a schema; none
gives the empty schema, one gives it, several an allOf of them. Keywords left over are the
schema's unprocessed properties (``connect.type``, ``maxContains``, ``minContains``).
Drafts 2019-09 and 2020-12 are loaded by the registry through another library and are
refused here, as are ``$ref`` targets outside the document and its named references.
"""
from __future__ import annotations

import json
import re
from collections.abc import Mapping

from spark_kafkalog.errors import SchemaError

__all__ = ["Schema", "Document", "load"]

_OBJECT_V4 = ("properties", "required", "minProperties", "maxProperties", "dependencies",
              "patternProperties", "additionalProperties")
_OBJECT_V6 = _OBJECT_V4 + ("propertyNames",)
_ARRAY_V4 = ("items", "additionalItems", "minItems", "maxItems", "uniqueItems")
_ARRAY_V6 = _ARRAY_V4 + ("contains",)
_NUMBER = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")
_STRING = ("minLength", "maxLength", "pattern", "format")
_CONDITIONAL = ("if", "then", "else")
_CRITERIA = ("allOf", "anyOf", "oneOf")


class Schema:
    """One loaded schema. ``kind`` is the loaded class: object, array, string, number,
    boolean, null, enum, const, combined, not, conditional, empty, true, false, ref."""

    def __init__(self, kind: str, node=None, canon: str | None = None):
        self.kind = kind
        self.node = node                      # the JSON it came from
        self.canon = canon if canon is not None else json.dumps(node, sort_keys=True)
        self.id = self.title = self.description = None
        self.has_default = False
        self.default = None
        self.extra: dict = {}                 # unprocessed keywords
        self.criterion = None                 # combined: allOf / anyOf / oneOf
        self.subschemas: list[Schema] = []
        self.ref = self.ref_doc = None        # ref: target text, document it is in
        self.target: Schema | None = None

    def __repr__(self):
        return f"<{self.kind} {self.canon[:60]}>"


class Document:
    """A schema text and its named references (registry reference name -> JSON text),
    loaded once: each ``$ref`` target is one object, so a recursive schema is a cycle."""

    def __init__(self, text: str, named: Mapping[str, str] | None = None):
        root = _json(text, "the schema")
        if not isinstance(root, (dict, bool)):
            raise SchemaError("JSON Schema: a schema must be a JSON object or boolean, not "
                              f"{type(root).__name__}")
        self.spec = 7
        if isinstance(root, dict) and "$schema" in root:
            self.spec = _spec(str(root["$schema"]))
        self.named = dict(named or {})
        self.docs = {"": root}
        self.root_id = root.get("$id" if self.spec > 4 else "id") if isinstance(root, dict) \
            else None
        self._targets: dict = {}
        self._refs: list[Schema] = []
        self.root = self.load(root, "")
        self._targets[("", "")] = self.root
        # every $ref resolves when the registry loads the schema, reached by a diff or not
        while self._refs:
            self.resolve(self._refs.pop())

    # -- loading (everit's SchemaLoader: extractors over the keywords not yet taken) --

    def load(self, node, doc: str) -> Schema:
        if isinstance(node, bool):
            return Schema("true" if node else "false", node)
        if not isinstance(node, dict):
            raise SchemaError(f"JSON Schema: {json.dumps(node)[:80]} is not a schema "
                              "(an object or boolean)")
        left = set(node)
        if "$ref" in node:
            s = Schema("ref", node)
            s.ref, s.ref_doc, s.owner = node["$ref"], doc, self
            self._refs.append(s)
            if not isinstance(s.ref, str):
                raise SchemaError(f"JSON Schema: $ref {s.ref!r} is not a string")
            left.discard("$ref")
        else:
            parts = self._extract(node, doc, left)
            if not parts:
                s = Schema("empty", node)
            elif len(parts) == 1:
                s = parts[0]
                # it stands for the whole node: branches equal only when their text is
                s.canon = json.dumps(node, sort_keys=True)
            else:
                s = Schema("combined", node, "allOf|" + json.dumps(node, sort_keys=True))
                s.criterion, s.subschemas = "allOf", parts
        idkw = "$id" if self.spec > 4 else "id"
        for key in (idkw, "title", "description"):
            if key in left:
                setattr(s, "id" if key == idkw else key, node[key])
                left.discard(key)
        if self.spec == 7:
            left -= {"readOnly", "writeOnly"}
        if "default" in node:
            left.discard("default")
            # everit builds a reference before reading its siblings and patches in their
            # title and description only: it has no default of its own
            if s.kind != "ref":
                s.has_default, s.default = True, node["default"]
        s.extra = {k: node[k] for k in left}
        return s

    def _extract(self, node: dict, doc: str, left: set) -> list[Schema]:
        parts: list[Schema] = []
        obj_kw, arr_kw = (_OBJECT_V4, _ARRAY_V4) if self.spec == 4 else (_OBJECT_V6, _ARRAY_V6)
        if "enum" in left:
            if not isinstance(node["enum"], list):
                raise SchemaError("JSON Schema: enum must be an array")
            s = Schema("enum", node, "enum|" + json.dumps(node["enum"], sort_keys=True))
            s.values = frozenset(json.dumps(v, sort_keys=True) for v in node["enum"])
            parts.append(s)
            left.discard("enum")
        for crit in _CRITERIA:
            if crit in left:
                subs = node[crit]
                if not isinstance(subs, list):
                    raise SchemaError(f"JSON Schema: {crit} must be an array")
                s = Schema("combined", subs, f"{crit}|" + json.dumps(subs, sort_keys=True))
                s.criterion, s.subschemas = crit, [self.load(x, doc) for x in subs]
                parts.append(s)
                left.discard(crit)
        if "not" in left:
            s = Schema("not", node["not"], "not|" + json.dumps(node["not"], sort_keys=True))
            s.must_not = self.load(node["not"], doc)
            parts.append(s)
            left.discard("not")
        if self.spec > 4 and "const" in left:
            value = node["const"]
            # objects and arrays compare as Java maps and lists do: by content
            s = Schema("const", node, "const|" + json.dumps(value, sort_keys=True))
            s.value = json.dumps(value, sort_keys=True)
            parts.append(s)
            left.discard("const")
        if "type" in left:
            t = node["type"]
            left.discard("type")
            if isinstance(t, list):
                s = Schema("combined", node, "anyOf-type|" + json.dumps(node, sort_keys=True))
                s.criterion = "anyOf"
                s.subschemas = [self._typed(x, node, doc, left, obj_kw, arr_kw) for x in t]
                parts.append(s)
            else:
                parts.append(self._typed(t, node, doc, left, obj_kw, arr_kw))
        # keywords no earlier step took still make schemas of their kind
        if any(k in left for k in arr_kw):
            parts.append(self._typed("array", node, doc, left, obj_kw, arr_kw))
        if any(k in left for k in obj_kw):
            parts.append(self._typed("object", node, doc, left, obj_kw, arr_kw))
        if any(k in left for k in _NUMBER):
            parts.append(self._typed("number", node, doc, left, obj_kw, arr_kw))
        if any(k in left for k in _STRING):
            parts.append(self._typed("string", node, doc, left, obj_kw, arr_kw))
        if self.spec == 7 and any(k in left for k in _CONDITIONAL):
            parts.append(Schema("conditional", node, "if|" + json.dumps(node, sort_keys=True)))
            left -= set(_CONDITIONAL)
        return parts

    def _typed(self, t, node: dict, doc: str, left: set, obj_kw, arr_kw) -> Schema:
        canon = f"{t}|" + json.dumps(node, sort_keys=True)
        if t in ("boolean", "null"):
            return Schema(t, node, canon)
        if t in ("string",):
            left -= set(_STRING)
            s = Schema("string", node, canon)
            s.max_length, s.min_length = node.get("maxLength"), node.get("minLength")
            s.pattern = node.get("pattern")
            return s
        if t in ("integer", "number"):
            left -= set(_NUMBER)
            _check_number_keywords(node, self.spec)
            s = Schema("number", node, canon)
            s.integer = t == "integer"
            s.maximum, s.minimum = node.get("maximum"), node.get("minimum")
            s.multiple_of = node.get("multipleOf")
            # draft 4's boolean exclusiveMaximum/Minimum is a flag, not a limit
            s.ex_max = node.get("exclusiveMaximum") if self.spec > 4 else None
            s.ex_min = node.get("exclusiveMinimum") if self.spec > 4 else None
            return s
        if t == "object":
            left -= set(obj_kw)
            return self._object(node, doc, canon)
        if t == "array":
            left -= set(arr_kw)
            return self._array(node, doc, canon)
        raise SchemaError(f"JSON Schema: unknown type {t!r}")

    def _object(self, node: dict, doc: str, canon: str) -> Schema:
        s = Schema("object", node, canon)
        idkw = "$id" if self.spec > 4 else "id"
        props = node.get("properties", {})
        s.properties = {k: self.load(v, doc) for k, v in props.items()
                        if k != idkw or isinstance(v, dict)}
        s.required = list(node.get("required", []))
        s.max_properties, s.min_properties = node.get("maxProperties"), node.get("minProperties")
        add = node.get("additionalProperties", True)
        s.permits_additional = add is not False
        s.additional = self.load(add, doc) if isinstance(add, dict) else None
        s.patterns = []
        for pattern, sub in node.get("patternProperties", {}).items():
            try:
                s.patterns.append((re.compile(pattern), self.load(sub, doc)))
            except re.error as err:
                raise SchemaError(f"JSON Schema compatibility: patternProperties "
                                  f"{pattern!r} is not a regular expression this writer "
                                  f"can match ({err})") from err
        s.prop_deps, s.schema_deps = {}, {}
        for key, dep in node.get("dependencies", {}).items():
            if isinstance(dep, list):
                s.prop_deps[key] = frozenset(dep)
            else:
                s.schema_deps[key] = self.load(dep, doc)
        return s

    def _array(self, node: dict, doc: str, canon: str) -> Schema:
        s = Schema("array", node, canon)
        items = node.get("items")
        s.all_items = self.load(items, doc) if isinstance(items, (dict, bool)) else None
        s.item_list = [self.load(x, doc) for x in items] if isinstance(items, list) else []
        add = node.get("additionalItems", True)
        s.permits_additional = add is not False
        s.additional = self.load(add, doc) if isinstance(add, dict) else None
        s.max_items, s.min_items = node.get("maxItems"), node.get("minItems")
        s.unique = node.get("uniqueItems", False) is True
        return s

    # -- $ref ------------------------------------------------------------------

    def resolve(self, s: Schema) -> Schema:
        """The schema a reference names: a JSON pointer into its own document, or into a
        named reference (``name`` or ``name#pointer``)."""
        if s.target is not None:
            return s.target
        name, _, frag = s.ref.partition("#")
        if not name:
            doc = s.ref_doc
        elif name in self.named:
            doc = name
        elif name == self.root_id:
            doc = ""
        else:
            raise SchemaError(f"JSON Schema compatibility: $ref {s.ref!r} is neither in the "
                              "document nor among its references (the registry resolves "
                              "no other)")
        if doc not in self.docs:
            self.docs[doc] = _json(self.named[doc], f"reference {doc!r}")
        key = (doc, frag)
        if key not in self._targets:
            node = self.docs[doc]
            parts = [p for p in frag.split("/") if p]
            if parts[:1] == ["$defs"] and isinstance(node, dict) and \
                    parts[1:2] and parts[1] not in node.get("$defs", {}):
                # the registry bridges a document's "definitions" into "$defs"
                parts[0] = "definitions"
            for part in parts:
                part = part.replace("~1", "/").replace("~0", "~")
                try:
                    node = node[int(part)] if isinstance(node, list) else node[part]
                except (KeyError, IndexError, ValueError, TypeError):
                    raise SchemaError(f"JSON Schema $ref {s.ref!r} points at nothing") from None
            self._targets[key] = self.load(node, doc)
        s.target = self._targets[key]
        return s.target


def _check_number_keywords(node: dict, spec: int) -> None:
    """The registry's loader refuses these, so no such schema is ever registered."""
    for key in _NUMBER:
        if key not in node:
            continue
        value = node[key]
        flag = spec == 4 and key.startswith("exclusive")      # draft 4: a boolean
        if isinstance(value, bool) != flag or not isinstance(value, (int, float)):
            raise SchemaError(f"JSON Schema: {key} {value!r} is not a "
                              f"{'boolean' if flag else 'number'} (draft {spec})")
    if node.get("multipleOf") == 0:
        raise SchemaError("JSON Schema: multipleOf 0")


def _spec(url: str) -> int:
    for draft, n in (("draft-04", 4), ("draft-06", 6), ("draft-07", 7)):
        if draft in url:
            return n
    if "2019-09" in url or "2020-12" in url:
        raise SchemaError(f"JSON Schema compatibility: $schema {url} (draft 2019-09 / "
                          "2020-12) is diffed by the registry through another loader, not "
                          "reproduced by this writer; register it through a registry")
    return 7


def _json(text: str, what: str):
    try:
        return json.loads(text)
    except ValueError as err:
        raise SchemaError(f"JSON Schema ({what}) is not JSON: {err}") from err


def load(text: str, named: Mapping[str, str] | None = None) -> Document:
    """``text`` (and its named references) loaded as the registry loads it."""
    return Document(text, named)
