# Fluxgate: every target a person runs is the one CI runs.
SHELL := bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help
MAKEFLAGS += --no-print-directory
# Python caches each module it compiles (__pycache__, gitignored) unless PYTHONDONTWRITEBYTECODE
# is set, as it is on our CI machines: then every process compiled everything it imported at each
# start, the suite's hundreds of service and tool processes and each pytest worker's collection.
# With the cache, a sample of the suite took 42% less CPU (bench/results/2026-12-02-suite-bytecode.md).
unexport PYTHONDONTWRITEBYTECODE
# Maven's runs here are short (resolving and copying jars, the Kafka Streams peer's small
# package), where the JVM's optimising compiler costs more than it saves: the checksum tests
# took half the CPU without it (bench/results/2026-12-02-suite-bytecode.md). Yours wins if set.
export MAVEN_OPTS ?= -XX:TieredStopAtLevel=1 -XX:+UseSerialGC

VENV ?= .venv
PY := $(VENV)/bin/python
STACK := $(VENV)/bin/fluxgate-stack
# libs first: the services depend on them.
PACKAGES := $(patsubst %/pyproject.toml,%,$(wildcard libs/*/pyproject.toml services/*/pyproject.toml services/persisters/*/pyproject.toml tools/*/pyproject.toml))
# coap-ingest's DTLS extra builds DTLSSocket, which needs autotools from Debian.
INSTALL_SPECS := $(patsubst services/coap-ingest,services/coap-ingest[dtls],$(PACKAGES))
BUILD_DEPS := autoconf automake libtool
TEST_DIRS := libs services tools contracts-tests tests
# The longest files (tests/e2e's soak, minutes) first: started last, one worker ran them alone at the end.
PARALLEL_FIRST := tests libs services tools contracts-tests
PYTEST := $(PY) -m pytest --import-mode=importlib --durations=60
ENSURE_UV := python3 -m uv --version >/dev/null 2>&1 || python3 -m pip install --quiet uv || \
	python3 -m pip install --quiet --break-system-packages uv  # Debian's own python3 is externally managed

