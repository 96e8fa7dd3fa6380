"""Session limits for classroom sharing: refused before anything is sent or stored."""

import ast
from pathlib import Path

import pytest

from memora import ShortTermMemory
from memora.classroom.limits import LimitReached, SessionLimits
from tests.support.memory import assert_consistent, chat


def test_a_huge_paste_is_refused_before_any_request(backend):
    memory = ShortTermMemory(backend, caps=SessionLimits())
    with pytest.raises(LimitReached) as caught, memory.turn("x" * 200_000):
        pass
    assert (caught.value.code, caught.value.value, caught.value.limit) == ("message_too_long", 200_000, 20_000)
    assert "200,000 characters" in str(caught.value)
    assert memory.history == [] and backend.replies == [] and backend.summaries == []


def test_turn_and_token_caps(backend):
    memory = ShortTermMemory(backend, caps=SessionLimits(max_turns=2))
    chat(memory, "a", "b")
    with pytest.raises(LimitReached, match="limit of 2 turns"):
        chat(memory, "c")
    assert len(backend.replies) == 2
    assert_consistent(memory)

    memory = ShortTermMemory(backend, caps=SessionLimits(max_session_tokens=50))
    chat(memory, "a")
    assert memory.session_total_tokens >= 50
    with pytest.raises(LimitReached) as caught:
        chat(memory, "b")
    assert caught.value.code == "too_many_tokens"


@pytest.mark.parametrize("field", ["max_message_chars", "max_turns", "max_session_tokens"])
@pytest.mark.parametrize("value", [0, -5])
def test_nonsense_limits_are_refused(field, value):
    with pytest.raises(ValueError, match=field):
        SessionLimits(**{field: value})


def test_the_caps_are_the_classrooms_no_memory_module_imports_them():
    """The memory asks its caps through a seam (``hook.Caps``), so that the caps (``limits.caps``) can live in the classroom."""
    memory_part = Path(__file__).resolve().parents[1] / "memora" / "memory"
    importers = []
    for path in memory_part.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            names += [alias.name for alias in node.names] if isinstance(node, ast.Import | ast.ImportFrom) else []
            if path.name != "limits.py" and any(name.endswith("limits") for name in names):
                importers.append(path.name)
    assert importers == []


def test_a_bare_memory_has_no_caps_as_in_the_article(backend):
    memory = ShortTermMemory(backend, max_recent_turns=0)
    for _ in range(3):
        chat(memory, "hello")
    assert memory.limits.caps is None and len(memory.history) == 6
