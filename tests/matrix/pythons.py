"""Each cell's Python, and its venv: fresh when what pip resolves could change, otherwise
kept, with only the wheel and the test kit reinstalled when they change."""

from __future__ import annotations

import glob
import hashlib
import json
import os
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TESTKIT = ROOT / "testkit"


@dataclass(frozen=True)
class Python:
    path: str
    #: "3.10.13"
    version: str
    #: Set when the Python asked for is not on this machine and another one runs the cell.
    note: str = ""


def version_of(executable: str) -> str | None:
    """The version ``executable`` reports; None when it does not run (a pyenv shim of a
    version not selected fails, for one)."""
    try:
        result = subprocess.run(
            [executable, "-c", "import platform; print(platform.python_version())"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except OSError:
        return None
    return result.stdout.strip() if result.returncode == 0 else None


def pyenv_roots() -> list[str]:
    roots = [os.environ.get("PYENV_ROOT", ""), os.path.expanduser("~/.pyenv")]
    if shutil.which("pyenv"):
        found = subprocess.run(["pyenv", "root"], capture_output=True, text=True, check=False)
        roots.insert(0, found.stdout.strip())
    return [root for root in dict.fromkeys(roots) if root]


def release(path: str) -> tuple[int, ...]:
    """(3, 10, 13) for .../versions/3.10.13/bin/python3.10; pre-releases sort first."""
    name = Path(path).parents[1].name
    return tuple(int(part) if part.isdigit() else -1 for part in name.split("."))


def find_python(minor: str) -> Python:
    """``python3.X`` on the PATH if it runs, else the newest pyenv build of 3.X, else the
    default ``python3`` with a note: a cell is never skipped silently."""
    candidates = [shutil.which(f"python{minor}") or ""]
    for root in pyenv_roots():
        builds = glob.glob(f"{root}/versions/{minor}.*/bin/python{minor}")
        candidates += sorted(builds, key=release, reverse=True)
    for candidate in filter(None, candidates):
        version = version_of(candidate)
        if version and version.rsplit(".", 1)[0] == minor:
            return Python(candidate, version)
    fallback = shutil.which("python3") or sys.executable
    version = version_of(fallback) or "?"
    return Python(fallback, version, f"no Python {minor} on this machine: ran on {version}")


def digest(*parts: bytes) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(hashlib.sha256(part).digest())
    return h.hexdigest()


def tree_digest(directory: Path) -> str:
    """The test kit's sources: reinstalled (not re-resolved) when they change."""
    files = sorted(p for p in directory.rglob("*.py") if "build" not in p.parts)
    return digest(*(bytes(str(p.relative_to(directory)), "utf-8") + p.read_bytes() for p in files))


def wheel_requirements(wheel: Path) -> bytes:
    """The wheel's Requires-Dist lines: when they change, pip must resolve afresh."""
    with zipfile.ZipFile(wheel) as archive:
        [name] = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        metadata = archive.read(name).decode()
    lines = [line for line in metadata.splitlines() if line.startswith("Requires-")]
    return "\n".join(lines).encode()


@cache
def testkit_wheel(directory: Path) -> Path:
    """The test kit's wheel, built once for every venv that needs it."""
    shutil.rmtree(directory, ignore_errors=True)
    pip = [sys.executable, "-m", "pip", "--quiet", "wheel", "--no-deps", "-w", str(directory)]
    subprocess.run([*pip, str(TESTKIT)], check=True)
    [wheel] = directory.glob("*.whl")
    return wheel


@dataclass
class CellVenv:
    path: Path
    python: Python

    @property
    def executable(self) -> str:
        return str(self.path / "bin" / "python")

    def pip(self, *args: str) -> None:
        subprocess.run([self.executable, "-m", "pip", "--quiet", *args], check=True)

    def ensure(
        self, wheel: Path, testkit: Callable[[], Path], requirements: tuple[str, ...]
    ) -> str:
        """Make the venv hold ``wheel``, the test kit (``testkit()`` builds its wheel) and
        ``requirements``; says what it did."""
        stamp = self.path / ".matrix-stamp.json"
        resolve = digest(
            self.python.version.encode(),
            json.dumps(requirements).encode(),
            wheel_requirements(wheel),
            (TESTKIT / "pyproject.toml").read_bytes(),
        )
        wanted = {
            "resolve": resolve,
            "wheel": digest(wheel.read_bytes()),
            "testkit": tree_digest(TESTKIT),
        }
        held = json.loads(stamp.read_text()) if stamp.exists() else {}
        if held == wanted:
            return "venv kept"
        if held.get("resolve") == resolve:
            self.pip("install", "--no-deps", "--force-reinstall", str(wheel), str(testkit()))
            done = "wheel reinstalled"
        else:
            shutil.rmtree(self.path, ignore_errors=True)
            subprocess.run(
                [self.python.path, "-m", "venv", "--upgrade-deps", str(self.path)], check=True
            )
            self.pip("install", str(wheel), str(testkit()), *requirements)
            done = "fresh venv"
        stamp.write_text(json.dumps(wanted))
        return done

    def query(self, code: str) -> str:
        return subprocess.run(
            [self.executable, "-c", code], capture_output=True, text=True, check=True
        ).stdout.strip()

    def site_packages(self) -> str:
        return self.query("import sysconfig; print(sysconfig.get_path('purelib'))")

    def versions(self, *names: str) -> dict[str, str]:
        """What pip installed, read from the metadata (nothing imported)."""
        code = (
            "import importlib.metadata as m, json, sys; "
            "print(json.dumps({n: m.version(n) for n in sys.argv[1:]}))"
        )
        result = subprocess.run(
            [self.executable, "-c", code, *names], capture_output=True, text=True, check=True
        )
        return dict(json.loads(result.stdout))
