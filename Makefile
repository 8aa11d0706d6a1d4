# Everything the project needs is installed by this file into ./.venv.
# `make run` runs the main job, `make test` runs the test suite (see README.md).
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(VENV)/bin/pip
STAMP  := $(VENV)/.installed
PYX    := $(wildcard spark_kafkalog/format/*.pyx spark_kafkalog/typed/*.pyx)
export PYSPARK_PYTHON        := $(abspath $(PY))
export PYSPARK_DRIVER_PYTHON := $(abspath $(PY))
export SPARK_CONF_DIR        := $(abspath conf)

.PHONY: venv build test test-slow test-all test-fast bench bench-avro-spark run clean kafka-jars iceberg-jars avro-jars iceberg-rest-jars spark41-venv avro-java-jars browser kcat fuzz-kernels fuse

venv: $(STAMP)

$(STAMP): pyproject.toml setup.py
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q -U pip setuptools wheel "Cython>=3.0"
	$(PIP) install -q --no-build-isolation -e '.[dev]'
	touch $@

# In-place rebuild of the compiled kernels; flock keeps parallel builds apart.
build: $(STAMP)
	flock .build.lock $(PY) setup.py -q build_ext --inplace -j 2

# The tests run in two tiers, chosen by pytest markers (pyproject.toml):
#   make test       the README's test command: every test not marked slow, kafka or
#                   packaging (format/, log/, typed/, lake/, the Spark session tests, the
#                   jobs and the command); the target is 15 minutes on 2 cores
#   make test-slow  the rest: real Kafka brokers (kafka), kill-and-restart, soak and full
#                   fault sweeps, guided fuzzing and the packaging round trip (slow)
# .ci/run runs both and prints each tier's time; `make test-all` is the two in one run.
# Each runs on TEST_JOBS pytest-xdist workers, a test file per worker at a time (a file's
# module fixtures are made once; each worker has its own Spark session and brokers):
# much of a test's time is waiting (JVM start-up, subprocesses, kills, S3 round trips), so
# two workers finish in well under the time of one even on 2 cores. TEST_JOBS=0 runs in
# one process (what a debugger or `-x` wants).
FAST_TIER := not slow and not kafka and not packaging
TEST_JOBS ?= 2
XDIST     := $(if $(filter 0,$(TEST_JOBS)),,-n $(TEST_JOBS) --dist loadfile --no-loadscope-reorder)
test: build iceberg-jars avro-java-jars browser fuse
	$(PY) -m pytest -q --durations=25 $(XDIST) -m "$(FAST_TIER)" $(PYTEST_ARGS)

test-slow: build kafka-jars iceberg-jars iceberg-rest-jars spark41-venv avro-java-jars browser kcat fuzz-kernels fuse
	$(PY) -m pytest -q --durations=25 $(XDIST) -m "not ($(FAST_TIER))" $(PYTEST_ARGS)

test-all: build kafka-jars iceberg-jars iceberg-rest-jars spark41-venv avro-java-jars browser kcat fuzz-kernels fuse
	$(PY) -m pytest -q --durations=25 $(XDIST) $(PYTEST_ARGS)

test-fast: build
	$(PY) -m pytest -q $(XDIST) -m "not spark and not slow and not kafka" $(PYTEST_ARGS)

# Apache Kafka 4.3.1, 3.9.1 and 4.4.0 (broker, tools, clients; 4.4's LocalTieredStorage) and Spark's Kafka connector for the
# `kafka` test tier, fetched from Maven Central by tests/kafka/pom.xml into .cache/ (once).
KAFKA_JARS       := .cache/kafka-jars
KAFKA39_JARS     := .cache/kafka39-jars
KAFKA44_JARS     := .cache/kafka44-jars
SPARK_KAFKA_JARS := .cache/spark-kafka-jars
KAFKA_MVN        := mvn -q -B -f tests/kafka/pom.xml dependency:copy-dependencies
kafka-jars: $(KAFKA_JARS)/.fetched $(KAFKA39_JARS)/.fetched $(KAFKA44_JARS)/.fetched $(SPARK_KAFKA_JARS)/.fetched

$(KAFKA_JARS)/.fetched: tests/kafka/pom.xml
	@command -v mvn >/dev/null || { echo "kafka-jars: mvn not found: the kafka test tier needs Maven to fetch Apache Kafka"; exit 1; }
	@rm -rf $(KAFKA_JARS) && mkdir -p .cache
	@$(KAFKA_MVN) -DoutputDirectory=$(abspath $(KAFKA_JARS)) >.cache/kafka-jars.log 2>&1 || { echo "kafka-jars: Maven could not fetch Apache Kafka's jars from Maven Central (see .cache/kafka-jars.log)"; exit 1; }
	@touch $@

$(KAFKA39_JARS)/.fetched: tests/kafka/pom.xml
	@command -v mvn >/dev/null || { echo "kafka-jars: mvn not found: the kafka test tier needs Maven to fetch Apache Kafka 3.9"; exit 1; }
	@rm -rf $(KAFKA39_JARS) && mkdir -p .cache
	@$(KAFKA_MVN) -P kafka39,-broker -DoutputDirectory=$(abspath $(KAFKA39_JARS)) >.cache/kafka39-jars.log 2>&1 || { echo "kafka-jars: Maven could not fetch Apache Kafka 3.9's jars from Maven Central (see .cache/kafka39-jars.log)"; exit 1; }
	@touch $@

$(KAFKA44_JARS)/.fetched: tests/kafka/pom.xml
	@command -v mvn >/dev/null || { echo "kafka-jars: mvn not found: the kafka test tier needs Maven to fetch Apache Kafka 4.4"; exit 1; }
	@rm -rf $(KAFKA44_JARS) && mkdir -p .cache
	@$(KAFKA_MVN) -P kafka44,-broker -DoutputDirectory=$(abspath $(KAFKA44_JARS)) >.cache/kafka44-jars.log 2>&1 || { echo "kafka-jars: Maven could not fetch Apache Kafka 4.4's jars from Maven Central (see .cache/kafka44-jars.log)"; exit 1; }
	@touch $@

$(SPARK_KAFKA_JARS)/.fetched: tests/kafka/pom.xml
	@command -v mvn >/dev/null || { echo "kafka-jars: mvn not found: the kafka test tier needs Maven to fetch Spark's Kafka connector"; exit 1; }
	@rm -rf $(SPARK_KAFKA_JARS) && mkdir -p .cache
	@$(KAFKA_MVN) -P spark-connector,-broker -DoutputDirectory=$(abspath $(SPARK_KAFKA_JARS)) >.cache/spark-kafka-jars.log 2>&1 || { echo "kafka-jars: Maven could not fetch Spark's Kafka connector from Maven Central (see .cache/spark-kafka-jars.log)"; exit 1; }
	@touch $@

# Apache Iceberg's Java library 1.12 (core, data, parquet, with Hadoop's shaded client): the
# independent reader of the tables export_iceberg writes (tests/lake/IcebergReader.java),
# fetched from Maven Central by tests/kafka/pom.xml's `iceberg` profile into .cache/ (once).
ICEBERG_JARS := .cache/iceberg-jars
iceberg-jars: $(ICEBERG_JARS)/.fetched

$(ICEBERG_JARS)/.fetched: tests/kafka/pom.xml
	@command -v mvn >/dev/null || { echo "iceberg-jars: mvn not found: the lake tests need Maven to fetch Apache Iceberg's Java library"; exit 1; }
	@rm -rf $(ICEBERG_JARS) && mkdir -p .cache
	@$(KAFKA_MVN) -P iceberg,-broker -DoutputDirectory=$(abspath $(ICEBERG_JARS)) >.cache/iceberg-jars.log 2>&1 || { echo "iceberg-jars: Maven could not fetch Apache Iceberg's jars from Maven Central (see .cache/iceberg-jars.log)"; exit 1; }
	@touch $@

# Apache Iceberg's REST catalog (iceberg-core's test jar: RESTCatalogAdapter, RESTCatalogServlet) on
# Jetty, and S3FileIO, for the REST and S3 tests of tests/lake (tests/lake/LoopbackRestCatalog.java),
# fetched by tests/kafka/pom.xml's `iceberg-rest` profile into .cache/ (once). 1.11.0: the newest
# Iceberg whose REST server fixtures Maven Central serves.
ICEBERG_REST_JARS := .cache/iceberg-rest-jars
iceberg-rest-jars: $(ICEBERG_REST_JARS)/.fetched

$(ICEBERG_REST_JARS)/.fetched: tests/kafka/pom.xml
	@command -v mvn >/dev/null || { echo "iceberg-rest-jars: mvn not found: the REST catalog tests need Maven to fetch Apache Iceberg's REST server"; exit 1; }
	@rm -rf $(ICEBERG_REST_JARS) && mkdir -p .cache
	@$(KAFKA_MVN) -P iceberg-rest,-broker -DoutputDirectory=$(abspath $(ICEBERG_REST_JARS)) >.cache/iceberg-rest-jars.log 2>&1 || { echo "iceberg-rest-jars: Maven could not fetch Apache Iceberg's REST server jars from Maven Central (see .cache/iceberg-rest-jars.log)"; exit 1; }
	@touch $@

# Spark SQL with Apache Iceberg's Spark runtime, the reader a Spark SQL user has
# (tests/lake/test_spark_sql_reads_table.py). Maven Central serves that runtime for Spark up to
# 4.1 only (iceberg-spark-runtime-4.1_2.13 1.12.0) while .venv has pyspark 4.3: so pyspark 4.1
# gets a venv of its own in .cache/spark41-venv, and tests/kafka/pom.xml's `iceberg-spark`
# profile fetches the runtime and SQLite's JDBC driver into .cache/iceberg-spark-jars (once).
SPARK41_VENV        := .cache/spark41-venv
SPARK41_PYSPARK     := 4.1.4
ICEBERG_SPARK_JARS  := .cache/iceberg-spark-jars
spark41-venv: $(SPARK41_VENV)/.installed-$(SPARK41_PYSPARK) $(ICEBERG_SPARK_JARS)/.fetched

# the stamp names the version: only a new SPARK41_PYSPARK remakes the venv
$(SPARK41_VENV)/.installed-$(SPARK41_PYSPARK):
	@mkdir -p .cache && rm -rf $(SPARK41_VENV)
	@$(PYTHON) -m venv $(SPARK41_VENV) && $(SPARK41_VENV)/bin/pip install -q "pyspark==$(SPARK41_PYSPARK)" >.cache/spark41-venv.log 2>&1 || { echo "spark41-venv: pip could not install pyspark $(SPARK41_PYSPARK) into $(SPARK41_VENV) (see .cache/spark41-venv.log)"; exit 1; }
	@touch $@

$(ICEBERG_SPARK_JARS)/.fetched: tests/kafka/pom.xml
	@command -v mvn >/dev/null || { echo "spark41-venv: mvn not found: the Spark SQL test needs Maven to fetch Apache Iceberg's Spark runtime"; exit 1; }
	@rm -rf $(ICEBERG_SPARK_JARS) && mkdir -p .cache
	@$(KAFKA_MVN) -P iceberg-spark,-broker -DoutputDirectory=$(abspath $(ICEBERG_SPARK_JARS)) >.cache/iceberg-spark-jars.log 2>&1 || { echo "spark41-venv: Maven could not fetch Apache Iceberg's Spark runtime from Maven Central (see .cache/iceberg-spark-jars.log)"; exit 1; }
	@touch $@

# Spark's Avro module (spark-avro_2.13, the newest version Maven Central serves: 4.2.0; pyspark
# is 4.3.0) for bench/bench_avro_spark.py's from_avro contender, fetched by tests/kafka/pom.xml's
# `spark-avro` profile into .cache/ (once). Not a test prerequisite.
AVRO_JARS := .cache/spark-avro-jars
avro-jars: $(AVRO_JARS)/.fetched

$(AVRO_JARS)/.fetched: tests/kafka/pom.xml
	@command -v mvn >/dev/null || { echo "avro-jars: mvn not found: bench/bench_avro_spark.py needs Maven to fetch Spark's Avro module"; exit 1; }
	@rm -rf $(AVRO_JARS) && mkdir -p .cache
	@$(KAFKA_MVN) -P spark-avro,-broker -DoutputDirectory=$(abspath $(AVRO_JARS)) >.cache/spark-avro-jars.log 2>&1 || { echo "avro-jars: Maven could not fetch Spark's Avro module from Maven Central (see .cache/spark-avro-jars.log)"; exit 1; }
	@touch $@

# Apache Avro's Java library 1.12 (the reference implementation): the oracle that encodes
# Avro data and resolves schemas for tests/typed/test_avro_java.py (tests/typed/AvroOracle.java),
# fetched from Maven Central by tests/kafka/pom.xml's `avro-java` profile into .cache/ (once).
AVRO_JAVA_JARS := .cache/avro-java-jars
avro-java-jars: $(AVRO_JAVA_JARS)/.fetched

$(AVRO_JAVA_JARS)/.fetched: tests/kafka/pom.xml
	@command -v mvn >/dev/null || { echo "avro-java-jars: mvn not found: the Avro oracle tests need Maven to fetch Apache Avro's Java library"; exit 1; }
	@rm -rf $(AVRO_JAVA_JARS) && mkdir -p .cache
	@$(KAFKA_MVN) -P avro-java,-broker -DoutputDirectory=$(abspath $(AVRO_JAVA_JARS)) >.cache/avro-java-jars.log 2>&1 || { echo "avro-java-jars: Maven could not fetch Apache Avro's Java library from Maven Central (see .cache/avro-java-jars.log)"; exit 1; }
	@touch $@

# Headless Chromium (Debian's package) for the report page's browser test
# (tests/test_report_browser.py); installed once, only when missing.
CHROMIUM := /usr/bin/chromium
SUDO     := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
browser: $(CHROMIUM)

$(CHROMIUM):
	@command -v apt-get >/dev/null || { echo "browser: apt-get not found: install Chromium so that $(CHROMIUM) exists (the report's browser test needs it)"; exit 1; }
	@echo "browser: installing Debian's chromium package (once)"
	@$(SUDO) apt-get update -qq >.cache-chromium.log 2>&1 && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >>.cache-chromium.log 2>&1 || { echo "browser: apt-get could not install chromium (see .cache-chromium.log)"; exit 1; }
	@rm -f .cache-chromium.log

# The kernels built with clang for coverage-guided fuzzing (libFuzzer coverage, ASan,
# UBSan) into build/fuzz/, for tests/format/test_fuzz_guided.py and fuzz/run.py; Debian's
# clang is installed once, only when missing.
fuzz-kernels: build
	@command -v clang >/dev/null || { command -v apt-get >/dev/null || { echo "fuzz-kernels: clang not found and no apt-get to install it"; exit 1; }; \
	  echo "fuzz-kernels: installing Debian's clang package (once)"; \
	  $(SUDO) apt-get update -qq >.cache-clang.log 2>&1 && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq clang >>.cache-clang.log 2>&1 || { echo "fuzz-kernels: apt-get could not install clang (see .cache-clang.log)"; exit 1; }; rm -f .cache-clang.log; }
	flock .build.lock $(PY) fuzz/build_kernels.py >/dev/null

# kcat (Debian's package, librdkafka's consumer) for the kafka tier's `kafkalog cat` parity
# tests (tests/kafka/test_kcat_parity.py) and bench/bench_cat.py; installed once, only when missing.
KCAT := /usr/bin/kcat
kcat: $(KCAT)

$(KCAT):
	@command -v apt-get >/dev/null || { echo "kcat: apt-get not found: install kcat so that $(KCAT) exists (the kcat parity tests need it)"; exit 1; }
	@echo "kcat: installing Debian's kcat package (once)"
	@$(SUDO) apt-get update -qq >.cache-kcat.log 2>&1 && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq kcat >>.cache-kcat.log 2>&1 || { echo "kcat: apt-get could not install kcat (see .cache-kcat.log)"; exit 1; }
	@rm -f .cache-kcat.log

# libfuse2 and fusermount (Debian's libfuse2 and fuse packages) under fusepy, for the
# real I/O-error tests (tests/log/eiofs.py: a FUSE passthrough that fails chosen calls with
# EIO); installed once, only when missing.
FUSERMOUNT := /usr/bin/fusermount
fuse: $(FUSERMOUNT)

$(FUSERMOUNT):
	@command -v apt-get >/dev/null || { echo "fuse: apt-get not found: install libfuse2 and fuse so that $(FUSERMOUNT) exists (the EIO tests need them)"; exit 1; }
	@echo "fuse: installing Debian's libfuse2 and fuse packages (once)"
	@$(SUDO) apt-get update -qq >.cache-fuse.log 2>&1 && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libfuse2 fuse >>.cache-fuse.log 2>&1 || { echo "fuse: apt-get could not install libfuse2 and fuse (see .cache-fuse.log)"; exit 1; }
	@rm -f .cache-fuse.log

bench: build
	$(PY) bench/bench_format.py $(BENCH_ARGS)

# Typed Avro values through Spark: ours vs from_avro, and vs the Arrow floor (issue 38 item 7).
bench-avro-spark: build avro-jars
	$(PY) bench/bench_avro_spark.py $(BENCH_ARGS)

# Main job: export a log dir to Parquet (generates a sample log when LOGDIR is empty).
LOGDIR ?=
OUT    ?= out/export
run: build
	$(PY) jobs/run_main.py $(if $(LOGDIR),--path $(LOGDIR)) --output $(OUT)

clean:
	rm -rf build $(VENV) *.egg-info spark_kafkalog/format/*.so spark_kafkalog/format/*.c
