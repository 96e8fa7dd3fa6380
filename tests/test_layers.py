"""The repository's layers: memora's six parts, the order inside each, and no import circle anywhere.

``memora/`` has six parts: the text everything is made of, the memory (the lesson), the backends that send
requests to a model server, the classroom a shared page adds, the teaching tools, and the app a person runs.
``ORDER`` lists, for ``memora`` and for each package in it, its members in levels, bottom up (``ORDER["memora"]``
says which part is below which): a module imports only from its own level or below, where two modules are compared
in the closest package holding both. A sub-package is one member of its parent, with its own order; ``__init__`` is
the package's own module, and ``*`` every member not named. Every module has a place, and every named place is a
module.

An import inside a function counts (a lazy import is still a dependency); what a module loads when it is imported
counts too, parent packages included: ``import memora.text.messages`` runs ``memora/__init__.py`` first.
``benchmarks/`` and ``tests/`` join the circle check; a benchmark imports nothing from ``tests/``.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PARTS = ("text", "backends", "memory", "classroom", "teaching", "app")

ORDER: dict[str, tuple[tuple[str, ...], ...]] = {
    "memora": (
        ("text",),
        ("memory",),  # its seam to a model server (memory/backend.py) is its own: the backends implement it
        ("backends",),
        ("__init__",),  # the package's face: the lesson's names, imported when first used
        ("classroom",),
        ("teaching",),
        ("app",),
        ("__main__", "serve"),  # the two commands: the REPL, and a big class behind Caddy
    ),
    "memora.text": (("messages", "prompts"), ("tokens",), ("calibration",), ("usage",), ("__init__",)),
    "memora.backends": (
        ("base", "redaction", "server_tokenizer"),  # the Protocol and what every backend shares
        ("openai_errors", "offline"),
        ("chat_completions", "openai_responses"),
        ("__init__",),  # registers the adapter that takes the article's OpenAI() client
    ),
    "memora.memory": (
        ("backend", "hook", "values"),  # the seam to a model server, the saver's hook, frozen values
        ("policies",),
        ("plan",),  # the one pure decision
        ("budgets", "layout"),  # the budget in force and the calibration's rules; a request in the wire's roles
        ("server",),  # what the server's counts teach; the summary request
        ("core",),  # ShortTermMemory
        ("__init__",),
    ),
    "memora.memory.policies": (("__init__",), ("*",)),  # the registry, then one file per policy
    "memora.classroom": (
        ("limits", "transcript", "job", "grace"),  # a conversation as a file; a reply on its own thread; a stop's timing
        ("store",),
        ("server_budget",),
        ("guard", "postgres_ledger"),
        ("flights",),  # the jobs of this process, with the keepers that save them
        ("shutdown",),
        ("__init__",),
    ),
    "memora.classroom.transcript": (("untrusted",), ("format",), ("__init__",)),
    "memora.classroom.store": (
        ("base", "holders", "room"),  # the protocol; a booking holder's name and whether its process lives
        ("owner", "postgres_pool", "presence", "postgres", "sqlite"),
        ("__init__", "saved"),
        ("keeper",),
        ("reopen",),  # opens a conversation into a new keeper: by id, from a live one, an import
    ),
    "memora.teaching": (("audit", "ledger", "probe", "replay", "story"), ("prices",), ("what_if",), ("__init__",)),
    "memora.app": (
        ("settings", "first_run", "ports", "children"),
        ("served_grace", "build", "settings_docs"),  # serve's grace; memory and backend; the docs
        ("page", "repl", "probe", "serve"),
        ("__init__",),
    ),
    "memora.app.page": (
        ("markup", "i18n", "frames"),  # words and tables, no session
        ("state", "views", "chart", "picture"),
        ("browser", "handover", "render", "derived"),
        ("pager", "startup", "glossary", "session_guard"),
        ("budget", "conversation", "costs", "prefold", "reply_tail", "settings_panel", "summary_audit"),  # the panels' parts
        ("forget", "panels", "tools", "turn"),
        ("chat",),
        ("__init__",),
    ),
}
SDKS = ("openai", "streamlit", "pandas")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" and len(parts) > 1 else parts)


SOURCES = [ROOT / "streamlit_app.py", *(p for top in ("memora", "benchmarks", "tests") for p in (ROOT / top).rglob("*.py"))]
MODULES = {module_name(path): path for path in SOURCES}
MEMORA = sorted(name for name in MODULES if name == "memora" or name.startswith("memora."))


def _statements(tree: ast.Module, *, at_import: bool) -> list[ast.stmt]:
    """Every import statement of a module; ``at_import``: only those that run when it is imported (not in a function,
    nor under ``if TYPE_CHECKING:``)."""
    if not at_import:
        return [node for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))]
    found, todo = [], list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        elif isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            todo.extend(node.orelse)
        elif isinstance(node, (ast.If, ast.Try, ast.With)):
            todo.extend(child for child in ast.iter_child_nodes(node) if isinstance(child, ast.stmt))
    return found


def imports_of(module: str, *, at_import: bool = False) -> set[str]:
    """The repository's modules that ``module`` imports; ``from pkg import sub`` names ``sub``."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in _statements(ast.parse(path.read_text(encoding="utf-8")), at_import=at_import):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        else:
            base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
            target = ".".join([*base, node.module] if node.module else base)
            found.update(f"{target}.{a.name}" if f"{target}.{a.name}" in MODULES else target for a in node.names)
    return {name for name in found if name in MODULES and name != module}


