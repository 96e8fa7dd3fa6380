"""Contract tests: the exact requests our backends send, through the real openai SDK,
validated by a Stoplight Prism mock of OpenAI's official OpenAPI spec.

The spec is pinned at ``../shared/openai-openapi/openapi.json`` relative to the repo root
(see its README). Prism is installed into the project by ``npm ci`` (package.json pins it)
and started once per session. Prism answers 422 when a body breaks the spec, and 200 with
the spec's static example otherwise; it cannot stream, so for streamed requests the tests
check that the body was accepted, and the streaming itself is tested in test_backends_http.py.

Without node or Prism these tests are skipped, except under CI (env ``CI`` set), where
that is a failure.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import openai
import pytest

from benchmarks.harness.processes import free_port, stop
from memora.backends.chat_completions import ChatCompletionsBackend
from memora.backends.openai_responses import OpenAIResponsesBackend
from memora.memory.backend import ReplyRequest
from memora.memory.server import summary_request
from memora.text.messages import Message
from memora.text.prompts import SUMMARY_INSTRUCTIONS, SUMMARY_PREAMBLE, SYSTEM_PROMPT

ROOT = Path(__file__).resolve().parent.parent
SPEC_CANDIDATES = (ROOT.parent / "shared" / "openai-openapi" / "openapi.json", ROOT / "shared" / "openai-openapi" / "openapi.json")
PRISM = ROOT / "node_modules" / ".bin" / "prism"
START_TIMEOUT_S = 90.0

CONTEXT = (
    Message("developer", SUMMARY_PREAMBLE + "- The user is Ana, level B1, learning English for work."),
    Message("user", "Is 'I has a cat' right?"),
    Message("assistant", "Not quite: say 'I have a cat'."),
    Message("user", "Thanks! And 'she have'?"),
)
SUMMARY = summary_request(
    "gpt-5-mini",
    SUMMARY_INSTRUCTIONS,
    "- The user is Ana.",
    (Message("user", "My level is B1."), Message("assistant", "Great, B1 it is.")),
    200,
)


def _unavailable(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (CI is set, so the contract tests must run)")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def prism_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Starts Prism once for the session on a free port; yields its URL (no /v1, as the spec's paths have none)."""
    spec = next((path for path in SPEC_CANDIDATES if path.is_file()), None)
    if spec is None:
        _unavailable(f"OpenAI's spec is not at {SPEC_CANDIDATES[0]}")
    if shutil.which("node") is None:
        _unavailable("node is not installed, so Prism cannot run")
    if not PRISM.exists():
        _unavailable("Prism is not installed: run `npm ci --no-audit --no-fund` in the repo root")
    port = free_port()
    log_path = tmp_path_factory.mktemp("prism") / "prism.log"
    with log_path.open("w") as log:
        process = subprocess.Popen(
            [str(PRISM), "mock", str(spec), "-h", "127.0.0.1", "-p", str(port), "-v", "warn"],
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
        )
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if process.poll() is not None:
                pytest.fail(f"Prism exited with {process.returncode}:\n{log_path.read_text()[-2000:]}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail(f"Prism did not start in {START_TIMEOUT_S:.0f} s:\n{log_path.read_text()[-2000:]}")
                time.sleep(0.2)
        yield f"http://127.0.0.1:{port}"
    finally:
        stop(process)


@pytest.fixture
def client(prism_url: str) -> openai.OpenAI:
    return openai.OpenAI(api_key="sk-contract-test", base_url=prism_url, max_retries=0, timeout=30)


def _reply(model: str) -> ReplyRequest:
    return ReplyRequest(model=model, instructions=SYSTEM_PROMPT, messages=CONTEXT)


# -- Responses API ---------------------------------------------------------------------


def test_streamed_reply_request_matches_the_spec(client: openai.OpenAI) -> None:
    raw = client.responses.with_raw_response.create(**OpenAIResponsesBackend.reply_params(_reply("gpt-5-mini")))
    assert raw.http_request.url.path == "/responses"
    assert raw.status_code == 200


@pytest.mark.parametrize("model", ["gpt-5-mini", "gpt-4.1-mini"], ids=["reasoning", "non-reasoning"])
def test_summary_request_matches_the_spec(client: openai.OpenAI, model: str) -> None:
    request = replace(SUMMARY, model=model)
    completion = OpenAIResponsesBackend(client).summarize(request)
    assert isinstance(completion.text, str)
    assert completion.usage.input_tokens >= 0 and not completion.usage.estimated


def test_input_token_count_request_matches_the_spec(client: openai.OpenAI) -> None:
    counted = OpenAIResponsesBackend(client, count_remotely=True).count_request("gpt-5-mini", SYSTEM_PROMPT, CONTEXT)
    assert isinstance(counted, int) and counted >= 0


# -- Chat Completions ------------------------------------------------------------------


def test_streamed_chat_request_matches_the_spec(client: openai.OpenAI) -> None:
    raw = client.chat.completions.with_raw_response.create(**ChatCompletionsBackend.reply_params(_reply("gpt-4.1-mini")))
    assert raw.http_request.url.path == "/chat/completions"
    assert raw.status_code == 200


def test_chat_summary_request_matches_the_spec(client: openai.OpenAI) -> None:
    completion = ChatCompletionsBackend(client).summarize(SUMMARY)
    assert isinstance(completion.text, str)
    assert completion.usage.input_tokens >= 0


# -- canaries: a spec that stops validating must be noticed ------------------------------------


def test_canary_an_invalid_responses_body_is_rejected_with_422(client: openai.OpenAI) -> None:
    params = {**OpenAIResponsesBackend.summary_params(SUMMARY), "max_output_tokens": "lots"}
    with pytest.raises(openai.UnprocessableEntityError) as caught:
        client.responses.create(**params)
    locations = [tuple(v["location"]) for v in caught.value.response.json()["validation"]]
    assert ("body", "max_output_tokens") in locations


def test_canary_an_invalid_chat_body_is_rejected_with_422(client: openai.OpenAI) -> None:
    params = ChatCompletionsBackend.reply_params(_reply("gpt-4.1-mini"))
    params["messages"] = [*params["messages"], {"role": "narrator", "content": "not a role"}]
    with pytest.raises(openai.UnprocessableEntityError) as caught:
        client.chat.completions.create(**params)
    assert any(v["location"][:2] == ["body", "messages"] for v in caught.value.response.json()["validation"])


def test_canary_an_invalid_count_body_is_rejected_with_422(client: openai.OpenAI) -> None:
    with pytest.raises(openai.UnprocessableEntityError):
        client.responses.input_tokens.count(model="gpt-5-mini", input=[{"role": "user", "content": 42}])
