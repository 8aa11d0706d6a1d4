"""JSON Schema compatibility as Confluent Schema Registry decides it, for registering.

The registry's ``JsonSchema.isBackwardCompatible(previous)`` diffs the previous schema (the
original) against the new one (the update) with ``json/diff/SchemaDiff`` and refuses every
difference outside its compatible set (``COMPATIBLE_CHANGES_STRICT``, or ``_LENIENT`` under a
subject's ``compatibilityPolicy`` LENIENT). This module makes the same diff over schemas
loaded as the registry loads them (``json_compat_model``), with the same difference types
and JSON paths (``#/properties/a/maximum``): type changed / narrowed / extended; string,
number, object and array bounds added, removed, increased, decreased; enum and const;
allOf/anyOf/oneOf criteria and sizes, their branches paired by a maximum matching of
compatible pairs; ``not`` (diffed reversed); properties and tuple items added or removed
under an open (additionalProperties absent or true), closed (false) or partially open
(a schema, patternProperties) content model; required added (with or without a default) or
removed; dependencies; ``$ref`` followed, a cycle met again taken as compatible (the
registry's greatest fixed point). BACKWARD checks (previous, new), FORWARD (new, previous),
FULL both. Where several pairings of combined branches are maximal, the compatible
differences listed from inside them may come from another pairing than the registry's
(its matching iterates a hash set); the verdict and the incompatible differences do not.
"""
from __future__ import annotations

from decimal import Decimal, InvalidOperation

from spark_kafkalog.errors import SchemaError
from spark_kafkalog.typed.json_compat_model import Document, Schema, load

__all__ = ["COMPATIBLE_STRICT", "COMPATIBLE_LENIENT", "differences", "incompatibilities"]

COMPATIBLE_STRICT = frozenset("""
ID_CHANGED DESCRIPTION_CHANGED TITLE_CHANGED DEFAULT_CHANGED SCHEMA_REMOVED TYPE_EXTENDED
MAX_LENGTH_INCREASED MAX_LENGTH_REMOVED MIN_LENGTH_DECREASED MIN_LENGTH_REMOVED PATTERN_REMOVED
MAXIMUM_INCREASED MAXIMUM_REMOVED MINIMUM_DECREASED MINIMUM_REMOVED EXCLUSIVE_MAXIMUM_INCREASED
EXCLUSIVE_MAXIMUM_REMOVED EXCLUSIVE_MINIMUM_DECREASED EXCLUSIVE_MINIMUM_REMOVED
MULTIPLE_OF_REDUCED MULTIPLE_OF_REMOVED
REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED REQUIRED_ATTRIBUTE_REMOVED DEPENDENCY_ARRAY_NARROWED
DEPENDENCY_ARRAY_REMOVED DEPENDENCY_SCHEMA_REMOVED MAX_PROPERTIES_INCREASED
MAX_PROPERTIES_REMOVED MIN_PROPERTIES_DECREASED MIN_PROPERTIES_REMOVED
ADDITIONAL_PROPERTIES_ADDED ADDITIONAL_PROPERTIES_EXTENDED UNEVALUATED_PROPERTIES_ADDED
UNEVALUATED_PROPERTIES_EXTENDED PROPERTY_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL
REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_UNOPEN_CONTENT_MODEL
OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL
PROPERTY_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL
PROPERTY_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL
PROPERTY_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL
MAX_ITEMS_INCREASED MAX_ITEMS_REMOVED MIN_ITEMS_DECREASED MIN_ITEMS_REMOVED
MAX_CONTAINS_INCREASED MAX_CONTAINS_REMOVED MIN_CONTAINS_DECREASED MIN_CONTAINS_REMOVED
UNIQUE_ITEMS_REMOVED ADDITIONAL_ITEMS_ADDED ADDITIONAL_ITEMS_EXTENDED UNEVALUATED_ITEMS_ADDED
UNEVALUATED_ITEMS_EXTENDED ITEM_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL
ITEM_ADDED_TO_CLOSED_CONTENT_MODEL ITEM_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL
ITEM_REMOVED_FROM_OPEN_CONTENT_MODEL ITEM_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL
ITEM_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL
ENUM_ARRAY_EXTENDED COMBINED_TYPE_EXTENDED PRODUCT_TYPE_NARROWED SUM_TYPE_EXTENDED
NOT_TYPE_NARROWED
""".split())

