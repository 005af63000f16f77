# The two commands a user needs: `make demo` and `make test`. Both set up first.
VENV   := .venv
PY     := $(VENV)/bin/python
export RAY_USAGE_STATS_ENABLED ?= 0
export MLFLOW_DISABLE_TELEMETRY ?= true

.PHONY: setup demo test test-fast test-slow test-cluster test-faults bench lint clean mlflow-ui serve

setup:
	@bash scripts/setup.sh

demo: setup
	$(PY) -m conceptual.demo

test: setup
	$(PY) -m pytest -m "not benchmark and not slow" tests

test-slow: setup
	$(PY) -m pytest -m "slow" tests

# A two-node Ray cluster on this machine, S3 and an MLflow server (minutes; part of test-slow).
test-cluster: setup
	$(PY) -m pytest -m cluster tests

# Processes killed and services stopped mid-run (part of test-slow).
test-faults: setup
	$(PY) -m pytest -m faults tests

test-fast: setup
	$(PY) -m pytest -m "not integration and not e2e and not benchmark and not slow" tests

bench: setup
	$(PY) -m pytest -m benchmark tests/benchmarks -s

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

clean:
	rm -rf .state .pytest_cache build *.egg-info

mlflow-ui: setup
	$(VENV)/bin/mlflow ui --backend-store-uri "$$($(PY) -c 'from conceptual.tracking import tracking_uri; print(tracking_uri())')" --host 127.0.0.1 --port 5000

# The captioning service as deployed: Ray Serve (serve/config.yaml, on 127.0.0.1:8000) behind
# the nginx front door on 127.0.0.1:8080 (FRONT_DOOR='listen=0.0.0.0:8080 ...' to change it).
serve: setup
	$(VENV)/bin/ray start --head --num-cpus $${NUM_CPUS:-2} && $(VENV)/bin/serve deploy serve/config.yaml
	$(PY) -m conceptual.serve.front_door $(FRONT_DOOR)
