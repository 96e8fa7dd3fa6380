"""Classroom settings: the lock and the per-session caps, from the environment or secrets."""

from __future__ import annotations

import pytest

from memora.app.page.state import new_memory
from memora.app.settings import SettingsError, load_settings
from memora.classroom.limits import DEFAULT_MAX_MESSAGE_CHARS, SessionLimits


def test_defaults_leave_the_page_unlocked_with_only_the_character_cap() -> None:
    settings = load_settings({}, {})
    assert not settings.locked
    assert settings.limits == SessionLimits(DEFAULT_MAX_MESSAGE_CHARS, None, None)


@pytest.mark.parametrize(
    ("raw", "locked"),
    [
        ("true", True),
        ("TRUE", True),
        ("1", True),
        ("yes", True),
        ("on", True),
        ("false", False),
        ("0", False),
        ("no", False),
        ("off", False),
    ],
)
def test_lock_values_from_the_environment(raw: str, locked: bool) -> None:
    assert load_settings({}, {"MEMORA_LOCK_SETTINGS": raw}).locked is locked


def test_secrets_take_toml_types_and_win_over_the_environment() -> None:
    secrets = {
        "MEMORA_LOCK_SETTINGS": True,
        "MEMORA_MAX_TURNS": 30,
        "MEMORA_MAX_SESSION_TOKENS": 50_000,
        "MEMORA_MAX_MESSAGE_CHARS": 2000,
    }
    environ = {"MEMORA_LOCK_SETTINGS": "false", "MEMORA_MAX_TURNS": "5"}
    settings = load_settings(secrets, environ)
    assert settings.locked and settings.limits == SessionLimits(2000, 30, 50_000)
    assert (
        load_settings({"MEMORA_LOCK_SETTINGS": False}, {"MEMORA_LOCK_SETTINGS": "true"}).locked
        is False
    )


@pytest.mark.parametrize(
    ("name", "raw", "message"),
    [
        (
            "MEMORA_LOCK_SETTINGS",
            "maybe",
            "MEMORA_LOCK_SETTINGS must be true or false (or 1/0, yes/no, on/off), not 'maybe'",
        ),
        (
            "MEMORA_MAX_TURNS",
            "0",
            "MEMORA_MAX_TURNS must be a whole number from 1 to 1000000, not 0",
        ),
        (
            "MEMORA_MAX_SESSION_TOKENS",
            "-1",
            "MEMORA_MAX_SESSION_TOKENS must be a whole number from 1 to 1000000000000, not -1",
        ),
        (
            "MEMORA_MAX_SESSION_TOKENS",
            "1e6",
            "MEMORA_MAX_SESSION_TOKENS must be a whole number from 1 to 1000000000000, not '1e6'",
        ),
        (
            "MEMORA_MAX_MESSAGE_CHARS",
            "0",
            "MEMORA_MAX_MESSAGE_CHARS must be a whole number from 1 to 200000, not 0",
        ),
    ],
)
def test_nonsense_caps_are_refused_naming_the_variable(name: str, raw: str, message: str) -> None:
    with pytest.raises(SettingsError) as caught:
        load_settings({}, {name: raw})
    assert str(caught.value) == message


def test_the_page_memory_gets_the_caps() -> None:
    settings = load_settings({}, {"MEMORA_MAX_TURNS": "3", "MEMORA_MAX_MESSAGE_CHARS": "500"})
    assert new_memory(settings).limits.caps == SessionLimits(500, 3, None)
