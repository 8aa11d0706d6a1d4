"""JSON Schema compatibility as Confluent Schema Registry decides it (``typed/json_compat``).

Every case below is a schema pair written here, with the differences the registry's
``json/diff`` rules give for it in both directions (``Difference.Type`` and JSON path; the
diff of (previous, new) decides BACKWARD, of (new, previous) FORWARD, both FULL) and the
verdict for each level, worked out by hand from the registry's COMPATIBLE_CHANGES_STRICT
set: e.g. a property added to an open content model (additionalProperties absent) is
incompatible, to a closed one (false) compatible; removing one is the reverse. The
verdicts are checked through ``check_compatibility``, the writer's own entry point.
"""
from __future__ import annotations

import json
from collections import Counter

import pytest

from spark_kafkalog.errors import SchemaError
from spark_kafkalog.log.write.schemas import check_compatibility
from spark_kafkalog.typed.json_compat import differences, incompatibilities
from spark_kafkalog.typed.registry import RegistryState
from tests.typed import registry_records as rr

S, I, NUM, NULL = {"type": "string"}, {"type": "integer"}, {"type": "number"}, {"type": "null"}


def obj(props, required=(), add=None, **kw):
    out = {"type": "object", "properties": props}
    if required:
        out["required"] = list(required)
    if add is not None:
        out["additionalProperties"] = add
    out.update(kw)
    return out


def arr(**kw):
    return {"type": "array", **kw}


RLIST = {"definitions": {"n": obj({"next": {"$ref": "#/definitions/n"}, "v": I})},
         "$ref": "#/definitions/n"}
RLIST_NUM = json.loads(json.dumps(RLIST).replace("integer", "number"))