COMPATIBLE_LENIENT = COMPATIBLE_STRICT | frozenset("""
ADDITIONAL_PROPERTIES_NARROWED ADDITIONAL_PROPERTIES_REMOVED UNEVALUATED_PROPERTIES_NARROWED
UNEVALUATED_PROPERTIES_REMOVED REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_OPEN_CONTENT_MODEL
OPTIONAL_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL
PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL
PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL
PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL
""".split())


class _Run:
    """What one diff shares across its branches: the compatible set, the memo of pairs
    compared (pair-relative differences), the pairs on the stack, the pairs a previous pass
    found incompatible, and whether a cycle was assumed compatible."""

    def __init__(self, compatible, seed):
        self.compatible, self.seed = compatible, seed
        self.memo: dict = {}
        self.keep: dict = {}                  # the pair objects, so ids stay theirs
        self.in_progress: set = set()
        self.optimistic = False


class _Ctx:
    def __init__(self, run: _Run, path=()):
        self.run = run
        self.path = list(path)
        self.diffs: list[tuple[str, str]] = []

    def sub(self) -> _Ctx:
        return _Ctx(self.run, self.path)

    def where(self, *more) -> str:
        return "#/" + "/".join(self.path + list(more))

    def add(self, kind: str, *more):
        self.diffs.append((kind, self.where(*more)))

    def compatible(self) -> bool:
        return all(t in self.run.compatible for t, _ in self.diffs)

    def enter(self, *parts):
        ctx = self

        class _Scope:
            def __enter__(self):
                ctx.path.extend(parts)

            def __exit__(self, *exc):
                del ctx.path[len(ctx.path) - len(parts):]
        return _Scope()


def _norm(s: Schema) -> Schema:
    # one level, as the registry's normalizeSchema
    return s.owner.resolve(s) if s.kind == "ref" else s


def _compare(ctx: _Ctx, o: Schema | None, u: Schema | None):
    if o is None and u is None:
        return
    if o is None:
        ctx.add("SCHEMA_ADDED")
        return
    if u is None:
        ctx.add("SCHEMA_REMOVED")
        return
    run = ctx.run
    o, u = _norm(o), _norm(u)
    key = (id(o), id(u))
    found = run.memo.get(key)
    if found is None:
        if key in run.in_progress:
            found = run.seed.get(key)
            if found is None:
                run.optimistic = True
                found = []
        else:
            run.in_progress.add(key)
            run.keep[key] = (o, u)
            try:
                sub = _Ctx(run)
                _types(sub, o, u)
                found = list(sub.diffs)
                run.memo[key] = found
            finally:
                run.in_progress.discard(key)
    if not ctx.path:
        ctx.diffs.extend(found)
        return
    prefix = ctx.where()
    for kind, path in found:
        ctx.diffs.append((kind, prefix if len(path) <= 2 else prefix + "/" + path[2:]))


def _adopted(ctx: _Ctx, o: Schema, u: Schema) -> bool:
    """Compare aside; keep the differences (and say so) only when they are compatible."""
    sub = ctx.sub()
    _compare(sub, o, u)
    if sub.compatible():
        ctx.diffs.extend(sub.diffs)
    return sub.compatible()


def _types(ctx: _Ctx, o: Schema, u: Schema):
    if o.kind != "combined" and u.kind == "combined":
        if len(u.subschemas) == 1:
            if _adopted(ctx, o, u.subschemas[0]):
                return
        elif u.criterion in ("anyOf", "oneOf"):
            if any(_adopted(ctx, o, branch) for branch in u.subschemas):
                ctx.add("SUM_TYPE_EXTENDED")
                return
    elif o.kind == "combined" and u.kind != "combined":
        if len(o.subschemas) == 1:
            if _adopted(ctx, o.subschemas[0], u):
                return
        elif o.criterion == "allOf":
            if any(_adopted(ctx, branch, u) for branch in o.subschemas):
                ctx.add("PRODUCT_TYPE_NARROWED")
                return
    if o.kind != u.kind:
        if o.kind == "false" or u.kind in ("empty", "true"):
            return
        if o.extra.get("connect.type") == "bytes" == u.extra.get("connect.type"):
            return            # the registry lets two connect bytes types be one
        ctx.add("TYPE_CHANGED")
        return
    for attr, kind in (("id", "ID_CHANGED"), ("title", "TITLE_CHANGED"),
                       ("description", "DESCRIPTION_CHANGED")):
        if getattr(o, attr) != getattr(u, attr):
            ctx.add(kind)
    if _default_differs(o, u):
        ctx.add("DEFAULT_CHANGED")
    diff = _BY_KIND.get(o.kind)
    if diff is not None:
        diff(ctx, o, u)


