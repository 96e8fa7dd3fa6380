"""load_settings: precedence (secrets, then environment, then defaults) and errors; build_backend
and its API token count."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from memora.app import settings as settings_module
from memora.app.build import (
    CONNECT_TIMEOUT_S,
    COSTLIEST_CHARACTER,
    build_backend,
    configured_memory,
    largest_message,
    shown_url,
)
from memora.app.settings import (
    BACKENDS,
    DEFAULT_MAX_RETRIES,
    DEFAULT_TIMEOUT_S,
    FOLD_POLICIES,
    SECRET_SETTINGS,
    Settings,
    SettingsError,
    load_settings,
)
from memora.backends import OfflineBackend
from memora.backends.chat_completions import NO_KEY, ChatCompletionsBackend
from memora.backends.openai_responses import OpenAIResponsesBackend
from memora.classroom.store.room import escaped, turn_growth
from memora.classroom.store.saved import dumps_saved
from memora.classroom.transcript.format import MAX_MESSAGE_CHARS
from memora.memory import DEFAULT_MODEL, policies
from tests.support.settings import MALFORMED, settings_read

OLLAMA = {
    "MEMORA_BACKEND": "chat",
    "MEMORA_BASE_URL": "http://localhost:11434/v1",
    "MEMORA_MODEL": "llama3.2",
}


def test_defaults_without_anything_are_offline_and_local() -> None:
    settings = load_settings({}, {})
    assert settings == Settings()
    assert (settings.backend, settings.model, settings.token_counting) == (
        "offline",
        DEFAULT_MODEL,
        "local",
    )
    assert (settings.timeout_s, settings.max_retries) == (DEFAULT_TIMEOUT_S, DEFAULT_MAX_RETRIES)
    assert isinstance(build_backend(settings), OfflineBackend)


def test_a_key_alone_selects_openai() -> None:
    settings = load_settings({}, {"OPENAI_API_KEY": "sk-env"})
    assert settings.backend == "openai" and settings.api_key == "sk-env"


def test_secrets_win_over_the_environment() -> None:
    # An empty secret is refused rather than falling through to the environment:
    # tests/test_settings_empty.py.
    environ = {
        "OPENAI_API_KEY": "sk-env",
        "MEMORA_MODEL": "gpt-env",
        "MEMORA_TIMEOUT": "5",
        "MEMORA_MAX_RETRIES": "4",
    }
    secrets = {"OPENAI_API_KEY": "sk-secret", "MEMORA_TIMEOUT": 12.5, "MEMORA_MAX_RETRIES": 0}
    settings = load_settings(secrets, environ)
    assert settings.api_key == "sk-secret"
    assert settings.model == "gpt-env"  # not in secrets: the environment's
    assert settings.timeout_s == 12.5
    assert settings.max_retries == 0  # zero is a value, not "unset"


def test_settings_built_by_field_name_never_read_the_process_environment(monkeypatch) -> None:
    """Only load_settings reads variables: Settings(...) in a test or a benchmark is what it is
    given, whatever the process's environment holds (settings_customise_sources)."""
    monkeypatch.setenv("MEMORA_MAX_TURNS", "5")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-the-environment")
    assert Settings() == load_settings({}, {})
    assert Settings(max_turns=7).max_turns == 7
    assert Settings(api_key="sk-given").backend == "openai", "a key given selects openai here too"


def test_the_key_never_shows_in_repr() -> None:
    settings = load_settings({"OPENAI_API_KEY": "sk-hidden", "MEMORA_API_KEY": "local-hidden"}, {})
    assert "sk-hidden" not in repr(settings) and "local-hidden" not in repr(settings)


def test_chat_from_environment_and_from_secrets_builds_the_same_backend() -> None:
    from_env = load_settings({}, OLLAMA)
    from_secrets = load_settings(OLLAMA, {})
    assert from_env == from_secrets
    backend = build_backend(from_env)
    assert isinstance(backend, ChatCompletionsBackend)
    assert str(backend.client.base_url).rstrip("/") == "http://localhost:11434/v1"
    assert backend.client.api_key == NO_KEY
    assert (
        backend.client.timeout.read == DEFAULT_TIMEOUT_S
        and backend.client.timeout.connect == CONNECT_TIMEOUT_S
    )
    assert backend.client.max_retries == DEFAULT_MAX_RETRIES


def test_chat_never_receives_the_openai_key() -> None:
    settings = load_settings({}, {**OLLAMA, "OPENAI_API_KEY": "sk-do-not-leak"})
    assert build_backend(settings).client.api_key == NO_KEY
    with_key = load_settings({}, {**OLLAMA, "MEMORA_API_KEY": "lm-studio-key"})
    assert build_backend(with_key).client.api_key == "lm-studio-key"