GRAPH = {module: imports_of(module) for module in MODULES}


def place(package: str, module: str) -> int:
    """The level, in ``package``'s order, of the member of ``package`` that holds ``module``; ``*`` stands for every
    member not named (a fold policy is one new file: it needs no line here)."""
    member = "__init__" if module == package else module.removeprefix(package + ".").split(".")[0]
    named = {m for members in ORDER[package] for m in members}
    found = [level for level, members in enumerate(ORDER[package]) if member in members or (member not in named and "*" in members)]
    if not found:
        raise LookupError(f"{module} has no place in ORDER[{package!r}]")
    return found[0]


def common_package(a: str, b: str) -> str:
    """The closest package holding both modules (a package holds its own ``__init__``)."""
    pa, pb = a.split("."), b.split(".")
    shared = []
    for x, y in zip(pa, pb, strict=False):
        if x != y:
            break
        shared.append(x)
    package = ".".join(shared)
    while package not in ORDER:
        package = package.rpartition(".")[0]
    return package


def loaded_by(module: str) -> set[str]:
    """What ``import module`` runs: it, its parent packages, and everything they import when imported, transitively."""
    seen: set[str] = set()
    todo = [module]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        parts = name.split(".")
        todo.extend(".".join(parts[:n]) for n in range(1, len(parts)) if ".".join(parts[:n]) in MODULES)
        todo.extend(imports_of(name, at_import=True))
    return seen


def test_memora_has_six_parts():
    # the package's face, its two commands, and its formatter's setting (and the caches, hidden)
    commands = ("__init__.py", "__main__.py", "serve.py", "ruff.toml", "__pycache__")
    found = {p.stem for p in (ROOT / "memora").iterdir() if p.name not in commands and not p.name.startswith(".")}
    assert found == set(PARTS), f"memora/ holds {sorted(found)}; the parts are {PARTS}"


def test_memoras_docstring_lists_the_parts_bottom_up_as_the_order_does():
    import memora

    listed = re.findall(r"^- ``memora\.(\w+)``", memora.__doc__ or "", flags=re.MULTILINE)
    bottom_up = [member for members in ORDER["memora"] for member in members if member in PARTS]
    assert listed == bottom_up


