"""What installing redisbeat meets before any code runs: its metadata and the Makefile."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from matrix.cells import CELERY_CELLS, MAIN_PYTHON
from packaging.version import Version

import redisbeat

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("redisbeat", "redisbeat_django")


def test_the_license_is_an_spdx_expression_that_pip_installs_without_a_warning():
    pyproject = (ROOT / "pyproject.toml").read_text()
    # A table ({text = ...}) makes setuptools warn at every install that it is deprecated.
    assert re.search(r'^license = "BSD-3-Clause"$', pyproject, re.M)
    floor = re.search(r'^requires = \["setuptools>=([\d.]+)"\]$', pyproject, re.M)
    assert floor and Version(floor[1]) >= Version("77")  # the first to take an SPDX string


def test_every_apt_get_call_of_the_makefile_waits_for_the_dpkg_lock():
    makefile = (ROOT / "Makefile").read_text()
    calls = re.findall(r"(?<!sudo )apt-get( [^&;|]*?)(?:update|install)", makefile)
    assert len(calls) >= 8
    assert all("$(APT_WAIT)" in call for call in calls), calls
    assert re.search(r"^APT_WAIT := -o DPkg::Lock::Timeout=\d+$", makefile, re.M)


def test_the_oldest_supported_releases_are_the_floors_pyproject_declares():
    pyproject = (ROOT / "pyproject.toml").read_text()
    floors = dict(re.findall(r'^\s+"([\w-]+)(?:\[\w+\])?>=([\d.]+)",$', pyproject, re.M))
    pins = re.search(r"^OLDEST_PINS  := (.+)$", (ROOT / "Makefile").read_text(), re.M)
    assert pins is not None
    pinned = dict(re.findall(r"'([\w-]+)(?:\[\w+\])?==([\d.*]+)'", pins[1]))
    for name in ("celery", "kombu", "redis", "Django"):
        assert Version(pinned[name].replace("*", "0")) == Version(floors[name]), name


def test_the_version_is_written_once_and_the_changelogs_newest_release_is_it():
    pyproject = (ROOT / "pyproject.toml").read_text()
    project = pyproject.split("\n[project]\n")[1].split("\n[")[0]
    assert not re.search(r"^version =", project, re.M)
    assert re.search(r'^dynamic = \["version"\]$', project, re.M)
    assert 'version = {attr = "redisbeat.__version__"}' in pyproject
    changelog = (ROOT / "CHANGELOG.md").read_text()
    headings = re.findall(r"^## \[([^\]]+)\](?: - \d{4}-\d\d-\d\d)?$", changelog, re.M)
    assert headings[0] == "Unreleased"
    released = headings[1:]
    assert released[0] == redisbeat.__version__
    assert released == sorted(released, key=Version, reverse=True)


def test_the_python_classifiers_are_the_pythons_make_test_runs():
    pyproject = (ROOT / "pyproject.toml").read_text()
    claimed = re.findall(r'^    "Programming Language :: Python :: (3\.\d+)",$', pyproject, re.M)
    assert sorted(claimed, key=Version) == sorted(
        {cell.python for cell in CELERY_CELLS} | {MAIN_PYTHON}, key=Version
    )
    assert '"Programming Language :: Python :: 3 :: Only"' in pyproject
    assert f'requires-python = ">={claimed[0]}"' in pyproject


def test_the_wheel_holds_every_module_script_and_template_of_the_source_tree(tmp_path):
    """A package or data pattern the build configuration misses is silently left out."""
    source = tmp_path / "source"  # a copy: an in-tree build/ would hide what a fresh one lacks
    skip = shutil.ignore_patterns("__pycache__", "*.pyc")
    for package in PACKAGES:
        shutil.copytree(ROOT / package, source / package, ignore=skip)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    wheels = tmp_path / "wheels"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(wheels), str(source)],
        check=True,
        capture_output=True,
    )
    (wheel,) = wheels.glob("*.whl")
    # Built in isolation, without Celery: setuptools read the version without importing it.
    assert wheel.name.startswith(f"celery_redisbeat-{redisbeat.__version__}-")
    shipped = set(zipfile.ZipFile(wheel).namelist())
    wanted = {
        path.relative_to(source).as_posix()
        for package in PACKAGES
        for path in (source / package).rglob("*")
        if path.suffix in (".py", ".lua", ".html", ".typed")
    }
    assert len(wanted) > 60
    assert sorted(wanted - shipped) == []
