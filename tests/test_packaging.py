"""What installing redisbeat meets before any code runs: its metadata and the Makefile."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from packaging.version import Version

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
    for name in ("celery", "redis", "Django"):
        assert Version(pinned[name].replace("*", "0")) == Version(floors[name]), name


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
    shipped = set(zipfile.ZipFile(wheel).namelist())
    wanted = {
        path.relative_to(source).as_posix()
        for package in PACKAGES
        for path in (source / package).rglob("*")
        if path.suffix in (".py", ".lua", ".html", ".typed")
    }
    assert len(wanted) > 60
    assert sorted(wanted - shipped) == []
