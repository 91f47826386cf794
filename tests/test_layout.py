"""redisbeat's packages depend on each other one way, only the store talks to Redis, and
modules stay small enough to read: the file tree is the architecture."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import redisbeat

ROOT = Path(redisbeat.__file__).parent
#: What each part of redisbeat may import from the rest of it (its own modules aside).
ALLOWED = {
    "errors": set(),
    "urls": {"errors"},
    "config": {"errors", "urls"},
    "schedule": {"errors"},
    "store": {"errors", "urls", "config", "schedule"},
    "sending": {"errors", "schedule"},
    "signals": set(),
    "beat": {"errors", "config", "schedule", "store", "sending", "signals"},
    "cli": {"errors", "config", "schedule", "store", "sending", "worker"},
    "duplicates": {"errors", "config", "store"},
    "refusals": {"errors", "config", "store", "duplicates"},
    "worker": {"errors", "config", "store", "duplicates", "refusals"},
    "delaying": {"errors", "schedule", "store"},
    "__init__": {
        "errors",
        "config",
        "schedule",
        "store",
        "sending",
        "beat",
        "delaying",
        "worker",
    },
}


def modules() -> dict[str, Path]:
    return {
        ".".join(path.relative_to(ROOT).with_suffix("").parts): path
        for path in sorted(ROOT.rglob("*.py"))
    }


def imports(name: str, path: Path) -> set[str]:
    """Every module ``name`` imports, absolute and dotted, anywhere in its body."""
    package = ["redisbeat", *name.split(".")[:-1]]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            found.add(".".join([*base, *([node.module] if node.module else [])]))
    return found


def part(dotted: str) -> str:
    return dotted.split(".")[1] if "." in dotted else "__init__"


@pytest.mark.parametrize("name", sorted(modules()))
def test_a_module_imports_only_the_parts_below_its_own(name):
    own = part(f"redisbeat.{name}")
    for module in imports(name, modules()[name]):
        if module.startswith("redisbeat.") and part(module) != own:
            assert part(module) in ALLOWED[own], f"{name} imports {module}"


@pytest.mark.parametrize("name", sorted(modules()))
def test_only_the_store_imports_redis_py(name):
    uses_redis = any(m == "redis" or m.startswith("redis.") for m in imports(name, modules()[name]))
    assert not uses_redis or name.startswith("store."), name


def test_every_part_of_the_layout_is_there():
    assert {part(f"redisbeat.{name}") for name in modules()} == set(ALLOWED)


@pytest.mark.parametrize("name", sorted(modules()))
def test_modules_stay_around_300_lines_and_functions_around_40(name):
    source = modules()[name].read_text()
    assert len(source.splitlines()) <= 330, name
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            assert (node.end_lineno or node.lineno) - node.lineno < 50, f"{name}.{node.name}"
