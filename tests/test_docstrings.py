"""No stale docstring (issue 38): what a docstring names in ``memora/`` still exists.

A student follows a docstring's ``module.name`` to read on, and looks for its ``name()`` nearby; a name left behind
by a refactor sends them nowhere. Each reference in double backticks is resolved: a dotted one must import, and a
bare call must be defined by its own module (a function, a class or a method there, or a parameter) or class.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "memora"

REFERENCE = re.compile(r"``([A-Za-z_][\w.]*)(\(\))?``")
"""A docstring's reference: ``module.name`` (dotted) or ``name()`` (a bare call)."""


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _docstrings(tree: ast.Module) -> Iterator[tuple[str, list[str]]]:
    """Each docstring in ``tree`` (a module's, a class's, a function's, and an attribute's: a string statement
    after an assignment), with the names of the classes around it, outermost first."""

    def walk(node: ast.AST, classes: list[str]) -> Iterator[tuple[str, list[str]]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Expr) and isinstance(child.value, ast.Constant) and isinstance(child.value.value, str):
                yield child.value.value, classes
            inner = [*classes, child.name] if isinstance(child, ast.ClassDef) else classes
            if isinstance(child, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef | ast.Module):
                yield from walk(child, inner)

    yield from walk(tree, [])


def _resolves(dotted: str, namespace: dict[str, object]) -> bool | None:
    """Whether ``dotted`` names something: from ``memora``, from a name in ``namespace`` (the module's own), from
    a module of memora's by its last part, or from an instance by its usual name (``INSTANCES``); any of them
    will do. None when its first part names nothing known: a file's name, or a variable of the text."""
    head, *rest = dotted.split(".")
    if rest[-1] in FILE_SUFFIXES:
        return None
    if head in INSTANCES:
        module, _, name = INSTANCES[head].rpartition(".")
        if _attributes(getattr(importlib.import_module(module), name), rest):
            return True
    if head == "memora":
        for cut in range(len(rest), -1, -1):
            try:
                found: object = importlib.import_module(".".join(["memora", *rest[:cut]]))
            except ImportError:
                continue
            return _attributes(found, rest[cut:])
        return False
    if head in namespace:
        return _attributes(namespace[head], rest)
    if head in MODULES_BY_LAST_PART:
        return any(_attributes(importlib.import_module(name), rest) for name in MODULES_BY_LAST_PART[head])
    return None


def _attributes(found: object, names: list[str]) -> bool:
    for name in names:
        if isinstance(found, ModuleType) and not hasattr(found, name):
            try:
                found = importlib.import_module(f"{found.__name__}.{name}")
                continue
            except ImportError:
                return False
        if hasattr(found, name):
            found = getattr(found, name)
        else:
            return isinstance(found, type) and name in _instance_attributes(found)
    return True


def _instance_attributes(cls: type) -> set[str]:
    """What instances of ``cls`` (and of its bases in memora) hold: annotated fields and ``self.name = ...``."""
    names: set[str] = set()
    for klass in cls.__mro__:
        if not klass.__module__.startswith("memora"):
            continue
        names.update(getattr(klass, "__annotations__", {}))
        tree = ast.parse(inspect.getsource(sys.modules[klass.__module__]))
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and node.name == klass.__name__:
                names.update(
                    target.attr
                    for assignment in ast.walk(node)
                    if isinstance(assignment, ast.Assign | ast.AnnAssign)
                    for target in (assignment.targets if isinstance(assignment, ast.Assign) else [assignment.target])
                    for target in ast.walk(target)
                    if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self"
                )
    return names


INSTANCES = {
    "memory": "memora.memory.core.ShortTermMemory",
    "turn": "memora.memory.core.Turn",
    "keeper": "memora.classroom.store.keeper.ConversationKeeper",
}
"""The variables a docstring names an object by, and the object's class: ``memory.turn`` is a method of a memory."""

FILE_SUFFIXES = frozenset({"gz", "json", "md", "py", "sqlite3", "toml", "txt"})
"""A reference ending so is a file's name (``usage.sqlite3``), not a module's."""


MODULES_BY_LAST_PART: dict[str, list[str]] = {}
for _path in sorted(PACKAGE.rglob("*.py")):
    _name = _module_name(_path)
    MODULES_BY_LAST_PART.setdefault(_name.rsplit(".", 1)[-1], []).append(_name)


def stale_references(path: Path) -> list[str]:
    """The references in ``path``'s docstrings that do not resolve (see ``test_no_docstring_names_what_is_gone``)."""
    module = importlib.import_module(_module_name(path))
    tree = ast.parse(path.read_text(encoding="utf-8"))
    stale = []
    defined = {
        node.name if not isinstance(node, ast.arg) else node.arg
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.arg)
    }  # a function or class anywhere in the module, or a parameter: ``cancel()`` of the module's job class
    for text, classes in _docstrings(tree):
        scopes: list[object] = [module]
        for name in classes:
            scopes.append(getattr(scopes[-1], name))
        for match in REFERENCE.finditer(text):
            name, call = match.group(1), match.group(2)
            if "." in name:
                if _resolves(name, vars(module)) is False:
                    stale.append(f"{path.relative_to(ROOT)}: ``{match.group(0)[2:-2]}``")
            elif call and name not in defined and not any(hasattr(scope, name) for scope in scopes):
                stale.append(f"{path.relative_to(ROOT)}: ``{name}()``")
    return stale


def test_no_docstring_names_what_is_gone():
    """A docstring's ``module.name`` imports (from ``memora``, from a name its module holds, or from a module of
    memora's called ``module``), and its bare ``name()`` is defined by its own module or class."""
    modules = [path for path in sorted(PACKAGE.rglob("*.py")) if path.name != "__main__.py"]  # runs on import
    stale = [reference for path in modules for reference in stale_references(path)]
    assert stale == []