def test_every_module_has_a_place_and_every_place_a_module():
    unplaced = []
    for module in MEMORA:
        for package in (p for p in ORDER if module == p or module.startswith(p + ".")):
            try:
                place(package, module)
            except LookupError as error:
                unplaced.append(str(error))
    for package, levels in ORDER.items():
        for member in (m for members in levels for m in members if m != "*"):
            name = package if member == "__init__" else f"{package}.{member}"
            if name not in MODULES:
                unplaced.append(f"ORDER[{package!r}] names {member!r}, which is not a module or package")
    subpackages = {m for m in MEMORA if MODULES[m].name == "__init__.py"}
    unplaced += [f"{p} is a package with no ORDER of its own" for p in sorted(subpackages - set(ORDER))]
    assert not unplaced, "\n".join(unplaced)


def test_every_import_in_memora_points_down_or_across_its_level():
    upward = []
    for module in MEMORA:
        for target in sorted(t for t in GRAPH[module] if t.startswith("memora")):
            package = common_package(module, target)
            if place(package, target) > place(package, module):
                upward.append(f"{module} imports {target} (in {package}'s order)")
    assert not upward, "these imports point up:\n" + "\n".join(upward)


def test_importing_a_module_loads_nothing_from_a_part_above_it():
    """Parent packages count: ``memora/__init__.py`` runs before any module of memora, and what it imports loads too."""
    above = []
    for module in MEMORA:
        level, parents = place("memora", module), {".".join(module.split(".")[:n]) for n in range(1, module.count(".") + 1)}
        loaded = {m for m in loaded_by(module) - parents if m.startswith("memora") and place("memora", m) > level}
        above += [f"import {module} loads {sorted(loaded)}"] if loaded else []
    assert not above, "\n".join(above)


def test_the_text_part_loads_no_sdk_in_a_fresh_interpreter():
    code = f"import sys, memora.text.messages; print(sorted(m for m in {SDKS!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True, timeout=120).stdout
    assert out.strip() == "[]", f"import memora.text.messages loaded {out.strip()}"


def test_memora_imports_neither_benchmarks_nor_tests_and_no_benchmark_imports_tests():
    wrong = [f"{m} imports {t}" for m in MEMORA for t in sorted(GRAPH[m]) if t.startswith(("benchmarks", "tests"))]
    benches = (m for m in MODULES if m.startswith("benchmarks"))
    wrong += [f"{m} imports {t}" for m in benches for t in sorted(GRAPH[m]) if t.startswith("tests")]
    assert not wrong, "\n".join(wrong)


def test_no_modules_in_the_repository_import_each_other_in_a_circle():
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


@pytest.mark.parametrize(
    ("importer", "imported", "expected"),
    [
        ("memora.app.page.chat", "memora.classroom.job", "down"),
        ("memora.classroom.job", "memora.app.page.chat", "up"),
        ("memora.classroom.store.keeper", "memora.classroom.store.base", "down"),
        ("memora.classroom.store.base", "memora.classroom.store.keeper", "up"),
        ("memora.memory", "memora.memory.core", "down"),
        ("memora.memory.core", "memora.memory", "up"),
        ("memora.text.messages", "memora.text.prompts", "across"),
    ],
)
def test_the_order_tells_up_from_down(importer, imported, expected):
    """The checks above are only as good as ``place``: a few known directions, both ways round."""
    package = common_package(importer, imported)
    low, high = place(package, imported), place(package, importer)
    assert {"down": low < high, "up": low > high, "across": low == high}[expected]


def test_each_type_is_imported_from_the_module_that_defines_it():
    """One import path per type: the memory's seam (``Backend``, ``BackendError``, the requests...) from
    ``memora.memory.backend``, not through a backends module; ``redact`` and its kin from ``redaction``."""
    import memora.backends.redaction
    import memora.memory.backend

    homes = {
        name: module.__name__
        for module in (memora.memory.backend, memora.backends.redaction)
        for name, value in vars(module).items()
        if not name.startswith("_")
        and getattr(value, "__module__", module.__name__) == module.__name__
        and not isinstance(value, type(memora))
    }
    detours = [
        f"{module}: from {node.module} import {alias.name} (defined in {homes[alias.name]})"
        for module, path in MODULES.items()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("memora")
        for alias in node.names
        if alias.name in homes and node.module != homes[alias.name]
    ]
    assert detours == []
