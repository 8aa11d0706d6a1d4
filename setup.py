"""Build the compiled kernels (Cython, ahead of time).

Every ``spark_kafkalog/format/*.pyx`` becomes an extension module of the same name.
The pure-Python metadata lives in pyproject.toml.
"""
import glob
import os

from Cython.Build import cythonize
from setuptools import Extension, setup

extensions = [
    Extension(
        path[:-4].replace(os.sep, "."),
        [path],
        # the kernels' shared core: checksums (C) and the batch layout (Cython)
        depends=[os.path.join("spark_kafkalog", "format", f)
                 for f in ("_checksums.h", "_wire.pxd")],
        extra_compile_args=["-O3", "-fno-strict-aliasing"],
    )
    for path in sorted(glob.glob(os.path.join("spark_kafkalog", "format", "*.pyx")))
]

setup(
    ext_modules=cythonize(
        extensions,
        language_level=3,
        compiler_directives={
            "boundscheck": False,
            "wraparound": False,
            "cdivision": True,
            "initializedcheck": False,
        },
    )
)
