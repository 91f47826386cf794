"""Earlier commits of redisbeat, each installed in a venv of its own, for the tests that run
beats of two releases on one Redis (a rolling upgrade).

A commit's venv is built once per dev venv, under ``.venv-upgrade/<sha>-<dev venv>`` in the
checkout (the second part a digest of the dev venv's site-packages path): the commit's
``redisbeat`` and ``redisbeat_testkit`` packages, taken from git with ``git archive``, are
copied into the venv's own site-packages (not an editable install: nothing of the checkout's
working tree is imported), and a ``.pth`` file puts the dev venv's site-packages after them,
for the third-party packages (Celery, kombu, redis-py). The dev venv's editable redisbeat
stays out of sight: the finder that serves it is installed by a ``.pth`` file of the dev
venv's own, and Python reads ``.pth`` files only in a site directory, not in a path that a
``.pth`` file adds.

``python -m redisbeat_testkit.releases`` (run in the checkout, with the dev venv's Python)
builds the venv the tests need, or says where it is.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

#: The old release of the rolling-upgrade test: the last commit to change what redisbeat
#: stores (the run state's ``unsent`` count, a pause's ``missed``) before 245b5b5, the one
#: the stored format was first recorded on, which only adds ``queued`` to the running
#: marker of an entry with an overlap policy.
PREVIOUS_FORMAT = "f144c09728950525f766a3801b5690057a8ec08f"
#: Where the venvs are, in the checkout.
VENVS = ".venv-upgrade"
#: The packages taken from the commit: import name -> where it is in the commit's tree.
PACKAGES = {"redisbeat": "redisbeat", "redisbeat_testkit": "testkit/redisbeat_testkit"}
#: The file that says a venv is complete, and what it was built from.
STAMP = ".built"


def venv_for(repo: Path, commit: str = PREVIOUS_FORMAT) -> Path:
    """The venv of ``commit`` of the checkout ``repo`` for the running dev venv, built if it
    is not there yet; its Python is ``<venv>/bin/python``. Raises
    ``RuntimeError`` when the checkout lacks the commit (a shallow clone)."""
    sha = resolve(repo, commit)
    deps = sysconfig.get_paths()["purelib"]
    # One per dev venv (and so per Python): a venv in use by another is never replaced.
    home = repo / VENVS / f"{sha}-{hashlib.sha1(deps.encode()).hexdigest()[:8]}"
    if _built(home, sha, deps):
        return home
    home.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{sha[:12]}-", dir=home.parent))
    staging.chmod(0o755)
    try:
        _build(repo, sha, staging, deps)
        if not _built(home, sha, deps):  # else another process built it meanwhile
            shutil.rmtree(home, ignore_errors=True)
            staging.rename(home)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return home


def python_of(home: Path) -> Path:
    return home / "bin" / "python"


def resolve(repo: Path, commit: str) -> str:
    """The full sha of ``commit`` in the checkout; a clear error when it is not there."""
    try:
        found = subprocess.run(
            ["git", "-C", str(repo), "rev-parse", "--verify", "--quiet", f"{commit}^{{commit}}"],
            capture_output=True,
            text=True,
            check=False,
        )
    except FileNotFoundError:
        raise RuntimeError(
            "git is not installed: the upgrade tests take a commit from git"
        ) from None
    if found.returncode != 0:
        raise RuntimeError(
            f"commit {commit[:12]} is not in the git history of {repo}: the upgrade tests run "
            "its beats. A shallow clone lacks it: fetch the history (git fetch --unshallow) "
            "and run again"
        )
    return found.stdout.strip()


def _built(home: Path, sha: str, deps: str) -> bool:
    try:
        stamp = json.loads((home / STAMP).read_text())
    except (OSError, ValueError):
        return False
    return stamp == {"commit": sha, "deps": deps} and python_of(home).exists()


def _build(repo: Path, sha: str, venv: Path, deps: str) -> None:
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    site = venv / "lib" / version / "site-packages"
    tree = venv / "src"
    tree.mkdir()
    archive = subprocess.Popen(
        ["git", "-C", str(repo), "archive", "--format=tar", sha, *PACKAGES.values()],
        stdout=subprocess.PIPE,
    )
    subprocess.run(["tar", "-x", "-C", str(tree)], stdin=archive.stdout, check=True)
    assert archive.stdout is not None
    archive.stdout.close()
    if archive.wait() != 0:
        raise RuntimeError(f"git archive {sha} failed")
    for name, path in PACKAGES.items():
        shutil.move(str(tree / path), str(site / name))
    shutil.rmtree(tree)
    (site / "redisbeat-dev-venv.pth").write_text(deps + "\n")
    _check(venv, site)
    (venv / STAMP).write_text(json.dumps({"commit": sha, "deps": deps}))


def _check(venv: Path, site: Path) -> None:
    """The venv imports the commit's packages, from its own site-packages."""
    code = "import celery, redisbeat, redisbeat_testkit as t; print(redisbeat.__file__, t.__file__)"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    found = subprocess.run(  # not from the checkout, whose redisbeat -c would import
        [str(python_of(venv)), "-c", code],
        capture_output=True,
        text=True,
        env=env,
        cwd=venv,
        check=False,
    )
    files = found.stdout.split()
    if found.returncode != 0 or len(files) != 2 or not all(f.startswith(str(site)) for f in files):
        raise RuntimeError(f"the venv at {venv} imports the wrong redisbeat: {found}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("commit", nargs="?", default=PREVIOUS_FORMAT)
    parser.add_argument("--repo", type=Path, default=None, help="the checkout (default: here)")
    args = parser.parse_args()
    repo = args.repo
    if repo is None:
        top = subprocess.run(
            ["git", "rev-parse", "--show-toplevel"], capture_output=True, text=True, check=True
        )
        repo = Path(top.stdout.strip())
    try:
        print(venv_for(repo.resolve(), args.commit))
    except RuntimeError as exc:
        sys.exit(f"error: {exc}")


if __name__ == "__main__":
    main()
