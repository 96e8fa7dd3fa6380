"""The page's catalog: both languages hold the same keys and placeholders; errors map to messages."""

from __future__ import annotations

import ast
import string
from pathlib import Path

import pytest

from memora.backends.base import BackendError
from memora.memory import ContextBudgetError, SummaryError
from memora.settings import BACKENDS
from memora.teaching.ledger import LEDGER_COLUMNS
from memora.ui.i18n import CATALOG, LANGUAGES, backend_label, error_message, t

ROOT = Path(__file__).resolve().parents[1]


def placeholders(text: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(text) if name}


def test_every_language_has_exactly_the_same_keys_and_placeholders():
    assert set(CATALOG) == set(LANGUAGES)
    english = CATALOG["en"]
    for lang, catalog in CATALOG.items():
        assert set(catalog) == set(english), lang
        for key, text in catalog.items():
            assert placeholders(text) == placeholders(english[key]), (lang, key)
            assert text.strip(), (lang, key)


def test_every_key_the_page_uses_exists():
    """Literal keys passed to t() anywhere in memora/ui exist in the catalog."""
    used = set()
    for path in (ROOT / "memora" / "ui").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "t" and len(node.args) >= 2:
                key = node.args[1]
                if isinstance(key, ast.Constant):
                    used.add(key.value)
    assert used and used <= set(CATALOG["en"])


def test_every_ledger_column_has_a_label():
    for column in LEDGER_COLUMNS:
        assert t("en", f"ledger.{column}") and t("zh-TW", f"ledger.{column}")


def test_t_fills_placeholders_and_unknown_language_falls_back_to_english():
    assert t("zh-TW", "chat.older", count=4) == "較早的訊息（4）"
    assert t("fr", "panel.status") == "Status"
    with pytest.raises(KeyError):
        t("en", "no.such.key")


def test_core_errors_map_to_translated_messages():
    budget = ContextBudgetError(1234, 1000)
    assert error_message("en", budget).startswith("This message needs 1234 input tokens")
    assert "1234" in error_message("zh-TW", budget) and "1000" in error_message("zh-TW", budget)
    assert error_message("en", SummaryError("x")) == "The summary update failed, so the previous summary is kept."
    assert error_message("en", BackendError("rate limited (HTTP 429)")) == "The model request failed: rate limited (HTTP 429)"
    assert error_message("zh-TW", ValueError("bad")) == "請求被拒絕：bad"
    # Other exceptions show only their type: their text could carry request internals.
    assert error_message("en", RuntimeError("sk-secret in a traceback")) == "An unexpected error occurred (RuntimeError)."


def test_every_backend_has_a_label_and_new_ones_fall_back_to_their_name():
    for name in BACKENDS:
        assert backend_label("en", name)
    assert backend_label("en", "offline") == "Offline engine (no language model)"
    assert backend_label("zh-TW", "some-new-backend") == "some-new-backend"
