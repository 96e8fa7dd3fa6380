"""The page's catalogs: data files that ship with the package, the same keys and placeholders in every language; errors map to messages."""

from __future__ import annotations

import ast
import fnmatch
import string
import tomllib
from pathlib import Path

import pytest

from memora.app.page.i18n import CATALOG, LANGUAGES, LOCALES, CatalogError, backend_label, error_message, read_catalog, read_catalogs, t
from memora.app.settings import BACKENDS
from memora.memory import ContextBudgetError, SummaryError
from memora.memory.backend import BackendError
from memora.teaching.ledger import LEDGER_COLUMNS
from memora.teaching.probe import bundled_scenarios
from tests.support.words import ALLOWED, english_words

ROOT = Path(__file__).resolve().parents[1]


def placeholders(text: str) -> set[tuple[str, str, str | None]]:
    """Each ``{name:format!conversion}`` field: a translation keeps the name and how it is formatted ({cap:,})."""
    return {(name, spec, conversion) for _, name, spec, conversion in string.Formatter().parse(text) if name is not None}


def test_every_language_has_exactly_the_same_keys():
    assert set(CATALOG) == set(LANGUAGES) == {path.stem for path in LOCALES.glob("*.toml")}
    assert list(LANGUAGES) == ["en", "zh-TW"] and LANGUAGES["zh-TW"] == "繁體中文"
    english = CATALOG["en"]
    for lang, catalog in CATALOG.items():
        assert sorted(set(english) - set(catalog)) == [], f"{lang}.toml lacks these keys"
        assert sorted(set(catalog) - set(english)) == [], f"{lang}.toml has keys en.toml lacks"


def test_every_language_has_the_same_placeholders_per_key_and_no_empty_text():
    english = CATALOG["en"]
    for lang, catalog in CATALOG.items():
        for key, text in catalog.items():
            assert placeholders(text) == placeholders(english[key]), (lang, key)
            assert all(name and not name.isdigit() for name, _, _ in placeholders(text)), ("positional field", lang, key)
            assert text.strip(), (lang, key)


def test_pyproject_ships_every_catalog_file():
    """pyproject's package data covers every catalog file, or an installed memora would stop at import."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    patterns = pyproject["tool"]["setuptools"]["package-data"]["memora"]
    files = [path.relative_to(ROOT / "memora").as_posix() for path in LOCALES.glob("*.toml")]
    assert files and all(any(fnmatch.fnmatch(file, pattern) for pattern in patterns) for file in files)


def test_a_missing_catalog_file_fails_naming_the_file(tmp_path):
    with pytest.raises(CatalogError, match=r"en\.toml: the catalog file is missing") as error:
        read_catalogs(tmp_path)
    assert str(tmp_path / "en.toml") in str(error.value)


@pytest.mark.parametrize(
    ("data", "says"),
    [
        (b'"page.title" = "Memora\n', "not valid TOML"),
        (b'"page.title" = "Memora"\n"page.title" = "again"\n', "not valid TOML"),
        (b'"page.title" = "M\xe9mora"\n', "not valid TOML"),  # Latin-1, not UTF-8
        ('"language.name" = "Français"\npage.title = "Memora"\n'.encode(), "not text: page"),  # a dotted key is a table
        ('"language.name" = "Français"\n"chat.older" = 3\n'.encode(), "not text: chat.older"),
        (b'"page.title" = "Memora"\n', "does not name its language"),
    ],
)
def test_a_malformed_catalog_file_fails_naming_the_file(tmp_path, data, says):
    path = tmp_path / "fr.toml"
    path.write_bytes(data)
    with pytest.raises(CatalogError, match=says) as error:
        read_catalog(path)
    assert str(error.value).startswith(f"{path}: ")


def test_a_new_language_is_one_more_file(tmp_path):
    (tmp_path / "en.toml").write_text('"language.name" = "English"\n"page.title" = "Memora"\n', encoding="utf-8")
    (tmp_path / "de.toml").write_text('"language.name" = "Deutsch"\n"page.title" = "Memora"\n', encoding="utf-8")
    catalogs = read_catalogs(tmp_path)
    assert list(catalogs) == ["en", "de"] and catalogs["de"]["language.name"] == "Deutsch"
    with pytest.raises(TypeError):
        catalogs["de"]["page.title"] = "changed"


def test_every_key_the_page_uses_exists():
    """Literal keys passed to t() anywhere in memora/app/page exist in the catalog."""
    used = set()
    for path in (ROOT / "memora" / "app" / "page").glob("*.py"):
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


def test_the_zh_tw_catalog_has_no_english_word_outside_the_allowlist():
    """Every label in 繁體中文 is in Chinese, but for the allowlist's names and the code the page quotes."""
    left = {key: sorted(english_words(text)) for key, text in CATALOG["zh-TW"].items() if english_words(text)}
    assert left == {}


def test_the_allowlist_keeps_out_the_words_a_student_must_read_in_chinese():
    lesson_words = {"History", "Context", "tokenizer", "ledger", "summary", "reply", "turn", "window", "budget", "fold"}
    assert not {word.lower() for word in ALLOWED} & {word.lower() for word in lesson_words}
    assert english_words("完整 History 與上一次請求的 Context（`max_input_tokens`，{budget}）") == {"History", "Context"}


def test_zh_tw_calls_a_turn_by_one_word():
    assert not [key for key, text in CATALOG["zh-TW"].items() if "回合" in text]
    assert "輪" in t("zh-TW", "chat.stats", turn=1)


def test_every_bundled_scenario_has_its_title_and_fact_names_in_every_language():
    for scenario in bundled_scenarios():
        keys = [f"scenario.{scenario.id}", *(f"scenario.{scenario.id}.{fact.id}" for fact in scenario.facts)]
        for lang, catalog in CATALOG.items():
            assert [key for key in keys if key not in catalog] == [], lang
