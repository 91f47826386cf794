"""The Django app's modules depend on each other in one direction, and stay small."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

import redisbeat_django

PACKAGE = Path(redisbeat_django.__file__).parent
#: Django imports an app's signal handlers in AppConfig.ready(), once the models are loaded.
READY_IMPORTS = {("apps", "signals")}


@dataclass(frozen=True)
class Module:
    name: str  # dotted, relative to the package: "models", "management.commands.x"
    package: list[str]  # where its relative imports start
    source: str
    tree: ast.Module


def read_modules() -> dict[str, Module]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
        if parts[0] == "migrations":
            continue
        package = parts[:-1]
        if parts[-1] == "__init__":
            parts = parts[:-1] or ["__init__"]
        source = path.read_text()
        found[".".join(parts)] = Module(".".join(parts), package, source, ast.parse(source))
    return found


MODULES = read_modules()


def own_imports(module: Module, node: ast.AST) -> set[str]:
    """The modules of this package a node imports (``from . import x`` counts as ``x``)."""
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    elif isinstance(node, ast.ImportFrom):
        # level 1 is the module's own package, each level more one package up.
        up = module.package[: len(module.package) - node.level + 1] if node.level else []
        base = [*up, *(node.module.split(".") if node.module else [])]
        names = [".".join(base), *(".".join([*base, alias.name]) for alias in node.names)]
    else:
        return set()
    names = [name.removeprefix("redisbeat_django.") for name in names]
    return {name for name in names if name in MODULES}


def graph(*, top_level_only: bool) -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {}
    for name, module in MODULES.items():
        nodes = module.tree.body if top_level_only else list(ast.walk(module.tree))
        edges[name] = {dep for node in nodes for dep in own_imports(module, node)} - {name}
    return edges


def test_the_modules_of_the_django_app_import_each_other_in_one_direction():
    edges = graph(top_level_only=False)
    for module, dep in READY_IMPORTS:
        edges[module].discard(dep)
    try:
        tuple(TopologicalSorter(edges).static_order())
    except CycleError as exc:
        raise AssertionError(f"import cycle: {' -> '.join(exc.args[1])}") from None


def test_the_models_know_nothing_of_the_sync():
    edges = graph(top_level_only=False)
    assert edges["models"].isdisjoint({"sync", "signals", "admin", "forms"})


def test_no_module_of_the_django_app_hides_an_import_of_another_inside_a_function():
    everywhere, top_level = graph(top_level_only=False), graph(top_level_only=True)
    hidden = {(name, dep) for name, deps in everywhere.items() for dep in deps - top_level[name]}
    assert hidden == READY_IMPORTS


def test_the_modules_of_the_django_app_stay_around_300_lines_and_functions_around_40():
    for name, module in MODULES.items():
        assert len(module.source.splitlines()) <= 320, name
        for node in ast.walk(module.tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                assert (node.end_lineno or node.lineno) - node.lineno < 45, f"{name}.{node.name}"
