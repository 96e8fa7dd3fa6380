"""The fault matrix's vocabulary: the steps of a turn, the kinds of fault, and how each is armed.

Used by the memory half of the matrix (tests/test_fault_matrix.py) and the page half
(tests/test_reliability_page.py); docs/fault-matrix.md describes both.
"""

from __future__ import annotations

from collections.abc import Callable

import openai
from streamlit.runtime.scriptrunner_utils.exceptions import RerunException, StopException
from streamlit.runtime.scriptrunner_utils.script_requests import RerunData

from benchmarks.harness.servers import closed_port, cut_after, error_after, stall, stall_after, status
from memora.backends.openai_errors import ModelServerError

STEPS = ("count", "fold", "prefold", "reply", "midstream")
SCRIPTED_KINDS = ("exception", "stop", "rerun")
HTTP_KINDS = ("timeout", "http429", "http500", "refused")
CLIENT_TIMEOUT_S = 0.3
"""Only the faulted request gets it; every other request may take 10 s, so a loaded machine is no fault."""

# Where each step's fault is injected: ScriptedBackend's step names, and the server's request kinds.
SCRIPTED_STEP = {"count": "count", "fold": "summary", "prefold": "summary", "reply": "reply", "midstream": "reply_midstream"}
REQUEST_KIND = {"count": "count", "fold": "summary", "prefold": "summary", "reply": "reply", "midstream": "reply"}
FAULTS: dict[str, Callable[[], BaseException]] = {
    "exception": lambda: RuntimeError("an unexpected bug"),
    "stop": StopException,
    "rerun": lambda: RerunException(RerunData()),
}
RAISED: dict[str, type[BaseException]] = {
    "exception": RuntimeError,
    "stop": StopException,
    "rerun": RerunException,
    **{kind: ModelServerError for kind in HTTP_KINDS},
}


def http_behaviour(kind: str, step: str):
    """What the server does for ``kind`` at ``step``; None for a refused connection (no server answers)."""
    if step == "midstream":
        return {
            "timeout": stall_after(1, 5.0),
            "http429": error_after(1, "rate_limit_exceeded", "Rate limit reached for requests."),
            "http500": error_after(1, "server_error", "The server had an error."),
            "refused": cut_after(1),  # mid-stream, a refused connection can only be a dropped one
        }[kind]
    return {
        "timeout": stall(5.0),
        "http429": status(429, "Rate limit reached for requests."),
        "http500": status(500, "The server had an error."),
        "refused": None,
    }[kind]


def client_from_step(step: str, backend, faulty: openai.OpenAI) -> None:
    """Gives the backend the ``faulty`` client from ``step``'s request on, and not before it."""
    if step in ("fold", "prefold"):
        backend.client = faulty  # the summary is the first request
        return
    # The turn's fold must complete as usual; the requests after it use the faulty client.
    summarize = backend.summarize

    def summarize_then_switch(request):
        try:
            return summarize(request)
        finally:
            backend.client = faulty

    backend.summarize = summarize_then_switch


def arm_http(step: str, kind: str, server, backend, client: openai.OpenAI) -> None:
    """Arms an HTTP fault for ``step``: a refused address, or the server's misbehaviour,
    with a short timeout on that request for the timeout kind (a stalled server waits 5 s)."""
    if kind == "refused" and step != "midstream":
        client_from_step(step, backend, client.with_options(base_url=f"http://127.0.0.1:{closed_port()}/v1"))
        return
    server.queue_for(REQUEST_KIND[step], http_behaviour(kind, step))
    if kind == "timeout":
        client_from_step(step, backend, client.with_options(timeout=CLIENT_TIMEOUT_S))


def heal_http(backend, client: openai.OpenAI) -> None:
    backend.client = client
    backend.__dict__.pop("summarize", None)
