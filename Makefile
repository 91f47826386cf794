# redisbeat: `make test` runs the whole test suite on a fresh machine.

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-dev
LINT_PATHS := redisbeat redisbeat_django tests

.PHONY: test lint pytest redis-server venv clean

test: lint pytest

venv: $(STAMP)

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 10))' || \
		{ echo "redisbeat needs Python >= 3.10 ($(PYTHON) is older)"; exit 1; }
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $@

# The tests start their own private redis-server processes; this only makes
# sure the binary exists.
redis-server:
	@if command -v redis-server >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "redis-server not found: installing it with apt-get"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null; \
	else \
		echo "redis-server is not installed. Install it (Debian/Ubuntu: sudo apt-get install redis-server," \
		     "macOS: brew install redis) and run make again."; \
		exit 1; \
	fi

lint: venv
	$(VENV)/bin/ruff check $(LINT_PATHS)
	$(VENV)/bin/ruff format --check $(LINT_PATHS)
	$(VENV)/bin/mypy

pytest: venv redis-server
	$(PY) -m pytest $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
