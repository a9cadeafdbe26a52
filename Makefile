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
# what building the compiled modules needs ([build-system] requires: setuptools>=77, mypy for mypyc,
# stubs), installed into the venv too: a venv's own setuptools is too old (3.11) or absent (3.12+)
BUILD_REQUIRES := $(shell $(PYTHON) -c 'import shlex, tomllib; print(*map(shlex.quote, tomllib.load(open("pyproject.toml", "rb"))["build-system"]["requires"]))')
# the tests `make test-pure` repeats without the compiled modules (the list lives in tests/pure_pass.py)
PURE_TESTS := $(shell $(PYTHON) tests/pure_pass.py)
PROTO_SRC := $(wildcard protos/tuplemesh/v1/*.proto)
PROTO_OUT := services

.PHONY: run test test-compiled test-pure prerequisites bench proto lint docs pipeline clean

$(PY):
	$(PYTHON) -m venv $(VENV)

# Reinstall when the project's dependencies change. `make run` needs the runtime only, plus the
# build requirements (mypyc compiles the hot path); the tests, linters and Spark come with the dev
# extra. The editable install itself is pure Python (TUPLEMESH_PURE_PYTHON=1, with the venv's
# setuptools): $(COMPILED) compiles the hot modules once, in place, beside their sources.
$(RUNTIME): pyproject.toml | $(PY)
	$(PY) -m pip install --quiet --upgrade pip $(BUILD_REQUIRES)
	TUPLEMESH_PURE_PYTHON=1 $(PY) -m pip install --quiet --no-build-isolation -e .
	touch $@

$(STAMP): $(RUNTIME) pyproject.toml
	TUPLEMESH_PURE_PYTHON=1 $(PY) -m pip install --quiet --no-build-isolation -e '.[dev]'
	touch $@

# Rebuild the compiled extension modules in place whenever one of their sources changes, so
# nothing runs stale compiled code; setup.py stops with the cause when it cannot compile them.
# --force: every module's extension gets rebuilt, so none is left looking older than its source.
$(COMPILED): $(RUNTIME) setup.py services/tuplemesh/_compiled.py $(COMPILED_SRC)
	env -u TUPLEMESH_PURE_PYTHON $(PY) setup.py --quiet build_ext --inplace --force
	touch $@

## run: word count on 3 workers, verified against the exact counts
run: $(COMPILED)
	$(BIN)/tuplemesh run examples.wordcount:topology --workers 3

## test: the whole suite (unit, stress, conformance, end-to-end) with the hot path compiled by
## mypyc, then again pure Python (the tests of the compiled modules); finds or installs the servers
## it starts (Prometheus, Java, redis, iproute2) first, or stops at once naming what is missing
test: test-compiled test-pure

test-compiled: prerequisites $(COMPILED)
	$(BIN)/pytest --durations=15

# Only the tests of the modules that have a compiled twin (tests/pure_pass.py): nothing else runs
# differently without the compiled modules, and every test already ran in the compiled pass.
test-pure: prerequisites $(COMPILED)
	TUPLEMESH_PURE_PYTHON=1 $(BIN)/pytest --durations=15 $(PURE_TESTS)

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