def test_memora_base_url_wins_over_openai_base_url() -> None:
    environ = {**OLLAMA, "OPENAI_BASE_URL": "http://elsewhere/v1"}
    assert load_settings({}, environ).base_url == "http://localhost:11434/v1"
    del environ["MEMORA_BASE_URL"]
    assert load_settings({}, environ).base_url == "http://elsewhere/v1"


def test_openai_backend_takes_base_url_timeout_and_retries() -> None:
    settings = load_settings(
        {},
        {
            "OPENAI_API_KEY": "sk-x",
            "OPENAI_BASE_URL": "http://127.0.0.1:9/v1",
            "MEMORA_TIMEOUT": "7",
            "MEMORA_MAX_RETRIES": "1",
        },
    )
    backend = build_backend(settings)
    assert isinstance(backend, OpenAIResponsesBackend)
    assert str(backend.client.base_url).rstrip("/") == "http://127.0.0.1:9/v1"
    assert (
        backend.client.timeout.read,
        backend.client.timeout.connect,
        backend.client.max_retries,
    ) == (7.0, 5.0, 1)
    short = build_backend(settings.with_changes(timeout_s=0.5))
    assert short.client.timeout.connect == 0.5  # never longer than the whole timeout


def test_page_changes_select_the_same_backends() -> None:
    base = load_settings({}, {})
    assert isinstance(
        build_backend(base.with_changes(backend="openai", api_key="sk-page")),
        OpenAIResponsesBackend,
    )
    chat = base.with_changes(backend="chat", base_url="http://localhost:1234/v1", model="qwen2.5")
    assert isinstance(build_backend(chat), ChatCompletionsBackend)


def test_api_token_counting_is_the_openai_backends_own_count() -> None:
    api = build_backend(
        load_settings({}, {"OPENAI_API_KEY": "sk-x", "MEMORA_TOKEN_COUNTING": "API"})
    )
    assert api.counting_source("gpt-5-mini") == "OpenAI responses.input_tokens.count"
    assert (
        build_backend(load_settings({}, {"OPENAI_API_KEY": "sk-x"})).counting_source("gpt-5-mini")
        is None
    )
    with pytest.raises(SettingsError, match="needs MEMORA_BACKEND=openai"):
        load_settings({}, {"MEMORA_TOKEN_COUNTING": "api"})


@pytest.mark.parametrize(
    ("environ", "names"),
    [
        ({"MEMORA_BACKEND": "anthropic"}, "MEMORA_BACKEND"),
        ({"MEMORA_TOKEN_COUNTING": "guess"}, "MEMORA_TOKEN_COUNTING"),
        ({**OLLAMA, "MEMORA_TOKEN_COUNTING": "api"}, "MEMORA_TOKEN_COUNTING=api"),
        ({"MEMORA_BACKEND": "chat", "MEMORA_MODEL": "llama3.2"}, "MEMORA_BASE_URL"),
        (
            {"MEMORA_BACKEND": "chat", "MEMORA_BASE_URL": "http://localhost:11434/v1"},
            "MEMORA_MODEL",
        ),
        ({"MEMORA_TIMEOUT": "soon"}, "MEMORA_TIMEOUT"),
        ({"MEMORA_TIMEOUT": "0"}, "MEMORA_TIMEOUT"),
        ({"MEMORA_TIMEOUT": "nan"}, "MEMORA_TIMEOUT"),
        ({"MEMORA_MAX_RETRIES": "-1"}, "MEMORA_MAX_RETRIES"),
        ({"MEMORA_MAX_RETRIES": "two"}, "MEMORA_MAX_RETRIES"),
        ({"MEMORA_MAX_INPUT_TOKENS": "1k"}, "MEMORA_MAX_INPUT_TOKENS"),
        ({"MEMORA_MAX_RECENT_TURNS": "-2"}, "MEMORA_MAX_RECENT_TURNS"),
    ],
)
def test_malformed_values_name_their_variable(environ: dict[str, str], names: str) -> None:
    with pytest.raises(SettingsError, match=names):
        load_settings({}, environ)


def test_a_bad_secret_is_reported_even_with_a_good_environment() -> None:
    with pytest.raises(SettingsError, match="MEMORA_BACKEND"):
        load_settings({"MEMORA_BACKEND": "gemini"}, {"MEMORA_BACKEND": "offline"})