# (name, previous, new, diff(previous, new), diff(new, previous), BACKWARD ok, FORWARD ok)
CASES = [
    ("open+optional", obj({"a": S}), obj({"a": S, "b": I}),
     [("OPTIONAL_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL", "#/properties/b")],
     [("PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL", "#/properties/b")], False, True),
    ("closed+optional", obj({"a": S}, add=False), obj({"a": S, "b": I}, add=False),
     [("OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL", "#/properties/b")],
     [("PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL", "#/properties/b")], True, False),
    ("closed+required", obj({"a": S}, add=False), obj({"a": S, "b": I}, ["b"], add=False),
     [("REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL", "#/properties/b")],
     [("PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL", "#/properties/b")], False, False),
    ("closed+required+default", obj({"a": S}, add=False),
     obj({"a": S, "b": {"type": "integer", "default": 0}}, ["b"], add=False),
     [("REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_UNOPEN_CONTENT_MODEL", "#/properties/b")],
     [("PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL", "#/properties/b")], True, False),
    ("open+required", obj({"a": S}), obj({"a": S, "b": I}, ["b"]),
     [("REQUIRED_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL", "#/properties/b")],
     [("PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL", "#/properties/b")], False, True),
    ("open+required+default", obj({"a": S}),
     obj({"a": S, "b": {"type": "integer", "default": 0}}, ["b"]),
     [("REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_OPEN_CONTENT_MODEL", "#/properties/b")],
     [("PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL", "#/properties/b")], False, True),
    ("open+empty schema", obj({"a": S}), obj({"a": S, "b": {}}),
     [("PROPERTY_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL", "#/properties/b")],
     [("PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL", "#/properties/b")], True, True),
    ("closed-false property", obj({"a": S, "b": False}, add=False), obj({"a": S}, add=False),
     [("PROPERTY_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL", "#/properties/b")],
     [("OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL", "#/properties/b")], True, True),
    ("closed->open", obj({"a": S}, add=False), obj({"a": S}),
     [("ADDITIONAL_PROPERTIES_ADDED", "#/additionalProperties")],
     [("ADDITIONAL_PROPERTIES_REMOVED", "#/additionalProperties")], True, False),
    ("open->true", obj({"a": S}), obj({"a": S}, add=True), [], [], True, True),
    ("open->partial", obj({"a": S}), obj({"a": S}, add=S),
     [("ADDITIONAL_PROPERTIES_NARROWED", "#/additionalProperties")],
     [("ADDITIONAL_PROPERTIES_EXTENDED", "#/additionalProperties")], False, True),
    ("partial string->integer", obj({"a": S}, add=S), obj({"a": S}, add=I),
     [("TYPE_CHANGED", "#/additionalProperties")],
     [("TYPE_CHANGED", "#/additionalProperties")], False, False),
    ("partial covers added", obj({"a": S}, add=S), obj({"a": S, "b": S}, add=S),
     [("PROPERTY_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", "#/properties/b"),
      ("OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL", "#/properties/b")],
     [("PROPERTY_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", "#/properties/b")],
     True, True),
    ("partial does not cover", obj({"a": S}, add=S), obj({"a": S, "b": I}, add=S),
     [("TYPE_CHANGED", "#/properties/b"),
      ("PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", "#/properties/b"),
      ("OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL", "#/properties/b")],
     [("TYPE_CHANGED", "#/properties/b"),
      ("PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", "#/properties/b")],
     False, False),
    ("patternProperties cover", obj({"a": S}, patternProperties={"^x_": I}),
     obj({"a": S, "x_n": I}, patternProperties={"^x_": I}),
     [("PROPERTY_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", "#/properties/x_n"),
      ("OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL", "#/properties/x_n")],
     [("PROPERTY_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", "#/properties/x_n")],
     True, True),
    ("patternProperties miss", obj({"a": S}, patternProperties={"^x_": I}),
     obj({"a": S, "y": I}, patternProperties={"^x_": I}),
     [("OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL", "#/properties/y")],
     [("PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL", "#/properties/y")], True, False),
    ("required added", obj({"a": S, "b": I}), obj({"a": S, "b": I}, ["b"]),
     [("REQUIRED_ATTRIBUTE_ADDED", "#/required/b")],
     [("REQUIRED_ATTRIBUTE_REMOVED", "#/required/b")], False, True),
    ("required added with default", obj({"a": S, "b": {"type": "integer", "default": 1}}),
     obj({"a": S, "b": {"type": "integer", "default": 1}}, ["b"]),
     [("REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED", "#/required/b")],
     [("REQUIRED_ATTRIBUTE_REMOVED", "#/required/b")], True, True),
    ("required of no property", obj({"a": S}), obj({"a": S}, ["zz"]), [], [], True, True),
    ("number->integer", NUM, I, [("TYPE_NARROWED", "#/")], [("TYPE_EXTENDED", "#/")],
     False, True),
    ("string->integer", S, I, [("TYPE_CHANGED", "#/")], [("TYPE_CHANGED", "#/")],
     False, False),
    ("maxLength up", {**S, "maxLength": 10}, {**S, "maxLength": 20},
     [("MAX_LENGTH_INCREASED", "#/maxLength")], [("MAX_LENGTH_DECREASED", "#/maxLength")],
     True, False),
    ("maxLength added", S, {**S, "maxLength": 5}, [("MAX_LENGTH_ADDED", "#/maxLength")],
     [("MAX_LENGTH_REMOVED", "#/maxLength")], False, True),
    ("minLength down", {**S, "minLength": 2}, {**S, "minLength": 1},
     [("MIN_LENGTH_DECREASED", "#/minLength")], [("MIN_LENGTH_INCREASED", "#/minLength")],
     True, False),
    ("pattern changed", {**S, "pattern": "^a"}, {**S, "pattern": "^b"},
     [("PATTERN_CHANGED", "#/pattern")], [("PATTERN_CHANGED", "#/pattern")], False, False),
    ("pattern added", S, {**S, "pattern": "^a"}, [("PATTERN_ADDED", "#/pattern")],
     [("PATTERN_REMOVED", "#/pattern")], False, True),
    ("format changed", {**S, "format": "date"}, {**S, "format": "date-time"}, [], [],
     True, True),
    ("maximum up", {**I, "maximum": 10}, {**I, "maximum": 100},
     [("MAXIMUM_INCREASED", "#/maximum")], [("MAXIMUM_DECREASED", "#/maximum")], True, False),
    ("minimum removed", {**I, "minimum": 0}, I, [("MINIMUM_REMOVED", "#/minimum")],
     [("MINIMUM_ADDED", "#/minimum")], True, False),
    ("exclusiveMinimum down", {**NUM, "exclusiveMinimum": 0}, {**NUM, "exclusiveMinimum": -5},
     [("EXCLUSIVE_MINIMUM_DECREASED", "#/exclusiveMinimum")],
     [("EXCLUSIVE_MINIMUM_INCREASED", "#/exclusiveMinimum")], True, False),
    # the registry compares a decreased exclusiveMaximum with the new *maximum*
    ("exclusiveMaximum vs maximum", {**NUM, "exclusiveMaximum": 20, "maximum": 30},
     {**NUM, "exclusiveMaximum": 10, "maximum": 30}, [],
     [("EXCLUSIVE_MAXIMUM_INCREASED", "#/exclusiveMaximum")], True, True),
    ("multipleOf 2->4", {**I, "multipleOf": 2}, {**I, "multipleOf": 4},
     [("MULTIPLE_OF_EXPANDED", "#/multipleOf")], [("MULTIPLE_OF_REDUCED", "#/multipleOf")],
     False, True),
    ("multipleOf 2->3", {**NUM, "multipleOf": 2}, {**NUM, "multipleOf": 3},
     [("MULTIPLE_OF_CHANGED", "#/multipleOf")], [("MULTIPLE_OF_CHANGED", "#/multipleOf")],
     False, False),
    ("multipleOf 0.5 removed", {**NUM, "multipleOf": 0.5}, NUM,
     [("MULTIPLE_OF_REMOVED", "#/multipleOf")], [("MULTIPLE_OF_ADDED", "#/multipleOf")],
     True, False),
    ("enum extended", {"enum": ["a", "b"]}, {"enum": ["b", "a", "c"]},
     [("ENUM_ARRAY_EXTENDED", "#/enum")], [("ENUM_ARRAY_NARROWED", "#/enum")], True, False),
    ("enum changed", {"enum": ["a", "b"]}, {"enum": ["a", "c"]},
     [("ENUM_ARRAY_CHANGED", "#/enum")], [("ENUM_ARRAY_CHANGED", "#/enum")], False, False),
    ("const changed", {"const": "x"}, {"const": "y"}, [("ENUM_ARRAY_CHANGED", "#/const")],
     [("ENUM_ARRAY_CHANGED", "#/const")], False, False),
    ("object const reordered", {"const": {"a": 1, "b": [1, 2]}},
     {"const": {"b": [1, 2], "a": 1}}, [], [], True, True),
    ("object const changed", {"const": {"a": 1}}, {"const": {"a": 1.5}},
     [("ENUM_ARRAY_CHANGED", "#/const")], [("ENUM_ARRAY_CHANGED", "#/const")], False, False),
    # "format" is a string keyword: beside "integer" it adds a string branch (an allOf)
    ("format beside integer", I, {**I, "format": "int64"}, [("TYPE_CHANGED", "#/")],
     [("PRODUCT_TYPE_NARROWED", "#/")], False, True),
    ("oneOf extended", {"oneOf": [S, I]}, {"oneOf": [I, S, NULL]},
     [("SUM_TYPE_EXTENDED", "#/")], [("SUM_TYPE_NARROWED", "#/")], True, False),
    ("anyOf->oneOf", {"anyOf": [S, I]}, {"oneOf": [S, I]},
     [("COMBINED_TYPE_CHANGED", "#/")], [("COMBINED_TYPE_EXTENDED", "#/")], False, True),
    ("oneOf branch changed", {"oneOf": [S, I]}, {"oneOf": [S, {"type": "boolean"}]},
     [("COMBINED_TYPE_SUBSCHEMAS_CHANGED", "#/")],
     [("COMBINED_TYPE_SUBSCHEMAS_CHANGED", "#/")], False, False),
    ("allOf extended", {"allOf": [obj({"a": S})]}, {"allOf": [obj({"a": S}), obj({"b": I})]},
     [("PRODUCT_TYPE_EXTENDED", "#/")], [("PRODUCT_TYPE_NARROWED", "#/")], False, True),
    ("type list widened", S, {"type": ["string", "null"]}, [("SUM_TYPE_EXTENDED", "#/")],
     [("TYPE_CHANGED", "#/")], True, False),
    ("not narrowed", {"not": S}, {"not": {"type": ["string", "integer"]}},
     [("NOT_TYPE_EXTENDED", "#/not")], [("NOT_TYPE_NARROWED", "#/not")], False, True),
    ("items changed", arr(items=S), arr(items=I), [("TYPE_CHANGED", "#/items")],
     [("TYPE_CHANGED", "#/items")], False, False),
    ("items added", arr(), arr(items=S), [("SCHEMA_ADDED", "#/items")],
     [("SCHEMA_REMOVED", "#/items")], False, True),
    ("maxItems up", arr(items=S, maxItems=5), arr(items=S, maxItems=10),
     [("MAX_ITEMS_INCREASED", "#/maxItems")], [("MAX_ITEMS_DECREASED", "#/maxItems")],
     True, False),
    ("minItems added", arr(items=S), arr(items=S, minItems=1),
     [("MIN_ITEMS_ADDED", "#/minItems")], [("MIN_ITEMS_REMOVED", "#/minItems")], False, True),
    ("uniqueItems added", arr(items=S), arr(items=S, uniqueItems=True),
     [("UNIQUE_ITEMS_ADDED", "#/uniqueItems")], [("UNIQUE_ITEMS_REMOVED", "#/uniqueItems")],
     False, True),
    ("tuple item open", arr(items=[S]), arr(items=[S, I]),
     [("ITEM_ADDED_TO_OPEN_CONTENT_MODEL", "#/items/1")],
     [("ITEM_REMOVED_FROM_OPEN_CONTENT_MODEL", "#/items/1")], False, True),
    ("tuple item closed", arr(items=[S], additionalItems=False),
     arr(items=[S, I], additionalItems=False),
     [("ITEM_ADDED_TO_CLOSED_CONTENT_MODEL", "#/items/1")],
     [("ITEM_REMOVED_FROM_CLOSED_CONTENT_MODEL", "#/items/1")], True, False),
    ("tuple empty item open", arr(items=[S]), arr(items=[S, {}]),
     [("ITEM_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL", "#/items/1")],
     [("ITEM_REMOVED_FROM_OPEN_CONTENT_MODEL", "#/items/1")], True, True),
    ("additionalItems allowed", arr(items=[S], additionalItems=False),
     arr(items=[S], additionalItems=True),
     [("ADDITIONAL_ITEMS_ADDED", "#/additionalItems")],
     [("ADDITIONAL_ITEMS_REMOVED", "#/additionalItems")], True, False),
    ("tuple partial covers", arr(items=[S], additionalItems=S),
     arr(items=[S, S], additionalItems=S),
     [("ITEM_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", "#/items/1")],
     [("ITEM_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", "#/items/1")], True, True),
    ("maxContains up", arr(items=S, contains=S, maxContains=2),
     arr(items=S, contains=S, maxContains=3),
     [("MAX_CONTAINS_INCREASED", "#/maxContains")],
     [("MAX_CONTAINS_DECREASED", "#/maxContains")], True, False),
    ("dependency extended", obj({"a": S, "b": S, "c": S}, dependencies={"a": ["b"]}),
     obj({"a": S, "b": S, "c": S}, dependencies={"a": ["b", "c"]}),
     [("DEPENDENCY_ARRAY_EXTENDED", "#/dependencies/a")],
     [("DEPENDENCY_ARRAY_NARROWED", "#/dependencies/a")], False, True),
    ("dependency schema added", obj({"a": S}), obj({"a": S}, dependencies={"a": obj({})}),
     [("DEPENDENCY_SCHEMA_ADDED", "#/dependencies/a")],
     [("DEPENDENCY_SCHEMA_REMOVED", "#/dependencies/a")], False, True),
    ("maxProperties removed", obj({"a": S}, maxProperties=3), obj({"a": S}),
     [("MAX_PROPERTIES_REMOVED", "#/maxProperties")],
     [("MAX_PROPERTIES_ADDED", "#/maxProperties")], True, False),
    ("minProperties up", obj({"a": S}, minProperties=0), obj({"a": S}, minProperties=1),
     [("MIN_PROPERTIES_INCREASED", "#/minProperties")],
     [("MIN_PROPERTIES_DECREASED", "#/minProperties")], False, True),
    ("$ref target changed", obj({"a": {"$ref": "#/definitions/x"}}, definitions={"x": S}),
     obj({"a": {"$ref": "#/definitions/x"}}, definitions={"x": I}),
     [("TYPE_CHANGED", "#/properties/a")], [("TYPE_CHANGED", "#/properties/a")],
     False, False),
    # a "$ref" keeps no "default" beside it: the required property has none
    ("$ref default sibling", obj({"a": {"$ref": "#/definitions/x", "default": 3}},
                                 definitions={"x": I}),
     obj({"a": {"$ref": "#/definitions/x", "default": 3}}, ["a"], definitions={"x": I}),
     [("REQUIRED_ATTRIBUTE_ADDED", "#/required/a")],
     [("REQUIRED_ATTRIBUTE_REMOVED", "#/required/a")], False, True),
    ("$ref inlined", obj({"a": {"$ref": "#/definitions/x"}}, definitions={"x": S}),
     obj({"a": S}), [], [], True, True),
    ("nested closed", obj({"o": obj({"x": I}, add=False)}),
     obj({"o": obj({"x": I, "y": S}, add=False)}),
     [("OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL", "#/properties/o/properties/y")],
     [("PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL", "#/properties/o/properties/y")],
     True, False),
    ("property -> false", obj({"a": S}), obj({"a": False}),
     [("TYPE_CHANGED", "#/properties/a")], [], False, True),
    ("{} -> true", obj({"a": {}}), obj({"a": True}), [], [], True, True),
    ("connect bytes", {**S, "connect.type": "bytes"}, {**NUM, "connect.type": "bytes"},
     [], [], True, True),
    ("metadata", {**obj({"a": {**I, "default": 1}}), "title": "A", "description": "d"},
     {**obj({"a": {**I, "default": 2}}), "title": "B", "description": "e", "$id": "x"},
     [("ID_CHANGED", "#/"), ("TITLE_CHANGED", "#/"), ("DESCRIPTION_CHANGED", "#/"),
      ("DEFAULT_CHANGED", "#/properties/a")],
     [("ID_CHANGED", "#/"), ("TITLE_CHANGED", "#/"), ("DESCRIPTION_CHANGED", "#/"),
      ("DEFAULT_CHANGED", "#/properties/a")], True, True),
    ("additionalItems partial", arr(items=[S]), arr(items=[S], additionalItems=S),
     [("ADDITIONAL_ITEMS_NARROWED", "#/additionalItems")],
     [("ADDITIONAL_ITEMS_EXTENDED", "#/additionalItems")], False, True),
    ("dependency added", obj({"a": S, "b": S}), obj({"a": S, "b": S}, dependencies={"a": ["b"]}),
     [("DEPENDENCY_ARRAY_ADDED", "#/dependencies/a")],
     [("DEPENDENCY_ARRAY_REMOVED", "#/dependencies/a")], False, True),
    ("dependency changed", obj({"a": S, "b": S, "c": S}, dependencies={"a": ["b"]}),
     obj({"a": S, "b": S, "c": S}, dependencies={"a": ["c"]}),
     [("DEPENDENCY_ARRAY_CHANGED", "#/dependencies/a")],
     [("DEPENDENCY_ARRAY_CHANGED", "#/dependencies/a")], False, False),
    ("exclusiveMaximum added", NUM, {**NUM, "exclusiveMaximum": 10},
     [("EXCLUSIVE_MAXIMUM_ADDED", "#/exclusiveMaximum")],
     [("EXCLUSIVE_MAXIMUM_REMOVED", "#/exclusiveMaximum")], False, True),
    ("exclusiveMaximum down past maximum", {**NUM, "exclusiveMaximum": 20, "maximum": 5},
     {**NUM, "exclusiveMaximum": 10, "maximum": 5},
     [("EXCLUSIVE_MAXIMUM_DECREASED", "#/exclusiveMaximum")],
     [("EXCLUSIVE_MAXIMUM_INCREASED", "#/exclusiveMaximum")], False, True),
    ("exclusiveMinimum added", NUM, {**NUM, "exclusiveMinimum": 0},
     [("EXCLUSIVE_MINIMUM_ADDED", "#/exclusiveMinimum")],
     [("EXCLUSIVE_MINIMUM_REMOVED", "#/exclusiveMinimum")], False, True),
    ("tuple partial does not cover", arr(items=[S], additionalItems=S),
     arr(items=[S, I], additionalItems=S),
     [("TYPE_CHANGED", "#/items/1"),
      ("ITEM_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", "#/items/1")],
     [("TYPE_CHANGED", "#/items/1"),
      ("ITEM_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", "#/items/1")],
     False, False),
    ("tuple false item removed", arr(items=[S, False], additionalItems=False),
     arr(items=[S], additionalItems=False),
     [("ITEM_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL", "#/items/1")],
     [("ITEM_ADDED_TO_CLOSED_CONTENT_MODEL", "#/items/1")], True, True),
    ("maximum added", I, {**I, "maximum": 5}, [("MAXIMUM_ADDED", "#/maximum")],
     [("MAXIMUM_REMOVED", "#/maximum")], False, True),
    ("minimum up", {**I, "minimum": 0}, {**I, "minimum": 5},
     [("MINIMUM_INCREASED", "#/minimum")], [("MINIMUM_DECREASED", "#/minimum")], False, True),
    ("contains bounds added", arr(items=S, contains=S),
     arr(items=S, contains=S, maxContains=3, minContains=1),
     [("MAX_CONTAINS_ADDED", "#/maxContains"), ("MIN_CONTAINS_ADDED", "#/minContains")],
     [("MAX_CONTAINS_REMOVED", "#/maxContains"), ("MIN_CONTAINS_REMOVED", "#/minContains")],
     False, True),
    ("minContains up", arr(items=S, contains=S, minContains=1),
     arr(items=S, contains=S, minContains=2),
     [("MIN_CONTAINS_INCREASED", "#/minContains")],
     [("MIN_CONTAINS_DECREASED", "#/minContains")], False, True),
    ("maxItems added", arr(items=S), arr(items=S, maxItems=3),
     [("MAX_ITEMS_ADDED", "#/maxItems")], [("MAX_ITEMS_REMOVED", "#/maxItems")], False, True),
    ("minItems up", arr(items=S, minItems=1), arr(items=S, minItems=2),
     [("MIN_ITEMS_INCREASED", "#/minItems")], [("MIN_ITEMS_DECREASED", "#/minItems")],
     False, True),
    ("minLength added", S, {**S, "minLength": 1}, [("MIN_LENGTH_ADDED", "#/minLength")],
     [("MIN_LENGTH_REMOVED", "#/minLength")], False, True),
    ("maxProperties up", obj({"a": S}, maxProperties=3), obj({"a": S}, maxProperties=5),
     [("MAX_PROPERTIES_INCREASED", "#/maxProperties")],
     [("MAX_PROPERTIES_DECREASED", "#/maxProperties")], True, False),
    ("minProperties added", obj({"a": S}), obj({"a": S}, minProperties=1),
     [("MIN_PROPERTIES_ADDED", "#/minProperties")],
     [("MIN_PROPERTIES_REMOVED", "#/minProperties")], False, True),
    ("recursive", RLIST, RLIST_NUM, [("TYPE_EXTENDED", "#/properties/v")],
     [("TYPE_NARROWED", "#/properties/next/properties/v"), ("TYPE_NARROWED", "#/properties/v")],
     True, False),
    # if/then/else is loaded but not diffed by the registry
    ("conditional", {"if": obj({"a": S}), "then": obj({"b": I})},
     {"if": obj({"a": S}), "then": obj({"b": S})}, [], [], True, True),
    ("draft-04 exclusive flag", {"$schema": "http://json-schema.org/draft-04/schema#",
                                 **NUM, "maximum": 5, "exclusiveMaximum": True},
     {"$schema": "http://json-schema.org/draft-04/schema#", **NUM, "maximum": 5}, [], [],
     True, True),
]