def _default_differs(o: Schema, u: Schema) -> bool:
    """Objects.equals(previous default, new default) over org.json values: a JSON null is
    org.json's NULL, which equals null (so a previous ``"default": null`` equals an
    absent one, not the other way round); objects and arrays compare by identity, so two
    are never equal."""
    if not o.has_default:
        return u.has_default
    if o.default is None:
        return u.has_default and u.default is not None
    if not u.has_default or isinstance(o.default, (dict, list)):
        return True
    return o.default != u.default or type(o.default) is not type(u.default)


def _bound(ctx, name, o, u, added, removed, increased, decreased):
    if o == u:
        return
    if o is None:
        ctx.add(added, name)
    elif u is None:
        ctx.add(removed, name)
    elif o < u:
        ctx.add(increased, name)
    elif o > u:
        ctx.add(decreased, name)


def _bounds(ctx, name, o, u):
    up = name.upper().replace("LENGTH", "_LENGTH").replace("PROPERTIES", "_PROPERTIES") \
        .replace("ITEMS", "_ITEMS").replace("CONTAINS", "_CONTAINS")
    _bound(ctx, name, o, u, f"{up}_ADDED", f"{up}_REMOVED", f"{up}_INCREASED",
           f"{up}_DECREASED")


def _string(ctx, o, u):
    _bounds(ctx, "maxLength", o.max_length, u.max_length)
    _bounds(ctx, "minLength", o.min_length, u.min_length)
    if o.pattern is None and u.pattern is not None:
        ctx.add("PATTERN_ADDED", "pattern")
    elif o.pattern is not None and u.pattern is None:
        ctx.add("PATTERN_REMOVED", "pattern")
    elif o.pattern != u.pattern:
        ctx.add("PATTERN_CHANGED", "pattern")


def _number(ctx, o, u):
    _bound(ctx, "maximum", o.maximum, u.maximum, "MAXIMUM_ADDED", "MAXIMUM_REMOVED",
           "MAXIMUM_INCREASED", "MAXIMUM_DECREASED")
    _bound(ctx, "minimum", o.minimum, u.minimum, "MINIMUM_ADDED", "MINIMUM_REMOVED",
           "MINIMUM_INCREASED", "MINIMUM_DECREASED")
    if o.ex_max != u.ex_max:
        if o.ex_max is None:
            ctx.add("EXCLUSIVE_MAXIMUM_ADDED", "exclusiveMaximum")
        elif u.ex_max is None:
            ctx.add("EXCLUSIVE_MAXIMUM_REMOVED", "exclusiveMaximum")
        elif o.ex_max < u.ex_max:
            ctx.add("EXCLUSIVE_MAXIMUM_INCREASED", "exclusiveMaximum")
        elif u.maximum is None:
            # the registry compares a decreased exclusiveMaximum with the new maximum and
            # fails (a null) when there is none: it gives no answer to reproduce
            raise SchemaError(f"JSON Schema compatibility: exclusiveMaximum decreased at "
                              f"{ctx.where('exclusiveMaximum')} with no maximum beside it: "
                              "the registry's diff fails on it; register it through a registry")
        elif o.ex_max > u.maximum:
            ctx.add("EXCLUSIVE_MAXIMUM_DECREASED", "exclusiveMaximum")
    _bound(ctx, "exclusiveMinimum", o.ex_min, u.ex_min, "EXCLUSIVE_MINIMUM_ADDED",
           "EXCLUSIVE_MINIMUM_REMOVED", "EXCLUSIVE_MINIMUM_INCREASED",
           "EXCLUSIVE_MINIMUM_DECREASED")
    om, um = _decimal(o.multiple_of), _decimal(u.multiple_of)
    if om != um:
        if om is None:
            ctx.add("MULTIPLE_OF_ADDED", "multipleOf")
        elif um is None:
            ctx.add("MULTIPLE_OF_REMOVED", "multipleOf")
        elif om != 0 and um % om == 0:
            ctx.add("MULTIPLE_OF_EXPANDED", "multipleOf")
        elif um != 0 and om % um == 0:
            ctx.add("MULTIPLE_OF_REDUCED", "multipleOf")
        else:
            ctx.add("MULTIPLE_OF_CHANGED", "multipleOf")
    if o.integer != u.integer:
        ctx.add("TYPE_EXTENDED" if o.integer else "TYPE_NARROWED")


