"""Kernels that compile without a compiler warning: Cython's C for each, with setup.py's
directives, through gcc with the flags a build uses (Python's ``-Wall``, setup.py's
``-O3 -fno-strict-aliasing``). Every build printed 24 ``-Wmaybe-uninitialized`` warnings
for the text kernel (``_text.pyx``: the key/value/header columns of an empty batch), 8 for
the Avro decoder (``_avro_kernel.h``'s varint reads) and one ``-Wdiscarded-qualifiers`` for
the Avro encoder (``_avro_encode.pyx``); a new one would be printed to every user who
builds from source. Every kernel is checked, so a new one is too."""
from __future__ import annotations

import ast
import shutil
import subprocess
import sys
import sysconfig

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.slow


def _setup_value(name: str):
    tree = ast.parse((REPO / "setup.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == name
                                                for t in node.targets):
            return ast.literal_eval(node.value)
    raise AssertionError(f"setup.py defines no {name}")


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc (a source build does)")
@pytest.mark.parametrize("kernel", sorted(f"{p.parent.name}/{p.stem}" for d in ("format", "typed")
                                           for p in (REPO / "spark_kafkalog" / d).glob("*.pyx")))
def test_kernel_compiles_without_warnings(tmp_path, kernel):
    directives = ",".join(f"{k}={v}" for k, v in _setup_value("DIRECTIVES").items())
    source = REPO / "spark_kafkalog" / f"{kernel}.pyx"
    c_file = tmp_path / f"{source.stem}.c"
    subprocess.run([sys.executable, "-m", "cython", "-3", "-X", directives, "-I", str(REPO),
                    "-o", str(c_file), str(source)],
                   check=True, capture_output=True, timeout=300)
    proc = subprocess.run(
        ["gcc", "-Wall", "-fwrapv", "-fPIC", *_setup_value("COMPILE_ARGS"),
         f"-I{source.parent}",
         f"-I{sysconfig.get_paths()['include']}", "-c", str(c_file),
         "-o", str(tmp_path / f"{source.stem}.o")], capture_output=True, text=True,
        timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    warnings = [ln for ln in proc.stderr.splitlines() if "warning:" in ln]
    assert warnings == [], "\n".join(warnings[:10])
