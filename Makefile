# tuplemesh developer entry points. Every target creates .venv and installs what it needs.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PY     := $(BIN)/python
STAMP  := $(VENV)/.installed-dev
PROTO_SRC := $(wildcard protos/tuplemesh/v1/*.proto)
PROTO_OUT := services

.PHONY: run test bench proto lint docs pipeline clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

# Reinstall when the project's dependencies change.
$(STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $@

## run: word count on 3 workers, verified against the exact counts
run: $(STAMP)
	$(BIN)/tuplemesh run examples.wordcount:topology --workers 3

## test: the whole suite (unit, stress, conformance, end-to-end); finds or installs the servers it
## starts (Prometheus, Java, iproute2) first, or stops at once naming what is missing
test: $(STAMP)
	$(PY) tests/prerequisites.py
	$(BIN)/pytest

## pipeline: Spark -> topology on 3 workers -> Spark -> Parquet, checked against Spark's own count
pipeline: $(STAMP)
	$(PY) examples/spark_pipeline.py

## bench: every benchmark beside its baselines; writes bench/results.json
bench: $(STAMP)
	$(PY) -m bench all

## proto: regenerate the protobuf code from protos/ (never edit its output by hand);
## grpcio-tools is a dev dependency, the package never imports it
proto: $(STAMP)
	$(PY) tests/protogen.py --out $(PROTO_OUT)

## docs: regenerate docs/configuration.md from the config keys
docs: $(STAMP)
	{ cat docs/configuration.head.md; $(BIN)/tuplemesh config; } > docs/configuration.md

## lint: ruff and mypy
lint: $(STAMP)
	$(BIN)/ruff check services tests examples bench
	$(BIN)/ruff format --check services tests examples bench
	$(BIN)/mypy

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .mypy_cache .ruff_cache