def _state(subject, versions, level, policy=None, deleted=(), global_policy=None):
    records = [(rr.schema_key(subject, v),
                rr.schema_value(subject, v, 10 + v, json.dumps(s), schema_type="JSON",
                                deleted=v in deleted))
               for v, s in enumerate(versions, 1)]
    config = {"subject": subject, "compatibilityLevel": level}
    if policy:
        config["compatibilityPolicy"] = policy
    records.append((rr.subject_key("CONFIG", subject), json.dumps(config).encode()))
    if global_policy:
        records.append((rr.subject_key("CONFIG"), json.dumps(
            {"compatibilityLevel": "FULL", "compatibilityPolicy": global_policy}).encode()))
    return RegistryState.from_records((i, k, v) for i, (k, v) in enumerate(records))


def _ok(level, versions, new, **kw):
    try:
        assert check_compatibility(_state("s", versions, level, **kw), "s", json.dumps(new),
                                   "JSON") == level
        return True
    except SchemaError as err:
        assert f"compatibility level {level}" in str(err)
        return False


@pytest.mark.parametrize("name, old, new, back, fwd, back_ok, fwd_ok", CASES,
                         ids=[c[0] for c in CASES])
def test_differences_both_ways(name, old, new, back, fwd, back_ok, fwd_ok):
    assert Counter(differences(json.dumps(old), json.dumps(new))) == Counter(back)
    assert Counter(differences(json.dumps(new), json.dumps(old))) == Counter(fwd)


