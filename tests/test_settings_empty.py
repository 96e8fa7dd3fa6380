"""Issue 39: settings never fail open. A value given but empty is never read as unset; a number out
of range is named at start; seconds are written as whole numbers are. The rules per variable are
docs/empty-settings.md's table, which these tests read, so that the document and the code cannot
disagree."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from memora.app.build import build_backend
from memora.app.settings import SettingsError, load_settings
from memora.backends.chat_completions import NO_KEY
from tests.support.settings import settings_read

DOC = Path(__file__).resolve().parents[1] / "docs" / "empty-settings.md"
OLLAMA = {
    "MEMORA_BACKEND": "chat",
    "MEMORA_BASE_URL": "http://localhost:11434/v1",
    "MEMORA_MODEL": "llama3.2",
}
KEYS = ("OPENAI_API_KEY", "MEMORA_API_KEY")


def documented_empty_values() -> dict[str, str]:
    """The first table of docs/empty-settings.md: each variable and what an empty value of it
    means."""
    table = DOC.read_text().split("| variable | an empty value |", 1)[1].split("\n\n", 1)[0]
    return dict(re.findall(r"^\| `([A-Z_]+)` \| (.+) \|$", table, flags=re.MULTILINE))


def refused(secrets: dict, environ: dict) -> tuple[str, ...]:
    with pytest.raises(SettingsError) as caught:
        load_settings(secrets, environ)
    return caught.value.problems


def test_the_document_gives_every_setting_one_row() -> None:
    assert sorted(documented_empty_values()) == sorted(settings_read())


@pytest.mark.parametrize("source", ["environ", "secrets"])
@pytest.mark.parametrize("empty", ["", "   "])
def test_an_empty_value_stops_the_app_naming_its_variable_wherever_the_document_says_so(
    source: str, empty: str
) -> None:
    stopping = [
        name for name, meaning in documented_empty_values().items() if meaning == "stops the app"
    ]
    assert len(stopping) == len(settings_read()) - len(KEYS)
    for name in stopping:
        given = {name: empty}
        problems = refused(given, {}) if source == "secrets" else refused({}, given)
        assert problems == (
            f"{name} is empty: give it a value, or leave it out to use its default",
        ), name


@pytest.mark.parametrize(
    "name",
    [
        "MEMORA_LOCK_SETTINGS",
        "MEMORA_MAX_SERVER_TOKENS",
        "MEMORA_MAX_TURNS",
        "MEMORA_MAX_SESSION_TOKENS",
    ],
)
def test_the_issues_empty_lock_and_caps_no_longer_open_unlocked_or_uncapped(name: str) -> None:
    """The report: an empty lock started unlocked, an empty cap dropped the cap."""
    assert refused({}, {"OPENAI_API_KEY": "sk-class", name: ""})[0].startswith(f"{name} is empty")


def test_an_empty_store_or_data_folder_never_falls_back_to_a_private_sqlite_under_home() -> None:
    """The report: each process got its own ~/.memora, and the processes no longer shared
    conversations or the budget."""
    problems = refused(
        {}, {"MEMORA_STORE_URL": "", "MEMORA_DATA_DIR": " ", "MEMORA_MAX_SERVER_TOKENS": "3000"}
    )
    assert [problem.split(" ", 1)[0] for problem in problems] == [
        "MEMORA_DATA_DIR",
        "MEMORA_STORE_URL",
    ]


def test_an_empty_secret_wins_over_the_environment_and_is_refused() -> None:
    problems = refused({"MEMORA_MAX_TURNS": ""}, {"MEMORA_MAX_TURNS": "40"})
    assert problems == (
        "MEMORA_MAX_TURNS is empty: give it a value, or leave it out to use its default",
    )


@pytest.mark.parametrize("source", ["environ", "secrets"])
def test_an_empty_key_without_the_lock_is_no_key_offline_as_an_absent_one(source: str) -> None:
    given = dict.fromkeys(KEYS, "")
    settings = load_settings(given, {}) if source == "secrets" else load_settings({}, given)
    assert (settings.backend, settings.api_key, settings.chat_api_key) == ("offline", None, None)
    assert settings == load_settings({}, {})
    assert documented_empty_values()["OPENAI_API_KEY"].startswith("no key: offline")


def test_an_empty_chat_key_without_the_lock_sends_no_key() -> None:
    settings = load_settings({}, {**OLLAMA, "MEMORA_API_KEY": " "})
    assert build_backend(settings).client.api_key == NO_KEY


@pytest.mark.parametrize("name", KEYS)
def test_an_empty_key_with_the_lock_on_stops_the_app(name: str) -> None:
    """The report: an empty key ran offline with the lock on as well, where the teacher's file meant
    to give one."""
    problems = refused({}, {"MEMORA_LOCK_SETTINGS": "true", name: ""})
    assert problems == (
        f"{name} is empty while MEMORA_LOCK_SETTINGS is on: give the key, or leave the variable"
        " out for a locked page without it",
    )


def test_an_empty_openai_key_with_the_openai_backend_stops_the_app() -> None:
    problems = refused({}, {"MEMORA_BACKEND": "openai", "OPENAI_API_KEY": ""})
    assert problems == (
        "OPENAI_API_KEY is empty while MEMORA_BACKEND=openai needs it: give the key",
    )


def test_a_locked_page_with_no_key_variable_at_all_is_still_offline() -> None:
    """A locked offline classroom is a deliberate setup: nothing in the file names a key, so nothing
    was lost."""
    settings = load_settings({}, {"MEMORA_LOCK_SETTINGS": "true", "MEMORA_MAX_TURNS": "40"})
    assert settings.locked and settings.backend == "offline" and settings.max_turns == 40


def test_every_empty_value_is_listed_in_one_error() -> None:
    names = settings_read()
    problems = refused(
        {}, {**dict.fromkeys(names, ""), "MEMORA_BACKEND": "offline", "MEMORA_LOCK_SETTINGS": "on"}
    )
    named = sorted(problem.split(" ", 1)[0] for problem in problems)
    assert named == sorted(names - {"MEMORA_BACKEND", "MEMORA_LOCK_SETTINGS"})


# -- numbers ---------------------------------------------------------------------------------------

NOT_NUMBERS = {"MEMORA_MODEL", "MEMORA_DATA_DIR", *KEYS}
"""Settings for which a long string of digits is a well-formed value: a model's name, a folder, a
key."""


def documented_ranges() -> dict[str, tuple[float, float]]:
    """The second table of docs/empty-settings.md: each number setting's smallest and largest
    accepted value."""
    table = DOC.read_text().split("| variable | accepted |", 1)[1]
    ranges = {}
    for names, accepted in re.findall(r"^\| (`.+`) \| (.+) \|$", table, flags=re.MULTILINE):
        figures = [float(figure.replace(",", "")) for figure in re.findall(r"\d[\d,]*", accepted)]
        low, high = (
            (0.0, figures[-1]) if accepted.startswith("seconds") else (figures[0], figures[1])
        )
        for name in re.findall(r"`([A-Z_]+)`", names):
            ranges[name] = (low, high)
    return ranges


def test_every_number_setting_has_a_documented_range() -> None:
    numbers = {
        name for name in settings_read() if name.startswith("MEMORA_") and name not in NOT_NUMBERS
    }
    numbers -= {"MEMORA_BACKEND", "MEMORA_BASE_URL", "MEMORA_TOKEN_COUNTING", "MEMORA_FOLD_POLICY"}
    numbers -= {"MEMORA_LOCK_SETTINGS", "MEMORA_STORE_URL"}
    assert sorted(documented_ranges()) == sorted(numbers)


@pytest.mark.parametrize("source", ["environ", "secrets"])
def test_a_number_past_its_largest_value_is_named_at_start(source: str) -> None:
    for name, (_, high) in documented_ranges().items():
        seconds = name.endswith(("_TIMEOUT", "_GRACE_S"))
        largest = int(high)
        past = largest + 0.5 if seconds else largest + 1
        accepted = (
            load_settings({name: largest}, {})
            if source == "secrets"
            else load_settings({}, {name: str(largest)})
        )
        assert accepted is not None
        problems = (
            refused({name: past}, {}) if source == "secrets" else refused({}, {name: str(past)})
        )
        assert len(problems) == 1 and problems[0].startswith(f"{name} must be "), problems
        assert f" {largest}" in problems[0], problems


def test_the_issues_idle_days_that_overflowed_every_page_are_refused_at_start() -> None:
    problems = refused({}, {"MEMORA_CONVERSATION_IDLE_DAYS": "1000000000"})
    assert problems == (
        "MEMORA_CONVERSATION_IDLE_DAYS must be a whole number from 1 to 36500, not 1000000000",
    )


@pytest.mark.parametrize("name", ["MEMORA_TIMEOUT", "MEMORA_SHUTDOWN_GRACE_S"])
@pytest.mark.parametrize(
    "raw", ["\uff14\uff10", "\u0664\u0660", "1_000", "1e3", "0x10", "inf", "-nan", "5 s", "."]
)
def test_seconds_are_written_as_whole_numbers_are(name: str, raw: str) -> None:
    """float() takes fullwidth and Arabic-Indic digits and underscores, which the whole numbers
    refuse."""
    largest = {"MEMORA_TIMEOUT": 3600, "MEMORA_SHUTDOWN_GRACE_S": 300}[name]
    problems = refused({}, {name: raw})
    assert problems == (
        f"{name} must be a number of seconds above 0 and at most {largest} (such as 5 or 0.5),"
        f" not {raw!r}",
    )
    assert refused({}, {"MEMORA_MAX_RETRIES": raw})[0].startswith(
        "MEMORA_MAX_RETRIES must be a whole number"
    )


@pytest.mark.parametrize(
    ("raw", "seconds"), [("40", 40.0), ("0.5", 0.5), (".5", 0.5), ("+7", 7.0), (" 12.25 ", 12.25)]
)
def test_seconds_in_ascii_decimals_are_read(raw: str, seconds: float) -> None:
    assert load_settings({}, {"MEMORA_TIMEOUT": raw}).timeout_s == seconds
    assert load_settings({"MEMORA_SHUTDOWN_GRACE_S": seconds}, {}).shutdown_grace_s == seconds
