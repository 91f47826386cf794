"""What the matrix runs, and why each cell is there.

A Celery cell installs the built wheel (never the source tree) in a fresh venv on its Python
with one pin, as a user's ``pip install celery-redisbeat "celery~=5.4.0"`` would, and lets pip
resolve kombu and redis-py; then it runs the tests that see a Celery, kombu or redis-py
difference against the default ``redis-server`` (Redis 7 from apt). A server cell runs the
real beats from the main .venv (the latest releases) against another server.
"""

from __future__ import annotations

from dataclasses import dataclass

#: The Python of the main .venv (``python3`` on CI), where ``make test`` runs the whole suite
#: on the latest releases. With the cells' Pythons, these are the classifiers' Pythons
#: (tests/test_packaging.py keeps them equal).
MAIN_PYTHON = "3.11"

#: Which redisbeat and which server a run uses; every cell runs it first.
WHAT_RUNS = "tests/test_what_runs.py"


#: What a Celery cell installs for the tests, next to the wheel and the test kit:
#: tests/conftest.py imports hypothesis.
TEST_REQUIREMENTS = ("pytest>=8", "pytest-timeout>=2.3", "hypothesis>=6.100")


@dataclass(frozen=True)
class CeleryCell:
    name: str
    python: str
    #: The cell's own requirements, next to the wheel; pip resolves everything else.
    pins: tuple[str, ...]
    why: str

    @property
    def requirements(self) -> tuple[str, ...]:
        return (*TEST_REQUIREMENTS, *self.pins)


CELERY_CELLS = (
    CeleryCell("celery-5.3", "3.10", ("celery~=5.3.0",), "the oldest Celery on the oldest Python"),
    CeleryCell("celery-5.4", "3.12", ("celery~=5.4.0",), "Celery 5.4"),
    CeleryCell("celery-5.5", "3.13", ("celery~=5.5.0",), "kombu 5.5 caps redis-py at 5.2.1"),
    CeleryCell("redis-py-5", "3.10", ("celery~=5.6.0", "redis<6"), "the lowest redis-py major"),
    CeleryCell("celery-5.7", "3.13", ("celery~=5.7.0",), "redis-py 8, the highest major"),
)

#: What cannot work, which pip must refuse at install time (the README says why): Celery 5.7
#: needs kombu 5.7, which needs redis-py 6.4 or later; kombu 5.5 caps redis-py at 5.2.1.
REFUSED = (("celery~=5.7.0", "redis<6.4"), ("celery~=5.5.0", "redis>=6"))

#: What every Celery cell runs: the messages against Celery's own ``apply_async`` and kombu's
#: Redis transport, and real ``celery beat`` processes sending exactly once (batches through
#: kombu's producer, Celery's settings and banner). A killed beat's lease, a SIGTERM and a
#: Redis restart are the beats' and the server's own: the main suite, the oldest venv and
#: the server cells run them.
CELERY_TESTS = (
    WHAT_RUNS,
    "tests/test_publisher.py",
    "tests/test_publish_receivers.py",
    "tests/test_beat_process.py",
    "tests/test_beats.py",
)
CELERY_DESELECT = "not killed_mid_batch and not sigterm and not redis_restart"

#: pytest-django is not installed in a cell: it would set the tests' Django project up, whose
#: apps (django-celery-beat) would bring pins of their own into what pip resolves. Without it,
#: pyproject's DJANGO_SETTINGS_MODULE is an option pytest does not know, and says so; this is
#: the one warning a cell lets pass (pyproject's ``filterwarnings = ["error"]`` stands).
CELERY_WARNINGS = ("ignore:Unknown config option:pytest.PytestConfigWarning",)


@dataclass(frozen=True)
class ServerCell:
    name: str
    #: A key of :data:`.servers.SERVERS`.
    server: str
    tests: tuple[str, ...]
    deselect: str
    why: str


#: The real beats against each server: three beats claiming, finishing and sending exactly
#: once, a restart from an append-only file, the wake-up channel. A killed beat's recovery
#: and a SIGTERM run the same scripts again: the main suite's, on Redis 7.
BEAT_TESTS = (WHAT_RUNS, "tests/test_beat_process.py", "tests/test_beats.py")
BEAT_DESELECT = "not killed_mid_batch and not sigterm"

SERVER_CELLS = (
    ServerCell("redis-6.2", "redis-6.2", BEAT_TESTS, BEAT_DESELECT, "the oldest Redis claimed"),
    ServerCell("valkey", "valkey", BEAT_TESTS, BEAT_DESELECT, "Valkey, current"),
    # Redis 6.2 cannot run the kit's cluster: its nodes choose their bus port
    # (--cluster-port), which Redis 7 brought.
    ServerCell("valkey-cluster", "valkey", (WHAT_RUNS, "tests/test_cluster.py"), "", "3 masters"),
)
