import pytest

from tests.fakes import ScriptedBackend
from tests.helpers.app import ENV_NAMES


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
    # The page tests fold by the article's window; the watermark default is tested in test_fold_policy.py.
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
