"""Issue 45: each setting is declared once, as a field of ``memora.app.settings.Settings``. The
list in the module's docstring and the table in docs/configuration.md are written from it
(``python -m memora.app.settings_docs``), the page's help reads it, and these tests fail on any
difference."""

from __future__ import annotations

import re

from memora.app import settings_docs
from memora.app.page.settings_panel import variable_help
from memora.app.settings import VARIABLES, Settings, accepts, description
from tests.support.settings import settings_read


def test_the_docstring_s_list_and_the_configuration_table_are_what_the_settings_say():
    assert settings_docs.stale() == [], "run python -m memora.app.settings_docs"


def test_a_changed_description_is_a_difference_the_check_finds(monkeypatch):
    field = Settings.model_fields["max_turns"]
    monkeypatch.setattr(field, "description", "finished turns per conversation, now in other words")
    assert settings_docs.stale() == [settings_docs.CONFIGURATION_MD]


def test_each_variable_read_is_one_field_listed_once_in_the_docstring_and_once_in_the_table():
    assert sorted(settings_read()) == sorted(VARIABLES)
    listed = re.findall(r"^- ``([A-Z_]+)``:", settings_docs.SETTINGS_PY.read_text(), flags=re.M)
    assert listed == list(VARIABLES)
    page = settings_docs.CONFIGURATION_MD.read_text()
    rows = re.findall(r"^\| `([A-Z_]+)` \|", page, flags=re.M)
    assert rows == list(VARIABLES)


def test_every_field_says_what_it_means_and_what_it_accepts():
    for name, field in VARIABLES.items():
        assert description(name).strip(), name
        assert accepts(field).text, name


def test_the_generated_parts_are_replaced_and_the_rest_kept():
    page = f"intro\n{settings_docs.TABLE_STARTS}stale rows\n{settings_docs.TABLE_ENDS}after\n"
    written = settings_docs.with_table(page)
    assert written.startswith(f"intro\n{settings_docs.TABLE_STARTS}| variable |")
    assert written.endswith(f"{settings_docs.TABLE_ENDS}after\n") and "stale rows" not in written
    assert settings_docs.with_table(written) == written


def test_the_page_s_help_reads_each_variable_s_description():
    """The English page shows the model's own words; the 繁體中文 page names the variable, as
    code."""
    for name in ("MEMORA_MAX_INPUT_TOKENS", "MEMORA_MAX_RECENT_TURNS", "MEMORA_FOLD_POLICY"):
        assert variable_help("en", name) == f"\n\n`{name}`: {description(name)}."
        assert variable_help("zh-TW", name) == f"\n\n`{name}`"
