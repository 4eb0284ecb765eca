# Two entry points on a fresh Debian machine (as root):
#   make demo   -- the main job
#   make test   -- the test suite (installs the Debian packages the tests use)
PYTHON ?= /usr/bin/python3
VENV   := .venv
PY     := $(VENV)/bin/python
DEBS   := clang llvm gcc make systemtap-sdt-dev bpftrace python3-venv

.PHONY: demo test bench debs venv clean

SOURCES := $(shell find pyebpf -name '*.py' 2>/dev/null)

# A regular (not editable) install, as a user's `pip install` makes it: an
# editable install adds an import hook that costs every interpreter ~17 ms at
# start-up.  Reinstalled when a source changes; pip compiles the bytecode.
$(VENV)/.stamp: pyproject.toml $(SOURCES)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q '.[test]'
	$(PY) -m compileall -q pyebpf >/dev/null
	touch $@

venv: $(VENV)/.stamp

debs:
	@missing=$$(for p in $(DEBS); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "installing Debian packages:" $$missing; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	fi

demo: debs venv
	$(PY) -m pyebpf demo

test: debs venv
	$(PY) -m pytest -q $(PYTEST_ARGS)

# bench: sets up the peers (bpftrace, BCC + kernel headers, tracefs; each change announced),
# runs every benchmark and the comparison, writes benchmarks/results/ and README's table.
bench: debs venv
	sh benchmarks/peers/setup.sh
	$(PY) -m benchmarks --readme

clean:
	rm -rf $(VENV) tests/build

# docs: the API reference, built from the docstrings by pdoc into docs/api/ (not
# committed), in a venv of its own; a pdoc warning fails the build.
DOCS_VENV   := .docs-venv
DOC_MODULES  = pyebpf $(shell find pyebpf -name '*.py' ! -name '_*' ! -path '*/_*' \
                 | sed 's|/__init__.py$$||; s|\.py$$||; s|/|.|g' | sort)

$(DOCS_VENV)/.stamp: pyproject.toml
	test -x $(DOCS_VENV)/bin/python || $(PYTHON) -m venv $(DOCS_VENV)
	$(DOCS_VENV)/bin/python -m pip install -q --upgrade pip
	$(DOCS_VENV)/bin/python -m pip install -q pdoc typing_extensions .
	touch $@

.PHONY: docs
docs: $(DOCS_VENV)/.stamp
	rm -rf docs/api
	@out=$$(PYTHONPATH=$(CURDIR) $(DOCS_VENV)/bin/pdoc -d restructuredtext -o docs/api \
		$(DOC_MODULES) 2>&1) || { echo "$$out" >&2; exit 1; }; \
	if [ -n "$$out" ]; then echo "$$out" >&2; echo "make docs: pdoc warned (above)" >&2; \
		rm -rf docs/api; exit 1; fi
	@echo "API reference: docs/api/index.html"
