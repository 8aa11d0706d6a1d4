"""Protobuf schema compatibility as Confluent Schema Registry decides it, for registering.

The registry's ``ProtobufSchema.isBackwardCompatible(previous)`` diffs the previous file
against the new one (``protobuf/diff/SchemaDiff``, ``MessageSchemaDiff``,
``FieldSchemaDiff``) and refuses any difference outside its compatible set. This module
makes the same diff over the descriptors protoc gives (``proto_schema.load_file``), with
the same rules: incompatible are a changed package, a removed message, a field whose kind
(scalar / message / map) changes, a scalar whose group changes (varint int32 int64 uint32
uint64 bool enum; zigzag sint32 sint64; string bytes; fixed32 sfixed32; fixed64 sfixed64;
float; double), a numeric field's label changing (singular / ``optional`` / ``repeated`` /
``required``), a message-typed field naming another message or one whose own diff is
incompatible, a ``required`` field added or removed, a oneof member removed while its
oneof remains, and fields that were independent moved into one oneof. Everything else
(fields, messages, enums and their constants added or removed, renames, moves) is
compatible. BACKWARD checks (previous, new), FORWARD (new, previous), FULL both.
"""
from __future__ import annotations

from google.protobuf import descriptor_pb2

__all__ = ["incompatibilities"]

_GROUP = {"int32": "number", "int64": "number", "uint32": "number", "uint64": "number",
          "bool": "number", "enum": "number", "sint32": "signed", "sint64": "signed",
          "string": "text", "bytes": "text", "fixed32": "fixed32", "sfixed32": "fixed32",
          "fixed64": "fixed64", "sfixed64": "fixed64", "float": "float", "double": "double"}
_T = descriptor_pb2.FieldDescriptorProto


class _File:
    """A file's messages and enums by full name (from its FileDescriptorProto and the
    files it imports)."""

    def __init__(self, fd):
        self.package = fd.package
        self.types: dict[str, object] = {}
        seen = set()

        def add(f):
            if f.name in seen:
                return
            seen.add(f.name)
            for dep in f.dependencies:
                add(dep)
            proto = descriptor_pb2.FileDescriptorProto.FromString(f.serialized_pb)
            prefix = f".{proto.package}" if proto.package else ""
            for m in proto.message_type:
                self._message(m, prefix, proto.syntax or "proto2", proto.package)
            for e in proto.enum_type:
                self.types[f"{prefix}.{e.name}"] = e
        add(fd)
        main = descriptor_pb2.FileDescriptorProto.FromString(fd.serialized_pb)
        self.main = main
        self.syntax = main.syntax or "proto2"

    def _message(self, m, prefix, syntax, package):
        name = f"{prefix}.{m.name}"
        self.types[name] = (m, syntax, package)
        for n in m.nested_type:
            self._message(n, name, syntax, package)
        for e in m.enum_type:
            self.types[f"{name}.{e.name}"] = e


def _kind(file: _File, f) -> str:
    if f.type == _T.TYPE_MESSAGE:
        m = file.types.get(f.type_name)
        if isinstance(m, tuple) and m[0].options.map_entry:
            return "map"
        return "message"
    return "scalar"


def _scalar(f) -> str:
    if f.type == _T.TYPE_ENUM:
        return "number"
    return _GROUP[_T.Type.Name(f.type)[5:].lower()]


def _label(f, syntax: str) -> str:
    if f.label == _T.LABEL_REPEATED:
        return "repeated"
    if f.label == _T.LABEL_REQUIRED:
        return "required"
    if syntax == "proto3" and not f.proto3_optional:
        return "singular"
    return "optional"