@pytest.mark.parametrize("name, old, new, back, fwd, back_ok, fwd_ok", CASES,
                         ids=[c[0] for c in CASES])
def test_levels(name, old, new, back, fwd, back_ok, fwd_ok):
    assert _ok("BACKWARD", [old], new) is back_ok
    assert _ok("FORWARD", [old], new) is fwd_ok
    assert _ok("FULL", [old], new) is (back_ok and fwd_ok)
    assert _ok("NONE", [old], new)


def test_case_count_and_coverage():
    assert len(CASES) >= 40
    seen = {t for c in CASES for t, _ in c[3] + c[4]}
    assert len(seen) >= 115


def test_synthetic_all_of_of_type_and_enum():
    # "type" beside "enum" loads as an allOf of both: the enum branch pairs with the enum
    old, new = {**S, "enum": ["a"]}, {**S, "enum": ["a", "b"]}
    got = differences(json.dumps(old), json.dumps(new))
    assert [t for t, _ in got] == ["ENUM_ARRAY_EXTENDED"] and got[0][1].endswith("/enum")
    assert _ok("BACKWARD", [old], new) and not _ok("FORWARD", [old], new)


def test_lenient_policy():
    old, new = obj({"a": S}), obj({"a": S, "b": I})
    assert not _ok("BACKWARD", [old], new)
    assert _ok("BACKWARD", [old], new, policy="LENIENT")
    assert incompatibilities(json.dumps(old), json.dumps(new), "LENIENT") == []
    # a subject config without a policy takes the global one; its own wins over it
    assert _ok("BACKWARD", [old], new, global_policy="LENIENT")
    assert not _ok("BACKWARD", [old], new, policy="STRICT", global_policy="LENIENT")
    # closed model, property removed: incompatible under STRICT only
    assert _ok("FORWARD", [obj({"a": S}, add=False)], obj({"a": S, "b": I}, add=False),
               policy="LENIENT")


