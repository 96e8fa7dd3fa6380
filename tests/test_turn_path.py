"""How far a message travels: the files of ``memora/`` between the chat input and the request it becomes.

The path is measured on the call stack. A page turn crosses one thread boundary: the script run that takes
the submitted text starts a ``ReplyJob``, and the job's thread sends the request. So the path is the stack of
the script run when it starts the job, joined with the stack of the job's thread when the backend is asked
(``inspect.stack()`` inside a recording backend). Only files under ``memora/`` count: Streamlit, the page
script and the tests are not the lesson a reader follows.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from memora.backends.base import Completion, ReplyRequest, SummaryRequest
from memora.memory import ShortTermMemory
from memora.replies.job import ReplyJob
from tests.support.app import new_app, send
from tests.support.fakes import ScriptedBackend

pytestmark = pytest.mark.usefixtures("no_secrets")

PACKAGE = Path(__file__).resolve().parents[1] / "memora"
MAX_FILES = 8
"""Issue 22's goal: the chat input to the request goes through at most 8 files of memora/."""


def memora_files() -> frozenset[str]:
    """The files of ``memora/`` on the calling thread's stack, relative to the package's parent."""
    files = (Path(frame.filename).resolve() for frame in inspect.stack(context=0))
    return frozenset(str(path.relative_to(PACKAGE.parent)) for path in files if path.is_relative_to(PACKAGE))


@dataclass
class PathRecordingBackend(ScriptedBackend):
    """A ``ScriptedBackend`` that also records, for each request, the memora/ files on the stack that sent it."""

    stacks: list[tuple[str, frozenset[str]]] = field(default_factory=list)

    def stream_reply(self, request: ReplyRequest) -> Iterator[str | Completion]:
        self.stacks.append(("reply", memora_files()))
        return super().stream_reply(request)

    def summarize(self, request: SummaryRequest) -> Completion:
        self.stacks.append(("summary", memora_files()))
        return super().summarize(request)


@pytest.fixture
def job_starts(monkeypatch) -> list[frozenset[str]]:
    """The memora/ files on the script run's stack each time it starts a reply job."""
    starts: list[frozenset[str]] = []
    start = ReplyJob.start

    def recorded(job: ReplyJob) -> ReplyJob:
        starts.append(memora_files())
        return start(job)

    monkeypatch.setattr(ReplyJob, "start", recorded)
    return starts


def paths(backend: PathRecordingBackend, job_starts: list[frozenset[str]], kind: str) -> list[frozenset[str]]:
    """Each ``kind`` request's path: the stack that sent it, joined with the stack that started the message's job."""
    assert job_starts, "no reply job was started"
    return [stack | job_starts[0] for sent, stack in backend.stacks if sent == kind]


def test_a_page_turn_reaches_the_reply_request_through_at_most_8_files_of_memora(job_starts):
    backend = PathRecordingBackend()
    at = new_app(ShortTermMemory(backend))
    job_starts.clear()  # the path starts at the chat input
    send(at, "I am practising travel English.")

    assert [r.messages[-1].content for r in backend.replies] == ["I am practising travel English."]
    [path] = paths(backend, job_starts, "reply")
    assert len(path) <= MAX_FILES, f"{len(path)} files of memora/ from the chat input to the reply request: {sorted(path)}"
    assert "memora/replies/job.py" in path, "the request is sent from the message's reply job"
    print(f"\nreply request: {len(path)} files: {sorted(path)}")


def test_a_turn_with_a_prefold_reaches_both_requests_through_at_most_8_files_of_memora(job_starts):
    backend = PathRecordingBackend()
    memory = ShortTermMemory(backend, max_recent_turns=1)
    at = new_app(memory)
    send(at, "First question.")
    job_starts.clear()
    backend.stacks.clear()
    send(at, "Second question.")

    # After the second reply the first pair left the window: the same job folded it ahead of the next turn.
    assert [kind for kind, _ in backend.stacks] == ["reply", "summary"]
    assert memory.summarized_message_count == 2 and len(job_starts) == 1
    for kind in ("reply", "summary"):
        [path] = paths(backend, job_starts, kind)
        assert len(path) <= MAX_FILES, f"{len(path)} files of memora/ from the chat input to the {kind} request: {sorted(path)}"
        print(f"\n{kind} request: {len(path)} files: {sorted(path)}")
