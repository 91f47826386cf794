"""redisbeat.sending: its modules import each other one way, and one of them reads Celery's
and kombu's private names."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import redisbeat.sending

PACKAGE = Path(redisbeat.sending.__file__).parent
#: Each module may import those after it, never those before it.
ORDER = [
    "__init__",
    "publisher",
    "delivery",
    "template",
    "lists",
    "envelope",
    "reprs",
    "wire",
    "routing",
    "receivers",
    "celery_internals",
]
#: What the package may import from the rest of redisbeat.
OUTSIDE = ("redisbeat.schedule", "redisbeat.errors")
#: Python's own special names, which every object may have.
PYTHONS = {"__name__", "__enter__", "__exit__", "__call__", *dir(object)}


def tree(name: str) -> ast.Module:
    return ast.parse((PACKAGE / f"{name}.py").read_text())


def imported(name: str) -> set[str]:
    """The redisbeat modules a module imports, dotted in full."""
    found: set[str] = set()
    for node in ast.walk(tree(name)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            # Level 1 is redisbeat.sending, level 2 redisbeat.
            base = ["redisbeat", "sending"][: 3 - node.level] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            if node.module:
                found.add(module)
            else:
                found.update(f"{module}.{alias.name}" for alias in node.names)
    return {module for module in found if module.startswith("redisbeat")}


def test_the_package_has_the_modules_of_its_layout():
    assert sorted(p.stem for p in PACKAGE.glob("*.py")) == sorted(ORDER)


@pytest.mark.parametrize("name", ORDER)
def test_a_module_imports_only_those_after_it_and_schedule_or_errors(name):
    after = {f"redisbeat.sending.{n}" for n in ORDER[ORDER.index(name) + 1 :]}
    for module in imported(name):
        assert module in after or module.startswith(OUTSIDE), f"{name} imports {module}"


@pytest.mark.parametrize("name", [n for n in ORDER if n != "celery_internals"])
def test_only_celery_internals_reads_a_private_name_of_another_object(name):
    for node in ast.walk(tree(name)):
        if isinstance(node, ast.Attribute) and node.attr.startswith("_"):
            own = isinstance(node.value, ast.Name) and node.value.id == "self"
            assert own or node.attr in PYTHONS, node.attr
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            assert not node.value.startswith("_"), node.value  # as getattr's name