def test_refusal_names_subject_level_version_and_differences():
    state = _state("orders-value", [obj({"a": S}, add=False), obj({"a": S, "b": I}, add=False)],
                   "BACKWARD_TRANSITIVE")
    with pytest.raises(SchemaError) as err:
        check_compatibility(state, "orders-value", json.dumps(obj({"a": I}, add=False)),
                            "JSON")
    msg = str(err.value)
    assert "subject orders-value" in msg and "BACKWARD_TRANSITIVE" in msg
    assert "version 2 (id 12)" in msg
    assert "TYPE_CHANGED at #/properties/a" in msg
    assert "PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL at #/properties/b" in msg


V1 = obj({"a": S}, add=False)
V2 = obj({"a": S, "b": I}, add=False)                # optional added: BACKWARD of V1
V3 = obj({"a": S, "b": I, "c": S}, ["c"], add=False)  # required added: not BACKWARD of V2


@pytest.mark.parametrize("level, versions, new, ok", [
    # version 2 changed the type (registered under NONE): only the latest is checked
    ("BACKWARD", [S, I], {**I, "title": "t"}, True),
    ("BACKWARD_TRANSITIVE", [S, I], {**I, "title": "t"}, False),
    # a property leaves a closed model for an open one: compatible with both versions
    ("BACKWARD_TRANSITIVE", [obj({"a": S, "b": I}, add=False), obj({"a": S, "b": I})],
     obj({"a": S}), True),
    # optional properties added one by one to a closed model stay BACKWARD transitively
    ("BACKWARD_TRANSITIVE", [V1, V2], obj({"a": S, "b": I, "c": S}, add=False), True),
    ("BACKWARD_TRANSITIVE", [V1, V2], V3, False),
    # FORWARD: the old schemas read the new data
    ("FORWARD", [obj({"a": S, "b": I}), obj({"a": S})], obj({"a": S}, add=False), True),
    ("FORWARD_TRANSITIVE", [S, I], I, False),
    ("FORWARD", [S, I], I, True),
    ("FULL", [S, {**S, "title": "t"}], {**S, "description": "d"}, True),
    ("FULL_TRANSITIVE", [S, {**S, "maxLength": 3}], {**S, "maxLength": 3}, False),
    ("FULL", [S, {**S, "maxLength": 3}], {**S, "maxLength": 3}, True),
])
def test_transitive_levels(level, versions, new, ok):
    assert _ok(level, versions, new) is ok


