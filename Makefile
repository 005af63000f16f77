# The two commands a user needs: `make demo` and `make test`. Both set up first.
VENV   := .venv
PY     := $(VENV)/bin/python
export RAY_USAGE_STATS_ENABLED ?= 0
export MLFLOW_DISABLE_TELEMETRY ?= true

.PHONY: setup demo test test-fast test-slow test-cluster test-faults bench lint clean clean-outputs mlflow-ui mlflow serve serve-stop

setup:
	@bash scripts/setup.sh

# DEMO_ARGS: the demo's options, e.g. DEMO_ARGS="--candidates 1000 --port 8001" (--help lists them).
demo: setup
	$(PY) -m conceptual_demo $(DEMO_ARGS)

test: setup
	$(PY) -m pytest -m "not benchmark and not slow" --durations=60 tests

test-slow: setup
	$(PY) -m pytest -m "slow" tests

# A two-node Ray cluster on this machine, S3 and an MLflow server (minutes; part of test-slow).
test-cluster: setup
	$(PY) -m pytest -m cluster tests

# Processes killed and services stopped mid-run (part of test-slow).
test-faults: setup
	$(PY) -m pytest -m faults tests

# The unit tests alone: tests/unit, no Ray cluster, S3 or MLflow server (the README gives its time).
test-fast: setup
	$(PY) -m pytest -m "not benchmark and not slow" tests/unit

bench: setup
	$(PY) -m pytest -m benchmark tests/benchmarks -s

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

# Everything the platform wrote here, the MLflow database and registry included.
clean:
	rm -rf .state .pytest_cache build *.egg-info

# Training checkpoints, local model copies, job logs, the demo's and the README's outputs
# (OUTPUTS, out/ by default); keeps the MLflow database with its artifacts and registry,
# ratings and NLP assets.
OUTPUTS ?= out
clean-outputs:
	@home=$$($(PY) -c 'from conceptual.paths import state_dir; print(state_dir())') && \
	for d in "$$home/train" "$$home/models" "$$home/demo" "$$home/logs" $(OUTPUTS); do \
		[ -e "$$d" ] && du -sh "$$d" && rm -rf "$$d"; done; true

# MLflow's UI over the runs every job writes; MLFLOW_PORT=5001 make mlflow-ui for another port.
mlflow-ui: setup
	@bash scripts/mlflow_ui.sh

# MLflow's command line on the same tracking store: make mlflow ARGS="experiments search"
mlflow: setup
	@MLFLOW_TRACKING_URI="$$($(PY) -c 'from conceptual.tracking import configure; print(configure())')" $(VENV)/bin/mlflow $(ARGS)

# The captioning service as deployed (scripts/serve.sh): Ray Serve (serve/config.yaml, on
# 127.0.0.1:8000, or SERVE_CONFIG=another.yaml) behind the nginx front door on 127.0.0.1:8080
# (FRONT_DOOR='listen=0.0.0.0:8080 ...' to change it), which forwards to the config's
# http_options host and port; on a Ray head of its own with token authentication; Ctrl-C or
# `make serve-stop` stops all of it and no other Ray. LOW_LATENCY=1: Ray's HAProxy ingress and
# gRPC between replicas (Serve's overhead 8 ms at p50 instead of 15, BENCHMARKS.md), its stats
# and metrics on 127.0.0.1 (scripts/haproxy-loopback).
serve: setup
	@LOW_LATENCY=$(LOW_LATENCY) FRONT_DOOR="$(FRONT_DOOR)" SERVE_CONFIG="$(SERVE_CONFIG)" bash scripts/serve.sh start

serve-stop:
	@bash scripts/serve.sh stop