.PHONY: help
help: ## List the targets
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  \033[1m%-14s\033[0m %s\n", $$1, $$2}'

# Compiled at install (uv does not by default; pip, as the images install, does).
UV_INSTALL := python3 -m uv pip install --quiet --compile-bytecode --python $(PY)
# The hashed locks `make lock` writes: every file installed is checked against them. The build
# tools first, so that the source distributions (pyspark, DTLSSocket) and the local packages
# build without isolation, from locked tools only; the local packages last, editable, without deps.
LOCKS := requirements.lock requirements-build.lock

$(VENV)/.installed: $(LOCKS) $(addsuffix /pyproject.toml,$(PACKAGES))
	@$(ENSURE_UV)
	@test -x $(PY) || python3 -m uv venv --quiet --python 3.11 $(VENV)
	@command -v autoreconf >/dev/null && command -v libtoolize >/dev/null || \
		{ apt-get update -qq && apt-get install -y -qq $(BUILD_DEPS) >/dev/null; }
	$(UV_INSTALL) --require-hashes --no-deps -r requirements-build.lock
	$(UV_INSTALL) --require-hashes --no-deps --no-build-isolation -r requirements.lock
	$(UV_INSTALL) --no-deps --no-build-isolation $(addprefix -e ,$(INSTALL_SPECS))
	@touch $@

.PHONY: lock
lock: ## Write the hashed lock files (requirements.lock, requirements-build.lock, each image's requirements.lock); UPGRADE=1 for the newest versions allowed
	@$(ENSURE_UV)
	python3 tools/lockfiles.py $(if $(UPGRADE),--upgrade)

.PHONY: install
install: $(VENV)/.installed ## Python packages (editable, one venv), the local stack's servers, Chromium for the console's browser test, promtool for the alerts
	$(STACK) install
	$(PY) -c 'from fluxgate_stack.fetch import ensure_debian_packages as get; get({"chromium": "chromium", "chromedriver": "chromium-driver", "promtool": "prometheus"})'
	MAVEN_BASEDIR=$(CURDIR) $(VENV)/bin/fluxgate-aggregator prefetch  # .mvn/maven.config: --strict-checksums
	$(PY) tools/charts.py helm  # built from the Go module proxy into .local/bin (cached by Go)

.PHONY: up
up: $(VENV)/.installed ## Download, configure and start the local stack (Kafka, the registry, Mosquitto, the stores, Prometheus); SECURED=1 adds the secured stores, Keycloak and the registry's HTTPS door
	$(STACK) up
	$(if $(SECURED),$(STACK) up elasticsearch-secured cassandra-secured registry-secured)

.PHONY: down
down: ## Stop exactly the processes `make up` started
	@test -x $(STACK) && $(STACK) down || true

.PHONY: status
status: ## What the local stack is running
	$(STACK) status

.PHONY: run
run: install ## The whole pipeline on the local stack with simulated devices; Ctrl-C stops it
	$(PY) tools/run_pipeline.py $(if $(SECURED),--secured)

# The Spark drivers the tests start map their classes from this archive, on the JIT's quick tier:
# a driver's start costs 14 CPU-s instead of 33 (tools/spark_class_archive.py). Written again
# whenever the venv or the JDK changes, whose files the archive must match.
SPARK_ARCHIVE := .local/spark/driver.jsa
$(SPARK_ARCHIVE): $(VENV)/.installed $(realpath $(dir $(realpath $(shell command -v java)))../lib/modules)
	@mkdir -p $(@D)
	$(PY) tools/spark_class_archive.py $@ > $@.log 2>&1 || { tail -40 $@.log; exit 1; }

.PHONY: test
# The tool's --options needs only the standard library: no venv yet on a fresh machine.
test: export SPARK_SUBMIT_OPTS = $(shell python3 tools/spark_class_archive.py $(SPARK_ARCHIVE) --options)
test: install $(SPARK_ARCHIVE) ## Unit, integration, contract and static tests against real servers
	$(STACK) up  # every server, before the workers: they would race to start them
	# Each kills or restarts a shared server: those of different stores side by side (one worker
	# a server, conftest.py), then Kafka's alone, since every test uses Kafka. First: they mostly
	# wait for a server to come back, and under .ci/run the images build meanwhile, in the cores
	# they leave idle instead of the parallel phase's (bench/results/2026-12-02-suite-image-build.md).
	$(PYTEST) -n 2 --dist loadgroup -m "serial and not serial(kills='kafka')" --junitxml=.local/test-times/serial.xml $(TEST_DIRS)
	$(PYTEST) -m "serial(kills='kafka')" --junitxml=.local/test-times/serial-kafka.xml $(TEST_DIRS)
	# Three workers, one of them the Spark lane (conftest.py): the `spark` tests one after another,
	# the others file by file. Two Spark tests side by side had slowed each other several times
	# over, and two workers left a third of the cores idle (bench/results/2026-11-30-suite-spark-lane.md).
	$(PYTEST) -n 3 --dist loadgroup -m "not serial and not paired" --junitxml=.local/test-times/parallel.xml $(PARALLEL_FIRST)
	# Two at a time, the fixed_names tests one after another on one worker (one xdist group,
	# conftest.py) while the other takes the rest: alone, they had kept the cores 61% busy over 816 s.
	$(PYTEST) -n 2 --dist loadgroup -m paired --junitxml=.local/test-times/paired.xml $(PARALLEL_FIRST)

.PHONY: test-unit
test-unit: $(VENV)/.installed ## Only the tests that need no server and no network
	$(PYTEST) -m "not integration and not spark and not downloads" $(TEST_DIRS)

.PHONY: lint
lint: $(VENV)/.installed ## ruff (lint + format check) and mypy --strict on every package
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy $(wildcard libs/*/src) $(wildcard services/*/src services/persisters/*/src) $(wildcard tools/*/src)

.PHONY: bench
# Full JIT for every line: quick-start (C1-only) JVMs would skew the numbers, and a bench that
# brings the stack up itself (ensure_up) would restart them quick-start without it.
bench: export FLUXGATE_STACK_JVM_QUICK_START := false
bench: install ## Throughput against baselines measured in the same run (results in bench-results/)
	$(STACK) up
	$(PY) bench/decode.py  # CPU alone, no server: the compiled Avro reader against fastavro
	$(PY) bench/prefetch.py  # a consumer capped at 4 MiB of prefetch: librdkafka's 1 s full-queue backoff against ours
	$(PY) bench/mqtt_proxy.py
	$(PY) bench/aggregator.py
	$(PY) bench/trigger_cost.py  # the aggregator's per-trigger fixed cost, back-to-back batches at steady rates
	$(PY) bench/device_table.py  # the aggregator's per-device state: a batch's cost against the devices it holds
	$(PY) bench/elasticsearch.py
	$(PY) bench/scylla.py
	$(PY) bench/hazelcast.py
	$(PY) bench/coap_ingest.py
	$(PY) bench/backlog.py  # backlogs: 10 min at the fleet rate piled up, then each stage started into it: catch-up time, peak memory against the charts' limits
	$(PY) bench/fleet.py  # Hive's shape: 100k, 300k, 1M devices at one rate, cost and memory per device
	$(PY) bench/pipeline.py  # last: it sets the per-service legs above beside the whole

.PHONY: images
images: $(VENV)/.installed ## Every service's image, built with podman from its Dockerfile (on a python:3.11-slim-bookworm stand-in from Debian's packages)
	$(PY) tools/images.py build

.PHONY: soak
soak: install ## The pipeline under faults (every server and service, killed and stopped in turn), then every store checked; report in bench-results/
	$(STACK) up
	$(PY) tools/soak.py $(SOAK_ARGS)

.PHONY: charts
charts: $(VENV)/.installed ## helm (built into .local/bin from the Go module proxy) and deploy/charts' dependencies
	$(PY) tools/charts.py build

.PHONY: charts-package
charts-package: $(VENV)/.installed ## Every chart as a versioned archive (its Chart.yaml's version, dependencies inside) in .local/charts, ready for helm push
	$(PY) tools/charts.py package

.PHONY: chart-schemas
chart-schemas: $(VENV)/.installed ## Write every chart's values.schema.json from the Settings classes (tests/static checks they are current)
	$(PY) tools/chart_schemas.py

.PHONY: dashboards
dashboards: $(VENV)/.installed ## Write the Grafana dashboards (deploy/charts/fluxgate/files/dashboards/) from tools/dashboard_panels.py
	$(PY) tools/dashboards.py

.PHONY: kibana-objects
kibana-objects: $(VENV)/.installed ## Write Kibana's data view, Vega panels and dashboard (deploy/kibana/fluxgate.ndjson) from tools/kibana_objects.py
	$(PY) tools/kibana_objects.py

.PHONY: compose-prometheus
compose-prometheus: $(VENV)/.installed ## Write compose's Prometheus configuration (deploy/prometheus/prometheus.yml, profile monitoring) from docker-compose.yml and the Settings classes
	$(PY) tools/compose_prometheus.py

.PHONY: clean
clean: ## Stop the stack and remove downloads, data and the venv (also what the stack keeps outside the checkout)
	@test -x $(STACK) && $(STACK) purge || true
	rm -rf .local $(VENV) bench-results spark-checkpoints
