"""Each test's tier comes from what it uses, never from its name (tests/conftest.py).

The tiers are read back from one real collection, in a subprocess, of this module and two that use PostgreSQL:
every test outside the integration tier.
"""

from __future__ import annotations

import subprocess
import sys
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODULES = ("tests/test_tiers.py", "tests/test_store.py", "tests/test_hostile_urls.py")


@cache
def outside_integration() -> frozenset[str]:
    command = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "-m", "not integration", *MODULES]
    out = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300, check=True).stdout
    return frozenset(line.strip() for line in out.splitlines() if "::" in line)


def test_a_test_whose_name_says_postgres_but_uses_no_database_stays_in_its_modules_tier():
    assert "tests/test_tiers.py::test_a_test_whose_name_says_postgres_but_uses_no_database_stays_in_its_modules_tier" in (
        outside_integration()
    )


def test_the_postgresql_store_kind_and_the_postgres_url_fixture_put_a_test_in_the_integration_tier():
    outside = outside_integration()
    saved = "tests/test_store.py::test_a_save_is_loaded_back_whole_and_each_save_bumps_the_version"
    assert f"{saved}[sqlite]" in outside and f"{saved}[postgresql]" not in outside
    assert not {test for test in outside if "[postgresql" in test}
    # From a page-tier module: it asks for the database by the fixture, and nothing in its name says so.
    assert "tests/test_hostile_urls.py::test_the_store_and_the_ledger_never_name_the_password_in_their_errors" not in outside
    assert "tests/test_hostile_urls.py::test_redact_removes_a_url_password_in_every_form_and_any_scheme" in outside
    # Marked on the test: a real socket, to a port where no database answers.
    assert "tests/test_store.py::test_a_postgres_store_that_cannot_be_reached_fails_with_store_error" not in outside