def _decimal(v):
    if v is None:
        return None
    try:
        return Decimal(repr(v)) if isinstance(v, float) else Decimal(v)
    except (InvalidOperation, TypeError) as err:
        raise SchemaError(f"JSON Schema: multipleOf {v!r} is not a number") from err


def _enum(ctx, o, u):
    if o.values != u.values:
        if u.values >= o.values:
            ctx.add("ENUM_ARRAY_EXTENDED", "enum")
        elif o.values >= u.values:
            ctx.add("ENUM_ARRAY_NARROWED", "enum")
        else:
            ctx.add("ENUM_ARRAY_CHANGED", "enum")


def _const(ctx, o, u):
    if o.value == "null":
        # the registry calls equals on the previous const, null here: its diff fails
        raise SchemaError(f"JSON Schema compatibility: const null at {ctx.where('const')} "
                          "is compared by the registry's diff through a null and fails; "
                          "register it through a registry")
    if o.value != u.value:
        ctx.add("ENUM_ARRAY_CHANGED", "const")


def _not(ctx, o, u):
    with ctx.enter("not"):
        sub = ctx.sub()
        _compare(sub, u.must_not, o.must_not)      # reversed, as the registry does
        ctx.add("NOT_TYPE_NARROWED" if sub.compatible() else "NOT_TYPE_EXTENDED")


def _combined(ctx, o, u):
    oc, uc = o.criterion, u.criterion
    if oc != uc:
        one_o, one_u = len(o.subschemas) == 1, len(u.subschemas) == 1
        if uc == "anyOf" or (one_o and one_u) or (one_o and uc == "oneOf") \
                or (one_u and oc == "allOf"):
            ctx.add("COMBINED_TYPE_EXTENDED")
        else:
            ctx.add("COMBINED_TYPE_CHANGED")
            return
    olist, ulist = _distinct(o.subschemas), _distinct(u.subschemas)
    if len(olist) < len(ulist):
        ctx.add("PRODUCT_TYPE_EXTENDED" if uc == "allOf" else "SUM_TYPE_EXTENDED")
    elif len(olist) > len(ulist):
        ctx.add("SUM_TYPE_NARROWED" if oc in ("anyOf", "oneOf") else "PRODUCT_TYPE_NARROWED")
    edges: dict[int, dict[int, list]] = {}
    for i, ob in enumerate(olist):
        with ctx.enter(f"{oc}/{i}"):
            for j, ub in enumerate(ulist):
                sub = ctx.sub()
                _compare(sub, ob, ub)
                if sub.compatible():
                    edges.setdefault(i, {})[j] = sub.diffs
    match = _matching(edges)
    for j, i in sorted(match.items(), key=lambda m: m[1]):
        ctx.diffs.extend(edges[i][j])
    if len(match) < min(len(olist), len(ulist)):
        ctx.add("COMBINED_TYPE_SUBSCHEMAS_CHANGED")


def _distinct(schemas):
    seen, out = set(), []
    for s in schemas:
        if s.canon not in seen:
            seen.add(s.canon)
            out.append(s)
    return out


def _matching(edges: dict[int, dict[int, list]]) -> dict[int, int]:
    """A maximum matching of original branches to update branches (right -> left)."""
    right: dict[int, int] = {}

    def augment(i, seen):
        for j in edges.get(i, {}):
            if j in seen:
                continue
            seen.add(j)
            if j not in right or augment(right[j], seen):
                right[j] = i
                return True
        return False
    for i in sorted(edges):
        augment(i, set())
    return right