def test_openai_without_a_key_cannot_be_built() -> None:
    with pytest.raises(SettingsError, match="OPENAI_API_KEY"):
        build_backend(load_settings({}, {"MEMORA_BACKEND": "openai"}))


def test_backends_lists_every_choice() -> None:
    assert BACKENDS == ("offline", "openai", "chat")


def test_the_chat_label_never_shows_credentials_in_the_url() -> None:
    assert shown_url("http://user:pw@10.0.0.5:8000/v1") == "http://10.0.0.5:8000/v1"
    assert shown_url("http://localhost:11434/v1") == "http://localhost:11434/v1"
    settings = load_settings(
        {}, {**OLLAMA, "MEMORA_BASE_URL": "https://bob:hunter22@llm.school.example/v1"}
    )
    assert "hunter22" not in build_backend(settings).label


def test_the_secrets_example_and_the_readme_list_every_setting() -> None:
    """A newcomer copies .streamlit/secrets.toml.example: it names every setting, each with a value
    TOML accepts."""
    root = Path(__file__).resolve().parents[1]
    names = settings_read()
    assert {"OPENAI_API_KEY", "MEMORA_STORE_URL", "MEMORA_MAX_STORE_MB"} <= names
    example = {}
    for line in (root / ".streamlit" / "secrets.toml.example").read_text().splitlines():
        if re.match(r"# [A-Z_]+ = ", line):
            example.update(tomllib.loads(line.removeprefix("# ")))
    assert sorted(names - set(example)) == [], "missing from .streamlit/secrets.toml.example"
    assert sorted(set(example) - names) == [], "in the example, but no setting reads it"
    table = (root / "docs" / "configuration.md").read_text().split("\n## ", 1)[0]
    assert sorted(name for name in names if f"`{name}`" not in table) == [], (
        "missing from docs/configuration.md's table"
    )


@pytest.mark.parametrize("source", ["environ", "secrets"])
def test_every_setting_refuses_a_malformed_value_naming_itself_and_what_it_accepts(
    source: str,
) -> None:
    """Walks every name ``load_settings`` reads (found by recording it, not from a list), one
    malformed at a time."""
    names = sorted(settings_read())
    assert len(names) >= 25 and "MEMORA_LOCK_SETTINGS" in names
    for name in names:
        value = f"hunter2-{name}-{MALFORMED}"
        with pytest.raises(SettingsError) as refused:
            load_settings({name: value}, {}) if source == "secrets" else load_settings(
                {}, {name: value}
            )
        assert len(refused.value.problems) == 1, (name, refused.value.problems)
        problem = refused.value.problems[0]
        assert problem.startswith(f"{name} must be "), problem
        if name in SECRET_SETTINGS:
            assert "hunter2" not in problem, problem


def test_every_malformed_setting_is_listed_in_one_error() -> None:
    names = settings_read()
    with pytest.raises(SettingsError) as refused:
        load_settings({}, dict.fromkeys(names, MALFORMED))
    assert sorted(problem.split(" ", 1)[0] for problem in refused.value.problems) == sorted(names)
    assert str(refused.value) == "\n".join(refused.value.problems)


def test_the_issues_classroom_is_refused_not_opened_on_defaults() -> None:
    """Issue 28's report: a key, a lock, a data folder and one cap at 0 opened unlocked, offline, on
    ~/.memora."""
    environ = {
        "OPENAI_API_KEY": "sk-classroom-key-1234567890",
        "MEMORA_LOCK_SETTINGS": "true",
        "MEMORA_DATA_DIR": "/srv/memora",
        "MEMORA_MAX_STORE_MB": "0",
    }
    with pytest.raises(SettingsError) as refused:
        load_settings({}, environ)
    assert refused.value.problems == (
        "MEMORA_MAX_STORE_MB must be a whole number from 1 to 1000000000, not 0",
    )
    assert "sk-classroom" not in str(refused.value)


