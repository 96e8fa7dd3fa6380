"""Shared fixtures, and the suite's tiers.

Every test belongs to one tier, a pytest marker (registered in pyproject.toml):

- ``unit``: the memory, the planner, formats, settings and the teaching tools; pure Python in one process,
  no socket and no Streamlit runtime. ``python -m pytest -m unit`` is the fast loop while editing.
- ``page``: the page through Streamlit's ``AppTest`` (one process, a scripted backend).
- ``integration``: real sockets and servers: the backends over HTTP on 127.0.0.1, Prism, llama.cpp, PostgreSQL.
- ``browser``: Chromium against a real ``streamlit run``.

A test's tier, first match wins: a tier marker on the test or on its parameter (``STORE_KINDS`` marks the
PostgreSQL store ``integration``); ``integration`` when it asks for the ``postgres_url`` fixture, itself or through
another fixture; else its module's, from ``MODULE_TIERS``. A test's name never decides. A module missing from the
map stops the run: a new test file must say which tier it is in.
"""

import pytest

from tests.support.app import ENV_NAMES
from tests.support.fakes import ScriptedBackend

pytest_plugins = ("tests.support.stores",)  # its postgres_url fixture, for every module


@pytest.fixture
def backend() -> ScriptedBackend:
    return ScriptedBackend()


@pytest.fixture
def no_secrets(tmp_path, monkeypatch):
    """No secrets file anywhere Streamlit looks, and no key in the environment.

    The page test modules apply it to every test with ``pytestmark = pytest.mark.usefixtures("no_secrets")``.
    """
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    # The page tests fold by the article's window, the default, set so a configured environment cannot change it.
    monkeypatch.setenv("MEMORA_FOLD_POLICY", "window")
    for name in ENV_NAMES:
        monkeypatch.delenv(name, raising=False)
    assert not (tmp_path / ".streamlit" / "secrets.toml").exists()


@pytest.fixture(autouse=True)
def error_details_restored():
    """A locked page sets ``client.showErrorDetails`` for the whole process, as on a server; each test starts as it was."""
    from streamlit import config

    before = config.get_option("client.showErrorDetails")
    yield
    config.set_option("client.showErrorDetails", before)


@pytest.fixture(autouse=True)
def postgres_pools_closed():
    """A process keeps one pool and one presence lock per database URL for its life; a test run makes many (a schema of
    its own each), so each test closes those it opened, and the shared test database is not left holding them."""
    yield
    import sys

    if "memora.classroom.store.presence" in sys.modules:  # no test that never booked a turn on PostgreSQL imports it
        from memora.classroom.store.presence import PRESENCES

        PRESENCES.close_all()
    if "memora.classroom.store.postgres_pool" in sys.modules:
        from memora.classroom.store.postgres_pool import POOLS

        POOLS.close_all()


MODULE_TIERS = {
    **dict.fromkeys(
        (
            "test_audit",
            "test_bench",
            "test_bench_scripts",
            "test_bench_peers",
            "test_bench_real_peers",
            "test_classroom_settings",
            "test_cli",
            "test_docs",
            "test_i18n",
            "test_docstrings",
            "test_layers",
            "test_lesson_code",
            "test_limits",
            "test_memory",
            "test_memory_properties",
            "test_request_record",
            "test_offline",
            "test_picture",
            "test_prefold",
            "test_prices",
            "test_recent_window_guarantee",
            "test_replay",
            "test_settings",
            "test_settings_empty",
            "test_settings_docs",
            "test_saved_format",
            "test_store",
            "test_token_calibration",
            "test_tiers",
            "test_tokens",
            "test_transcript",
            "test_ui_views",
            "test_usage",
            "test_what_if",
        ),
        "unit",
    ),
    **dict.fromkeys(
        (
            "test_app",
            "test_app_tools",
            "test_classroom_safeguards",
            "test_conversation_page",
            "test_fold_policy",
            "test_policy_registry",
            "test_turn_trace",
            "test_page_lesson",
            "test_page_turn",
            "test_page_turn_box",
            "test_story",
            "test_what_if_text",
            "test_store_room",
            "test_error_details",
            "test_hostile_urls",
            "test_reliability_page",
            "test_reload_mid_reply",
            "test_reply_job",
            "test_settings_page",
        ),
        "page",
    ),
    **dict.fromkeys(
        (
            "test_article_program",
            "test_backends_http",
            "test_bench_real",
            "test_bounded_requests",
            "test_budget_cjk",
            "test_cli_backends",
            "test_contract",
            "test_fault_matrix",
            "test_postgres_outage",
            "test_store_postgres",
            "test_probe",
            "test_real_server",
            "test_reply_retries",
            "test_serve",
            "test_serve_roll",
            "test_serve_supervisor",
            "test_server_budget",
            "test_session_guard",
            "test_summary_retries",
            "test_storage_faults",
        ),
        "integration",
    ),
    **dict.fromkeys(
        (
            "test_browser",
            "test_browser_big_class",
            "test_browser_big_class_attacks",
            "test_browser_classroom_drill",
            "test_browser_forget",
            "test_browser_lesson",
            "test_browser_persistence",
            "test_browser_reload",
            "test_browser_safeguards",
            "test_browser_settings",
            "test_browser_sharing",
            "test_browser_zh_tw",
            "test_classroom_load",
            "test_screenshots",
        ),
        "browser",
    ),
}
TIERS = ("unit", "page", "integration", "browser")


def tier_of(item: pytest.Item) -> str:
    """The one tier of ``item``: see the module's docstring for the order of the rules."""
    marked = {mark.name for mark in item.iter_markers() if mark.name in TIERS}
    if len(marked) > 1:
        raise pytest.UsageError(f"{item.nodeid} is marked with {len(marked)} tiers ({', '.join(sorted(marked))}): keep one")
    if marked:
        return marked.pop()
    if "postgres_url" in getattr(item, "fixturenames", ()):
        return "integration"
    module = item.module.__name__.rpartition(".")[2]
    tier = MODULE_TIERS.get(module)
    if tier is None:
        raise pytest.UsageError(f"tests/{module}.py has no tier: add it to MODULE_TIERS in tests/conftest.py")
    return tier


def pytest_collection_modifyitems(config, items):
    for item in items:
        tier = tier_of(item)
        if not item.get_closest_marker(tier):
            item.add_marker(tier)