def _open(s) -> bool:
    return s.permits_additional and s.additional is None and not getattr(s, "patterns", [])


def _partial(s, key=None):
    for pattern, sub in getattr(s, "patterns", []):
        if key is not None and pattern.search(key):
            return sub
    return s.additional


def _object(ctx, o, u):
    with ctx.enter("required"):
        for key in o.properties:
            if key in u.properties:
                was, now = key in o.required, key in u.required
                if was and not now:
                    ctx.add("REQUIRED_ATTRIBUTE_REMOVED", key)
                elif now and not was:
                    ctx.add("REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED"
                            if u.properties[key].has_default else "REQUIRED_ATTRIBUTE_ADDED",
                            key)
    with ctx.enter("properties"):
        for key in sorted(set(o.properties) | set(u.properties)):
            with ctx.enter(key):
                _property(ctx, o, u, key)
    with ctx.enter("dependencies"):
        for key in sorted(set(o.prop_deps) | set(u.prop_deps)):
            od, ud = o.prop_deps.get(key), u.prop_deps.get(key)
            if ud is None:
                ctx.add("DEPENDENCY_ARRAY_REMOVED", key)
            elif od is None:
                ctx.add("DEPENDENCY_ARRAY_ADDED", key)
            elif od != ud:
                ctx.add("DEPENDENCY_ARRAY_EXTENDED" if ud >= od else
                        "DEPENDENCY_ARRAY_NARROWED" if od >= ud else
                        "DEPENDENCY_ARRAY_CHANGED", key)
        for key in sorted(set(o.schema_deps) | set(u.schema_deps)):
            od, ud = o.schema_deps.get(key), u.schema_deps.get(key)
            if ud is None:
                ctx.add("DEPENDENCY_SCHEMA_REMOVED", key)
            elif od is None:
                ctx.add("DEPENDENCY_SCHEMA_ADDED", key)
            else:
                with ctx.enter(key):
                    _compare(ctx, od, ud)
    _additional(ctx, o, u, "additionalProperties", "ADDITIONAL_PROPERTIES")
    _bounds(ctx, "maxProperties", o.max_properties, u.max_properties)
    _bounds(ctx, "minProperties", o.min_properties, u.min_properties)


def _additional(ctx, o, u, keyword, up):
    """additionalProperties / additionalItems: ``up`` is the keyword's prefix in the
    registry's difference names."""
    with ctx.enter(keyword):
        if o.permits_additional != u.permits_additional:
            ctx.add(f"{up}_ADDED" if u.permits_additional else f"{up}_REMOVED")
        elif o.additional is None and u.additional is not None:
            ctx.add(f"{up}_NARROWED")
        elif u.additional is None and o.additional is not None:
            ctx.add(f"{up}_EXTENDED")
        else:
            _compare(ctx, o.additional, u.additional)


def _covered(ctx, o, u, what):
    """A property or item removed or added where a partially open content model (pattern
    or additional schema) stands for it: covered when that schema is compatible."""
    sub = ctx.sub()
    _compare(sub, o, u)
    ctx.diffs.extend(sub.diffs)
    ctx.add(f"{what}_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL" if sub.compatible()
            else f"{what}_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL")


def _property(ctx, o, u, key):
    os_, us = o.properties.get(key), u.properties.get(key)
    if us is None:
        # only the update's content model decides whether a property may go
        if _open(u):
            ctx.add("PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL")
            return
        cover = _partial(u, key)
        if cover is not None:
            _covered(ctx, os_, cover, "PROPERTY_REMOVED")
        elif os_.kind == "false":
            ctx.add("PROPERTY_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL")
        else:
            ctx.add("PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL")
        return
    if os_ is not None:
        _compare(ctx, os_, us)
        return
    # only the original's content model decides whether a property may come
    required = key in u.required
    if _open(o):
        if us.kind in ("empty", "true"):
            ctx.add("PROPERTY_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL")
        elif required:
            ctx.add("REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_OPEN_CONTENT_MODEL"
                    if us.has_default else "REQUIRED_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL")
        else:
            ctx.add("OPTIONAL_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL")
        return
    cover = _partial(o, key)
    if cover is not None:
        _covered(ctx, cover, us, "PROPERTY_ADDED")
    if required:
        ctx.add("REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_UNOPEN_CONTENT_MODEL"
                if us.has_default else "REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL")
    else:
        ctx.add("OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL")