@pytest.mark.parametrize(
    ("secrets", "environ", "says"),
    [
        (
            {},
            {"MEMORA_LOCK_SETTINGS": "ture"},
            "MEMORA_LOCK_SETTINGS must be true or false (or 1/0, yes/no, on/off), not 'ture'",
        ),
        (
            {},
            {"MEMORA_MAX_CONVERSATION_KB": "8193"},
            "MEMORA_MAX_CONVERSATION_KB must be a whole number from 1 to 8192, not 8193",
        ),
        (
            {},
            {"MEMORA_MAX_RETRIES": "٢"},
            "MEMORA_MAX_RETRIES must be a whole number from 0 to 10, not '٢'",
        ),  # int() takes it
        (
            {},
            {"MEMORA_FOLD_POLICY": "windows"},
            "MEMORA_FOLD_POLICY must be one of window, watermark, not 'windows'",
        ),
        (
            {},
            {"MEMORA_SHUTDOWN_GRACE_S": "inf"},
            "MEMORA_SHUTDOWN_GRACE_S must be a number of seconds above 0 and at most 300 (such as"
            " 5 or 0.5), not 'inf'",
        ),
        (
            {"MEMORA_MAX_TURNS": True},
            {},
            "MEMORA_MAX_TURNS must be a whole number from 1 to 1000000, not True",
        ),  # int(True) is 1
        (
            {"MEMORA_MAX_TURNS": 2.5},
            {},
            "MEMORA_MAX_TURNS must be a whole number from 1 to 1000000, not 2.5",
        ),
        (
            {"MEMORA_LOCK_SETTINGS": ["true"]},
            {},
            "MEMORA_LOCK_SETTINGS must be one value in secrets.toml, not a table or a list",
        ),
        (
            {"MEMORA_MODEL": 5},
            {},
            "MEMORA_MODEL must be a model's name on one line, without control characters, not 5",
        ),
        (
            {},
            {"MEMORA_DATA_DIR": "/srv/\x1b[2Jmemora"},
            "MEMORA_DATA_DIR must be a folder on one line",
        ),
        ({}, {"OPENAI_API_KEY": "sk-abc def"}, "OPENAI_API_KEY must be the key as issued"),
        (
            {},
            {"MEMORA_BASE_URL": "localhost:11434/v1"},
            "MEMORA_BASE_URL must be an http:// or https:// URL with a host",
        ),
        (
            {},
            {"OPENAI_BASE_URL": "http://user:pw@:8080/v1"},
            "OPENAI_BASE_URL must be an http:// or https:// URL with a host",
        ),
        (
            {},
            {"MEMORA_BASE_URL": "http://llm.school:80a/v1"},
            "MEMORA_BASE_URL must be an http:// or https:// URL with a host",
        ),
        (
            {},
            {"MEMORA_STORE_URL": "postgresql://u:pw@db:54x2/class"},
            "MEMORA_STORE_URL must be off, sqlite:///<path> or postgresql://",
        ),
    ],
)
def test_typical_typos_are_refused_with_what_the_variable_accepts(
    secrets: dict, environ: dict, says: str
) -> None:
    with pytest.raises(SettingsError) as refused:
        load_settings(secrets, environ)
    assert refused.value.problems[0].startswith(says), refused.value.problems
    assert "pw@" not in str(refused.value)


def test_a_malformed_openai_base_url_is_refused_even_where_memora_base_url_wins() -> None:
    with pytest.raises(SettingsError, match=r"^OPENAI_BASE_URL must be"):
        load_settings({}, {**OLLAMA, "OPENAI_BASE_URL": "ftp://elsewhere/v1"})


def test_limits_that_do_not_fit_together_name_the_variables() -> None:
    settings = load_settings(
        {}, {"MEMORA_MAX_INPUT_TOKENS": "3000", "MEMORA_CONTEXT_WINDOW": "2048"}
    )
    named = "MEMORA_MAX_INPUT_TOKENS, MEMORA_MAX_REPLY_TOKENS and MEMORA_CONTEXT_WINDOW"
    with pytest.raises(SettingsError, match=rf"^{named} do not fit"):
        configured_memory(settings)


def test_a_conversation_cap_too_small_for_one_turn_is_refused_at_startup_saying_what_works(
    tmp_path,
):
    # Issue 28: a 64 KB cap let the page start, then refused every first message before it was sent.
    def configured(kb: int, **extra: str):
        environ = {"MEMORA_DATA_DIR": str(tmp_path), "MEMORA_MAX_CONVERSATION_KB": str(kb), **extra}
        return configured_memory(load_settings({}, environ))

    with pytest.raises(
        SettingsError, match=r"MEMORA_MAX_CONVERSATION_KB=64 cannot hold one turn"
    ) as refused:
        configured(64)
    smallest = int(re.search(r"use at least (\d+)", str(refused.value)).group(1))
    assert 64 < smallest <= 1024  # the default holds a turn
    configured(smallest)
    with pytest.raises(SettingsError, match=f"MEMORA_MAX_CONVERSATION_KB={smallest - 1} "):
        configured(smallest - 1)
    # A smaller reply cap needs less room; without a store nothing is saved, so any cap starts.
    configured(smallest - 60, MEMORA_MAX_REPLY_TOKENS="400")
    configured(64, MEMORA_STORE_URL="off")


