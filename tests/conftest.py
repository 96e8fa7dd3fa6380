import pytest

from tests.fakes import ScriptedBackend


@pytest.fixture
def backend() -> ScriptedBackend:
    return ScriptedBackend()