def _array(ctx, o, u):
    with ctx.enter("items"):
        _compare(ctx, o.all_items, u.all_items)
    n = min(len(o.item_list), len(u.item_list))
    for i in range(max(len(o.item_list), len(u.item_list))):
        with ctx.enter(f"items/{i}"):
            if i < n:
                _compare(ctx, o.item_list[i], u.item_list[i])
            elif i < len(o.item_list):
                _item_removed(ctx, o.item_list[i], u)
            else:
                _item_added(ctx, o, u.item_list[i])
    _additional(ctx, o, u, "additionalItems", "ADDITIONAL_ITEMS")
    _bounds(ctx, "maxItems", o.max_items, u.max_items)
    _bounds(ctx, "minItems", o.min_items, u.min_items)
    if o.unique != u.unique:
        ctx.add("UNIQUE_ITEMS_REMOVED" if o.unique else "UNIQUE_ITEMS_ADDED", "uniqueItems")
    for name in ("maxContains", "minContains"):
        ov, uv = o.extra.get(name), u.extra.get(name)
        ov = int(ov) if isinstance(ov, (int, float)) and not isinstance(ov, bool) else None
        uv = int(uv) if isinstance(uv, (int, float)) and not isinstance(uv, bool) else None
        _bounds(ctx, name, ov, uv)


def _item_removed(ctx, item, u):
    if _open(u):
        ctx.add("ITEM_REMOVED_FROM_OPEN_CONTENT_MODEL")
    elif u.additional is not None:
        _covered(ctx, item, u.additional, "ITEM_REMOVED")
    elif item.kind == "false":
        ctx.add("ITEM_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL")
    else:
        ctx.add("ITEM_REMOVED_FROM_CLOSED_CONTENT_MODEL")


def _item_added(ctx, o, item):
    if _open(o):
        ctx.add("ITEM_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL"
                if item.kind in ("empty", "true") else "ITEM_ADDED_TO_OPEN_CONTENT_MODEL")
    elif o.additional is not None:
        _covered(ctx, o.additional, item, "ITEM_ADDED")
    else:
        ctx.add("ITEM_ADDED_TO_CLOSED_CONTENT_MODEL")


_BY_KIND = {"string": _string, "number": _number, "enum": _enum, "const": _const,
            "combined": _combined, "not": _not, "object": _object, "array": _array}


def differences(old, new, policy: str = "STRICT") -> list[tuple[str, str]]:
    """Every difference (type, JSON path) of ``new`` against ``old`` (texts or loaded
    :class:`Document` s), in the registry's terms."""
    old = old if isinstance(old, Document) else load(old)
    new = new if isinstance(new, Document) else load(new)
    compatible = COMPATIBLE_LENIENT if (policy or "").upper() == "LENIENT" \
        else COMPATIBLE_STRICT
    seed: dict = {}
    while True:
        # a cycle met again is assumed compatible; pairs that turn out incompatible are
        # fed back until no pass changes them (the registry's fixpoint)
        run = _Run(compatible, seed)
        ctx = _Ctx(run)
        _compare(ctx, old.root, new.root)
        bad = {k: v for k, v in run.memo.items() if any(t not in compatible for t, _ in v)}
        if not run.optimistic or bad.keys() == seed.keys():
            return ctx.diffs
        seed = bad


def incompatibilities(old, new, policy: str = "STRICT") -> list[str]:
    """The incompatible differences of ``new`` against ``old``, as the registry's
    ``new.isBackwardCompatible(old)`` finds them (``TYPE at #/path``); empty: compatible."""
    compatible = COMPATIBLE_LENIENT if (policy or "").upper() == "LENIENT" \
        else COMPATIBLE_STRICT
    return [f"{t} at {p}" for t, p in differences(old, new, policy) if t not in compatible]