def test_the_issues_conversation_cap_that_refused_a_long_first_message_is_refused_at_startup(
    tmp_path,
):
    """Issue 45: the room check sent "?", so MEMORA_MAX_CONVERSATION_KB=178 started, and then a
    1,500-character first message was refused. It now checks the largest message
    MEMORA_MAX_MESSAGE_CHARS allows."""
    environ = {"MEMORA_DATA_DIR": str(tmp_path), "MEMORA_MAX_CONVERSATION_KB": "178"}
    with pytest.raises(SettingsError) as refused:
        configured_memory(load_settings({}, environ))
    assert refused.value.problems[0].startswith(
        "MEMORA_MAX_CONVERSATION_KB=178 cannot hold one turn"
    )
    assert "MEMORA_MAX_MESSAGE_CHARS=20,000 characters" in refused.value.problems[0]
    smallest = int(re.search(r"use at least (\d+)", str(refused.value)).group(1))
    settings = load_settings({}, {**environ, "MEMORA_MAX_CONVERSATION_KB": str(smallest)})
    memory = configured_memory(settings)
    needed = len(dumps_saved(memory, "zh-TW").encode()) + turn_growth(
        memory, largest_message(settings)
    )
    assert (smallest - 1) * 1024 < needed <= smallest * 1024
    # A shorter message cap needs less room: the bound follows the setting (178 is short even of
    # 1,500).
    with pytest.raises(SettingsError, match="MEMORA_MAX_MESSAGE_CHARS=1,500 characters") as shorter:
        configured_memory(load_settings({}, {**environ, "MEMORA_MAX_MESSAGE_CHARS": "1500"}))
    assert 178 < int(re.search(r"use at least (\d+)", str(shorter.value)).group(1)) < smallest


def test_the_largest_message_is_the_message_cap_at_the_costliest_saved_character():
    settings = Settings(max_message_chars=7)
    assert largest_message(settings) == COSTLIEST_CHARACTER * 7
    assert escaped(COSTLIEST_CHARACTER) == 6
    # No character is saved larger (surrogates are not text a browser can send).
    characters = (chr(code) for code in range(0x110000) if not 0xD800 <= code <= 0xDFFF)
    assert max(escaped(character) for character in characters) == 6


def test_the_message_cap_is_at_most_what_a_saved_conversation_can_restore():
    """Issue 45: the setting allowed 10**8 characters where the transcript restores at most 200,000,
    so a longer message could be saved but never restored. One constant now bounds both."""
    at_the_cap = {"MEMORA_MAX_MESSAGE_CHARS": str(MAX_MESSAGE_CHARS)}
    assert load_settings({}, at_the_cap).max_message_chars == MAX_MESSAGE_CHARS
    refused = f"^MEMORA_MAX_MESSAGE_CHARS must be a whole number from 1 to {MAX_MESSAGE_CHARS},"
    with pytest.raises(SettingsError, match=refused):
        load_settings({}, {"MEMORA_MAX_MESSAGE_CHARS": str(MAX_MESSAGE_CHARS + 1)})


def test_the_default_fold_policy_is_the_registry_s_default():
    assert Settings().fold_policy == policies.DEFAULT == FOLD_POLICIES[0]


def test_a_misspelled_memora_variable_is_refused_with_the_names_it_is_close_to():
    # Issue 28: MEMORA_LOCK_SETTING=true (no S) was ignored, and the classroom opened unlocked.
    with pytest.raises(SettingsError) as refused:
        load_settings({"MEMORA_MAX_INPUT_TOKEN": 900}, {"MEMORA_LOCK_SETTING": "true"})
    assert list(refused.value.problems) == [
        "MEMORA_LOCK_SETTING is not a setting Memora reads: did you mean MEMORA_LOCK_SETTINGS or"
        " MEMORA_BACKEND?",
        "MEMORA_MAX_INPUT_TOKEN is not a setting Memora reads: did you mean"
        " MEMORA_MAX_INPUT_TOKENS or MEMORA_MAX_SESSION_TOKENS?",
    ]
    # Every variable the module documents is one it reads; the test suite's and the benchmarks' own
    # are not settings.
    documented = set(re.findall(r"``(MEMORA_[A-Z_]+)``", settings_module.__doc__))
    with pytest.raises(SettingsError) as refused:
        load_settings(
            {},
            {
                **dict.fromkeys(documented, "?"),
                "MEMORA_TEST_POSTGRES_URL": "x",
                "MEMORA_LLAMA_MODEL": "y",
            },
        )
    assert [problem for problem in refused.value.problems if "is not a setting" in problem] == []