def test_transitive_skips_soft_deleted_versions():
    assert not _ok("BACKWARD_TRANSITIVE", [S, I], {**I, "title": "t"})
    assert _ok("BACKWARD_TRANSITIVE", [S, I], {**I, "title": "t"}, deleted=(1,))


@pytest.mark.parametrize("schema, match", [
    ({"$schema": "https://json-schema.org/draft/2020-12/schema", **S}, "2020-12"),
    (obj({"a": {"$ref": "http://example.com/x.json"}}), "neither in the document"),
])
def test_features_not_diffed_are_refused(schema, match):
    with pytest.raises(SchemaError, match=match) as err:
        check_compatibility(_state("s", [S], "BACKWARD"), "s", json.dumps(schema), "JSON")
    assert "subject s under compatibility level BACKWARD" in str(err.value)
    assert "\n" not in str(err.value)
    # the same schema registered before: the message names its version
    with pytest.raises(SchemaError, match="against version 1 \\(id 11\\): .*" + match):
        check_compatibility(_state("s", [schema], "FORWARD"), "s", json.dumps(S), "JSON")


def test_previous_null_const_is_refused():
    # the registry's diff calls equals on the previous const: null fails it
    old, new = obj({"a": {"const": None}}), obj({"a": {"const": 1}})
    with pytest.raises(SchemaError, match="against version 1 \\(id 11\\): .*const null"):
        check_compatibility(_state("s", [old], "BACKWARD"), "s", json.dumps(new), "JSON")
    assert _ok("FORWARD", [old], new) is False        # 1 -> null: changed, incompatible


