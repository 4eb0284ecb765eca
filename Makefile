# Entry points on a fresh Debian machine (as root):
#   make demo          -- the main job; installs pyebpf (and its three dependencies) in .venv
#   make test          -- the test suite (installs the Debian packages the tests use): all
#                         of it under $(PYTHON), then the tests that need no kernel under
#                         every other CPython >= 3.10 found (make test-pythons alone)
PYTHON ?= /usr/bin/python3
VENV   := .venv
PY     := $(VENV)/bin/python
# What the tests use (pyebpf itself needs none of it): C/C++ compilers, libc's
# static library and kernel headers, binutils and USDT headers to build and read
# test programs, bpftrace to compare outputs with, bpftool and libbpf-dev to build
# and check BTF/CO-RE objects, chromium (headless) to open the flame graphs the
# profiler draws, prometheus to scrape `pyebpf export`; and programs with real
# USDT probes to read and trace: Debian's python3 (and libpython), postgresql, a
# JRE's libjvm.so (tests/systools.py finds them).  Under PYEBPF_REQUIRE_KERNEL=1 a
# test that skips for want of one of these fails (tests/conftest.py).
DEBS   := clang llvm gcc g++ make libc6-dev linux-libc-dev binutils systemtap-sdt-dev \
          bpftrace bpftool libbpf-dev chromium prometheus \
          python3 libpython3-dev postgresql openjdk-17-jre-headless

.PHONY: demo test test-pythons bench debs venv venv-test python-venv clean

SOURCES := $(shell find pyebpf asm -name '*.py' -o -name '*.s' 2>/dev/null)

# Debian's python3 makes virtual environments only with python3-venv.
python-venv:
	@$(PYTHON) -c 'import ensurepip, venv' 2>/dev/null || { \
		echo "installing Debian packages: python3-venv"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null; }

# A regular (not editable) install, as a user's `pip install` makes it: an
# editable install adds an import hook that costs every interpreter ~17 ms at
# start-up.  Reinstalled when a source changes; pip compiles the bytecode.
$(VENV)/.stamp: pyproject.toml $(SOURCES)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q .
	$(PY) -m compileall -q pyebpf >/dev/null
	touch $@

# The test extra (pytest, hypothesis, numpy...) on top; again only when it changes.
$(VENV)/.stamp-test: pyproject.toml | $(VENV)/.stamp
	$(PY) -m pip install -q '.[test]'
	touch $@

venv: python-venv $(VENV)/.stamp
venv-test: python-venv $(VENV)/.stamp $(VENV)/.stamp-test

debs:
	@missing=$$(for p in $(DEBS); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "installing Debian packages:" $$missing; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	fi

demo: venv
	$(PY) -m pyebpf demo
	@echo
	@echo "pyebpf is installed in $(VENV): run $(VENV)/bin/pyebpf --help (or 'source $(VENV)/bin/activate', then pyebpf)"

# -rs: the reason of every skip in the summary (under PYEBPF_REQUIRE_KERNEL=1 only
# the allow-listed ones of tests/conftest.py can skip)
test: debs venv-test
	$(PY) -m pytest -q -rs $(PYTEST_ARGS)
	sh .ci/test-pythons --skip $$($(PY) -c 'import sys; print("%d.%d" % sys.version_info[:2])') $(PYTEST_ARGS)

# The tests marked `kernel` need root and the running kernel; the others run
# under each CPython 3.10+ found (.venv-3.X each; absent ones are skipped).
test-pythons: debs python-venv
	sh .ci/test-pythons $(PYTEST_ARGS)

# bench: sets up the peers (bpftrace, BCC + kernel headers, tracefs; each change announced),
# runs every benchmark and the comparison, writes benchmarks/results/ and README's table.
bench: debs venv-test
	sh benchmarks/peers/setup.sh
	$(PY) -m benchmarks --readme

clean:
	rm -rf $(VENV) $(VENV)-3.* tests/build build dist *.egg-info $(DOCS_VENV) site

# docs: the documentation site (MkDocs + Material; the API reference from the
# docstrings by mkdocstrings; the command line's pages and the man page pyebpf(1)
# from the argument parsers: docs/gen.py) into site/, in a venv of its own;
# --strict: a warning (a broken link, a docstring that does not parse) fails it.
# `make test` builds it too (tests/test_docs.py), with the test extra's copies.
DOCS_VENV   := .docs-venv
DOCS_DEPS   := 'mkdocs>=1.6' 'mkdocs-material>=9.5' 'mkdocstrings[python]>=0.26'

$(DOCS_VENV)/.stamp: pyproject.toml
	test -x $(DOCS_VENV)/bin/python || $(PYTHON) -m venv $(DOCS_VENV)
	$(DOCS_VENV)/bin/python -m pip install -q --upgrade pip
	$(DOCS_VENV)/bin/python -m pip install -q $(DOCS_DEPS) .
	touch $@

.PHONY: docs
docs: python-venv $(DOCS_VENV)/.stamp
	PYTHONPATH=$(CURDIR) NO_MKDOCS_2_WARNING=1 $(DOCS_VENV)/bin/python -m mkdocs build --strict --quiet
	@echo "documentation: site/index.html (man page: man -l site/pyebpf.1)"
