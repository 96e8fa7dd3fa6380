"""The package's layers: each part of ``memora`` imports only the parts below it, and no modules import in a circle.

Read from the bottom up, the layers are the order in which the lesson builds: a message and the article's
prompts, then counting tokens, the memory that decides what to send (with the seam it asks of a model server), the
backends that implement that seam, and then
everything that keeps, guards or shows a memory. Imports inside functions count too: a lazy import is still a
dependency.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

LAYERS: tuple[tuple[str, ...], ...] = (
    ("memora.text.messages", "memora.text.prompts"),
    (
        "memora.text.tokens",
        "memora.text.usage",
        "memora.text.calibration",
    ),
    (
        "memora.memory",
        "memora.classroom.limits",
        "memora.teaching.replay",
    ),
    ("memora.backends",),
    ("memora",),  # the package's face: ShortTermMemory and its values
    ("memora.classroom.transcript",),
    ("memora.classroom.store",),
    ("memora.classroom",),
    (
        "memora.classroom.shutdown",
        "memora.classroom.flights",
        "memora.classroom.job",
    ),
    ("memora.app.settings",),
    ("memora.teaching",),
    ("memora.app.page", "memora.app.repl", "memora.app.probe"),
    ("memora.__main__",),
)
LAYER_OF = {part: level for level, parts in enumerate(LAYERS) for part in parts}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for path in (ROOT / "memora").rglob("*.py")}


def part_of(module: str) -> str:
    """``memora.memory.core`` -> ``memora.memory``; a top-level module is its own part."""
    return max((part for part in LAYER_OF if module == part or module.startswith(part + ".")), key=len, default=module)


def imports_of(module: str) -> set[str]:
    """The ``memora`` modules that ``module`` imports, at any depth of its code; ``from pkg import sub`` names sub."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
            target = ".".join([*base, node.module] if node.module else base)
            found.update(f"{target}.{a.name}" if f"{target}.{a.name}" in MODULES else target for a in node.names)
    return {name for name in found if name in MODULES and name != module}


GRAPH = {module: imports_of(module) for module in MODULES}


def test_every_part_of_the_package_has_a_layer():
    assert {part_of(module) for module in MODULES} <= set(LAYER_OF)


@pytest.mark.parametrize("module", sorted(MODULES))
def test_a_module_imports_only_from_its_own_part_or_the_layers_below(module):
    upward = {
        target for target in GRAPH[module] if part_of(target) != part_of(module) and LAYER_OF[part_of(target)] > LAYER_OF[part_of(module)]
    }
    assert not upward, f"{module} imports {sorted(upward)}, which are not below it"


def test_no_modules_import_each_other_in_a_circle():
    reaches: dict[str, set[str]] = defaultdict(set)

    def walk(start: str, module: str) -> None:
        for target in GRAPH[module]:
            if target not in reaches[start]:
                reaches[start].add(target)
                walk(start, target)

    for module in MODULES:
        walk(module, module)
    circles = sorted(module for module in MODULES if module in reaches[module])
    assert not circles, f"these modules import themselves through others: {circles}"


MAX_CLASS_LINES, MAX_FUNCTION_LINES = 250, 50


def test_no_class_over_250_lines_and_no_function_over_50():
    """The lesson reads in one sitting (issue 22): a class, from its ``class`` line to its last, fits 250 lines, and a
    function or method 50. Docstrings and comments count; decorators do not."""
    oversized = []
    for module, path in sorted(MODULES.items()):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                limit = MAX_CLASS_LINES if isinstance(node, ast.ClassDef) else MAX_FUNCTION_LINES
                lines = node.end_lineno - node.lineno + 1
                if lines > limit:
                    oversized.append(f"{module}:{node.lineno} {node.name} ({lines} lines, limit {limit})")
    assert not oversized, f"split these: {oversized}"
