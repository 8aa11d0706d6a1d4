"""The .pyi stubs of the compiled modules name exactly what the modules export, and the
package is marked typed (py.typed)."""
from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path

import pytest

import spark_kafkalog
from spark_kafkalog import errors
from spark_kafkalog.format import schema, wire

FORMAT = Path(spark_kafkalog.__file__).parent / "format"
def _stub_names(path: Path) -> dict[str, ast.AST]:
    tree = ast.parse(path.read_text())
    names = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names[node.name] = node
        elif isinstance(node, ast.AnnAssign):
            names[node.target.id] = node
    return names


def _module_api(mod) -> set[str]:
    """The public names a compiled module defines itself (not those it imports)."""
    imported = {}
    for other in (wire, schema, errors):
        imported.update(vars(other))
    return {name for name, obj in vars(mod).items()
            if not name.startswith("_") and not inspect.ismodule(obj)
            and not (name in imported and imported[name] is obj)}


@pytest.mark.parametrize("name", ["_decode", "_encode", "_partition"])
def test_stub_matches_the_compiled_module(name):
    mod = importlib.import_module(f"spark_kafkalog.format.{name}")
    stub = _stub_names(FORMAT / f"{name}.pyi")
    stub_api = {n for n in stub if n != "Buffer" and not n.startswith("_C")}
    assert _module_api(mod) <= stub_api, "missing from the stub"
    for n in stub_api:
        assert hasattr(mod, n), f"{name}.pyi names {n}, which the module lacks"
    for cls in (n for n, node in stub.items() if isinstance(node, ast.ClassDef)):
        methods = set()
        for klass in [cls] + [b.id for b in stub[cls].bases]:      # with the stub's bases
            methods |= {m.name for m in stub[klass].body if isinstance(m, ast.FunctionDef)}
        real = {m for m in dir(getattr(mod, cls)) if not m.startswith("_")}
        assert real <= methods | {"__init__"}, (cls, real - methods)


def test_package_is_typed():
    assert (FORMAT.parent / "py.typed").is_file()