def test_decreased_exclusive_maximum_without_maximum_is_refused():
    # the registry's own diff fails on it (it compares with an absent maximum)
    old, new = {**NUM, "exclusiveMaximum": 20}, {**NUM, "exclusiveMaximum": 10}
    assert _ok("FORWARD", [old], new)
    with pytest.raises(SchemaError, match="exclusiveMaximum decreased"):
        check_compatibility(_state("s", [old], "BACKWARD"), "s", json.dumps(new), "JSON")


def test_reference_documents_are_followed():
    from spark_kafkalog.typed.json_compat_model import load
    named_old = {"money.json": json.dumps(obj({"cents": I}))}
    named_new = {"money.json": json.dumps(obj({"cents": NUM}))}
    pay = json.dumps(obj({"total": {"$ref": "money.json"}}))
    got = differences(load(pay, named_old), load(pay, named_new))
    assert got == [("TYPE_EXTENDED", "#/properties/total/properties/cents")]
    assert incompatibilities(load(pay, named_new), load(pay, named_old)) == [
        "TYPE_NARROWED at #/properties/total/properties/cents"]


def test_equal_branches_collapse_and_distinct_ones_do_not():
    # the registry keeps each distinct branch once: a duplicate adds no branch
    assert differences(json.dumps({"oneOf": [S, I]}), json.dumps({"oneOf": [S, I, I]})) == []
    titled = {**I, "title": "n"}
    assert differences(json.dumps({"oneOf": [S, I]}),
                       json.dumps({"oneOf": [S, I, titled]}))[0] == ("SUM_TYPE_EXTENDED", "#/")


def test_defs_reference_reaches_definitions():
    # the registry bridges "definitions" into "$defs" before resolving
    old = obj({"a": {"$ref": "#/$defs/x"}}, definitions={"x": S})
    new = obj({"a": {"$ref": "#/$defs/x"}}, definitions={"x": I})
    assert differences(json.dumps(old), json.dumps(new)) == [("TYPE_CHANGED", "#/properties/a")]


@pytest.mark.parametrize("schema", [{**NUM, "exclusiveMaximum": True}, {**I, "maximum": "9"},
                                    {**NUM, "multipleOf": 0}])
def test_schemas_the_registry_does_not_load_are_refused(schema):
    with pytest.raises(SchemaError, match="JSON Schema: "):
        differences(json.dumps(NUM), json.dumps(schema))


def test_a_ref_that_resolves_nowhere_is_refused_even_where_no_diff_reaches_it():
    # the registry resolves every $ref when it loads a schema: such a schema never loads
    bad = obj({"a": S, "b": {"$ref": "#/definitions/missing"}})
    with pytest.raises(SchemaError, match="points at nothing"):
        differences(json.dumps(bad), json.dumps(bad))
