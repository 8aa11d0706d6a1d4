# Everything the project needs is installed by this file into ./.venv.
# `make run` runs the main job, `make test` runs the test suite (see README.md).
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(VENV)/bin/pip
STAMP  := $(VENV)/.installed
PYX    := $(wildcard spark_kafkalog/format/*.pyx)
export PYSPARK_PYTHON        := $(abspath $(PY))
export PYSPARK_DRIVER_PYTHON := $(abspath $(PY))
export SPARK_CONF_DIR        := $(abspath conf)

.PHONY: venv build test test-fast bench run clean

venv: $(STAMP)

$(STAMP): pyproject.toml setup.py
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q -U pip setuptools wheel "Cython>=3.0"
	$(PIP) install -q --no-build-isolation -e '.[dev]'
	touch $@

# In-place rebuild of the compiled kernels; flock keeps parallel builds apart.
build: $(STAMP)
	flock .build.lock $(PY) setup.py -q build_ext --inplace -j 2

test: build
	$(PY) -m pytest -q $(PYTEST_ARGS)

test-fast: build
	$(PY) -m pytest -q -m "not spark and not slow" $(PYTEST_ARGS)

bench: build
	$(PY) bench/bench_format.py $(BENCH_ARGS)

# Main job: export a log dir to Parquet (generates a sample log when LOGDIR is empty).
LOGDIR ?=
OUT    ?= out/export
run: build
	$(PY) jobs/run_main.py $(if $(LOGDIR),--path $(LOGDIR)) --output $(OUT)

clean:
	rm -rf build $(VENV) *.egg-info spark_kafkalog/format/*.so spark_kafkalog/format/*.c
