"""The path a reader follows: every memora file whose functions run in one offline turn with a fold, and which call which.

The turn goes through the product's own entry points: ``load_settings``, ``build_memory``, ``memory.turn(...)
.stream()``, then the fold ahead the page's reply job runs after each reply (``memory.prefold()``). A profiler
(``sys.setprofile``) records each call into a function of ``memora/``, and the nearest ``memora/`` frame that called
it: so the files counted are the ones whose code ran, not only those on the stack when a request was sent
(``test_page_turn.py`` measures that stack). Building the memory is left out: it happens once, not every turn.
docs/memory.md ("How the memory works") quotes these figures.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path
from types import FrameType
from typing import Any

from memora.app.build import build_memory
from memora.app.settings import load_settings
from memora.backends import OfflineBackend
from memora.memory import ShortTermMemory

PACKAGE = Path(__file__).resolve().parents[1] / "memora"
MAX_FILES, MAX_MEMORY_FILES = 11, 6
"""Issue 29 measured 17 and 11 before the plan, and set 9 and 4. Issue 43 split ``plan.py`` by reader: the rule stays in
``plan``, the request's layout and record moved to ``layout``, the budget's rules to ``budgets``. Both are leaves a
turn calls one way, so the path still reads top to bottom (no two files call each other both ways, below); it now
runs through 11 files, 6 of them in ``memora/memory/`` (core, plan, layout, budgets, server, the policy)."""


def _file(frame: FrameType) -> str | None:
    path = Path(frame.f_code.co_filename)
    return str(path.relative_to(PACKAGE.parent)) if path.is_relative_to(PACKAGE) else None


def trace(run) -> tuple[set[str], set[tuple[str, str]]]:
    """The memora files whose functions ``run()`` called, and the (caller file, callee file) pairs between them."""
    files: set[str] = set()
    pairs: set[tuple[str, str]] = set()

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event != "call" or (callee := _file(frame)) is None:
            return
        files.add(callee)
        caller = frame.f_back
        while caller is not None and _file(caller) is None:
            caller = caller.f_back
        if caller is not None and _file(caller) != callee:
            pairs.add((_file(caller), callee))  # type: ignore[arg-type]

    sys.setprofile(profile)
    try:
        run()
    finally:
        sys.setprofile(None)
    return files, pairs


def test_a_turn_with_a_fold_runs_through_few_files_and_no_two_call_each_other():
    memory = build_memory(load_settings({}, {"MEMORA_MAX_INPUT_TOKENS": "600"}))
    text = "My English level is B1 and I want to travel to Japan next spring. " * 2

    def turns() -> None:
        for _ in range(8):
            with memory.turn(text) as turn:
                for _ in turn.stream():
                    pass
            memory.prefold()

    files, pairs = trace(turns)

    assert memory.server.backend.offline and len(memory.conversation.versions) >= 2, "the traced turns must fold"
    memory_files = sorted(f for f in files if f.startswith("memora/memory/"))
    both_ways = sorted({tuple(sorted(pair)) for pair in pairs if pair[::-1] in pairs})
    print(f"\n{len(files)} files, {len(memory_files)} in memora/memory/: {sorted(files)}\nboth ways: {both_ways}")
    assert len(files) <= MAX_FILES, sorted(files)
    assert len(memory_files) <= MAX_MEMORY_FILES, memory_files
    assert both_ways == []


STATE = frozenset(name for name in vars(ShortTermMemory(OfflineBackend())) if name != "lock")
"""What a memory's state is made of: only its own methods assign it."""


def _assigned(node: ast.AST) -> list[ast.expr]:
    if isinstance(node, ast.Assign):
        return node.targets
    return [node.target] if isinstance(node, ast.AugAssign | ast.AnnAssign) else []


def test_nothing_outside_the_memory_assigns_its_state():
    """Any ``x.conversation = ...`` (or another part of the state) on an object other than ``self`` is a write from
    outside; ``self.<name>`` is each class's own attribute, the memory's only in its own class."""
    writes = [
        f"{path.relative_to(PACKAGE.parent)}:{attribute.lineno} assigns {ast.unparse(attribute)}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        for target in _assigned(node)
        for attribute in ast.walk(target)
        if isinstance(attribute, ast.Attribute) and attribute.attr in STATE
        and not (isinstance(attribute.value, ast.Name) and attribute.value.id == "self")
    ]  # fmt: skip
    assert {"conversation", "ledger", "server", "limits", "last_context", "last_prepared"} <= STATE
    assert writes == []
