# tuplemesh developer entry points. Every target creates .venv and installs what it needs.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PY     := $(BIN)/python
RUNTIME := $(VENV)/.installed-runtime
STAMP  := $(VENV)/.installed-dev
COMPILED := $(VENV)/.compiled
# the .py sources of the modules mypyc compiles (the list lives in services/tuplemesh/_compiled.py)
COMPILED_SRC := $(shell $(PYTHON) -c 'import runpy; print(*("services/" + m.replace(".", "/") + ".py" for m in runpy.run_path("services/tuplemesh/_compiled.py")["COMPILED_MODULES"]))')
PROTO_SRC := $(wildcard protos/tuplemesh/v1/*.proto)
PROTO_OUT := services

.PHONY: run test test-compiled test-pure prerequisites bench proto lint docs pipeline clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

# Reinstall when the project's dependencies change. `make run` needs the runtime only, plus mypy
# (its mypyc compiles the hot path); the tests, linters and Spark come with the dev extra.
$(RUNTIME): pyproject.toml | $(PY)
	$(PY) -m pip install --quiet -e . 'mypy>=1.10'
	touch $@

$(STAMP): $(RUNTIME) pyproject.toml
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $@

# Rebuild the compiled extension modules in place whenever one of their sources changes, so
# nothing runs stale compiled code (setup.py falls back to pure Python, with a warning, if it must).
# --force: every module's extension gets rebuilt, so none is left looking older than its source.
$(COMPILED): $(RUNTIME) setup.py services/tuplemesh/_compiled.py $(COMPILED_SRC)
	$(PY) setup.py --quiet build_ext --inplace --force
	touch $@

## run: word count on 3 workers, verified against the exact counts
run: $(COMPILED)
	$(BIN)/tuplemesh run examples.wordcount:topology --workers 3

## test: the whole suite (unit, stress, conformance, end-to-end) with the hot path compiled by
## mypyc, then again pure Python (all but the tests no compiled module changes); finds or installs
## the servers it starts (Prometheus, Java, redis, iproute2) first, or stops at once naming what
## is missing
test: test-compiled test-pure

test-compiled: prerequisites $(COMPILED)
	$(BIN)/pytest --durations=15

# Run once, in the compiled pass: test_make_run builds and runs its own pure-Python venv either
# way; the chart tests only render templates; the Spark tests exercise the connector, which is
# never compiled (the pure-Python runtime under it is what the gateway, client and fault tests
# of this pass exercise). Keeps `make test` under 30 minutes on 2 cores.
PURE_ONCE = --deselect tests/packaging/test_make_run.py --ignore=tests/deploy --ignore=tests/spark
test-pure: prerequisites $(COMPILED)
	TUPLEMESH_PURE_PYTHON=1 $(BIN)/pytest --durations=15 $(PURE_ONCE)

prerequisites: $(STAMP)
	$(PY) tests/prerequisites.py

## pipeline: Spark -> topology on 3 workers -> Spark -> Parquet, checked against Spark's own count
pipeline: $(STAMP) $(COMPILED)
	$(PY) examples/spark_pipeline.py

## bench: every benchmark beside its baselines; writes bench/results.json
bench: $(STAMP) $(COMPILED)
	$(PY) -m bench all

## proto: regenerate the protobuf code from protos/ (never edit its output by hand);
## grpcio-tools is a dev dependency, the package never imports it
proto: $(STAMP)
	$(PY) tests/protogen.py --out $(PROTO_OUT)

## docs: regenerate docs/configuration.md from the config keys, then build the site into
## docs/_build/html (offline, warnings are errors; benchmark plots from bench/results.json if present)
docs: $(STAMP)
	{ cat docs/configuration.head.md; $(BIN)/tuplemesh config; } > docs/configuration.md
	$(PY) -m sphinx -W --keep-going -q -b html docs docs/_build/html

## lint: ruff and mypy
lint: $(STAMP)
	$(BIN)/ruff check services tests examples bench
	$(BIN)/ruff format --check services tests examples bench
	$(BIN)/mypy

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .mypy_cache .ruff_cache docs/_build docs/_generated
	find services -name '*.so' -delete