class _Diff:
    def __init__(self, old: _File, new: _File):
        self.old, self.new = old, new
        self.found: list[str] = []
        self._done: set = set()

    def fields(self, of, nf, path):
        """The field with the same number in both messages."""
        ok, nk = _kind(self.old, of), _kind(self.new, nf)
        if ok != nk:
            self.found.append(f"{path}: field kind changed ({ok} -> {nk})")
        elif ok == "scalar":
            og, ng = _scalar(of), _scalar(nf)
            if og != ng:
                self.found.append(f"{path}: scalar kind changed ({og} -> {ng})")
            elif og != "text" and _label(of, self.osyn) != _label(nf, self.nsyn):
                self.found.append(f"{path}: numeric label changed ("
                                  f"{_label(of, self.osyn)} -> {_label(nf, self.nsyn)})")
        elif ok == "map":
            om, nm = self.old.types[of.type_name][0], self.new.types[nf.type_name][0]
            for i in (0, 1):
                self.fields(om.field[i], nm.field[i], f"{path}.{om.field[i].name}")
        else:
            self.named(of.type_name, nf.type_name, path)

    def named(self, oname: str, nname: str, path: str):
        opkg, npkg = self.old.types[oname][2], self.new.types[nname][2]
        olocal = oname[len(opkg) + 2:] if opkg else oname[1:]
        nlocal = nname[len(npkg) + 2:] if npkg else nname[1:]
        if olocal != nlocal:
            self.found.append(f"{path}: named type changed ({oname[1:]} -> {nname[1:]})")
            return
        if (oname, nname) in self._done:
            return
        self._done.add((oname, nname))
        before = len(self.found)
        self.message(self.old.types[oname][:2], self.new.types[nname][:2],
                     f"{path}<{nlocal}>")
        if len(self.found) > before:
            self.found.append(f"{path}: named type {nlocal} changed incompatibly")

    def message(self, old, new, path):
        (om, self.osyn), (nm, self.nsyn) = old, new
        obytag = {f.number: f for f in om.field}
        nbytag = {f.number: f for f in nm.field}

        def oneofs(m, bytag):
            real = {}
            for f in bytag.values():
                if f.HasField("oneof_index") and not f.proto3_optional:
                    real[f.number] = m.oneof_decl[f.oneof_index].name
            return real
        oone, none = oneofs(om, obytag), oneofs(nm, nbytag)
        survivors = {name: any(t in nbytag for t, n in oone.items() if n == name)
                     for name in set(oone.values())}
        for name in set(none.values()):
            groups = set()
            moved = 0
            for tag, n in none.items():
                if n != name:
                    continue
                if tag in oone:
                    groups.add(f"oneof:{oone[tag]}")
                elif tag in obytag:
                    groups.add(f"field:{tag}")
                    moved += 1
            if len(groups) > 1:
                self.found.append(f"{path}.{name}: " + ("several fields moved into a oneof"
                                                        if moved > 1 else
                                                        "a field moved into an existing oneof"))
        for tag in sorted(set(obytag) | set(nbytag)):
            of, nf = obytag.get(tag), nbytag.get(tag)
            where = f"{path}.{(nf or of).name} (field {tag})"
            if nf is None:
                if tag in oone:
                    if oone[tag] in set(none.values()) or survivors[oone[tag]]:
                        self.found.append(f"{where}: oneof member removed")
                elif of.label == _T.LABEL_REQUIRED:
                    self.found.append(f"{where}: required field removed")
            elif of is None:
                if tag not in none and nf.label == _T.LABEL_REQUIRED:
                    self.found.append(f"{where}: required field added")
            else:
                osyn, nsyn = self.osyn, self.nsyn
                self.fields(of, nf, where)
                self.osyn, self.nsyn = osyn, nsyn
        self.types([f"{n}" for n in (m.name for m in om.nested_type)],
                   [m.name for m in nm.nested_type], path, nested=(om, nm))

    def types(self, onames, nnames, path, nested=None):
        for name in sorted(set(onames) - set(nnames)):
            m = nested[0] if nested else None
            entry = next((x for x in (m.nested_type if m else []) if x.name == name), None)
            if entry is None or not entry.options.map_entry:
                self.found.append(f"{path}.{name}: message removed")
        for name in sorted(set(onames) & set(nnames)):
            if nested:
                om = next(x for x in nested[0].nested_type if x.name == name)
                nm = next(x for x in nested[1].nested_type if x.name == name)
                if om.options.map_entry:
                    continue
                self.message((om, self.osyn), (nm, self.nsyn), f"{path}.{name}")


def incompatibilities(old_fd, new_fd) -> list[str]:
    """The incompatible differences of ``new_fd`` against ``old_fd`` (FileDescriptors),
    as the registry's ``new.isBackwardCompatible(old)`` finds them; empty: compatible."""
    old, new = _File(old_fd), _File(new_fd)
    d = _Diff(old, new)
    if old.main.package != new.main.package:
        d.found.append(f"package changed ({old.main.package!r} -> {new.main.package!r})")
    omsgs = {m.name: m for m in old.main.message_type}
    nmsgs = {m.name: m for m in new.main.message_type}
    for name in sorted(set(omsgs) - set(nmsgs)):
        d.found.append(f"{name}: message removed")
    for name in sorted(set(omsgs) & set(nmsgs)):
        d.message((omsgs[name], old.syntax), (nmsgs[name], new.syntax), name)
    return d.found
