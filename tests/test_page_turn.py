"""The page's turn (``memora.app.page.turn``): the one verdict on a submitted text, and how far a message travels.

A submitted text is read once into a ``Submission``: its command, or None for a message, and the verdict
of the checks. The tests below it measure the path: the files of ``memora/`` between the chat input and
the request the message becomes.

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

from memora.app.page.turn import Submission, read
from memora.classroom.job import ReplyJob
from memora.classroom.limits import LimitReached, SessionLimits
from memora.memory import ContextBudgetError, ShortTermMemory
from memora.memory.backend import Completion, ReplyRequest, SummaryRequest
from memora.memory.core import last_reply
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


def test_a_submission_is_read_once_into_its_command_or_message_and_the_checks_verdict(backend):
    memory = ShortTermMemory(backend, caps=SessionLimits(max_message_chars=40))

    assert read("  /Status  now ", memory, None, busy=False) == Submission("  /Status  now ", ("status", "now"))
    assert read("What does /history do?", memory, None, busy=False) == Submission("What does /history do?", None)
    blank = read("   ", memory, None, busy=False)
    assert blank.refusal is not None and blank.refusal.key == "notice.empty" and not blank.keeps_text
    busy = read("Next question.", memory, None, busy=True)
    assert busy.refusal is not None and busy.refusal.key == "notice.busy" and busy.keeps_text
    # The character cap refuses a command-shaped paste too, before it is parsed into anything drawn.
    paste = read("/" + "x" * 100, memory, None, busy=False)
    assert paste.command == ("x" * 100, "") and paste.keeps_text
    assert paste.refusal is not None and isinstance(paste.refusal.error, LimitReached) and paste.refusal.error.code == "message_too_long"
    assert backend.replies == [] and backend.summaries == [] and memory.history == []


def test_a_message_over_the_budget_alone_is_refused_by_the_memorys_own_check_and_its_text_kept(backend):
    memory = ShortTermMemory(backend, max_input_tokens=1000)
    submission = read("word " * 2000, memory, None, busy=False)
    assert submission.keeps_text and submission.refusal is not None
    assert submission.refusal.key == "notice.restored" and isinstance(submission.refusal.error, ContextBudgetError)
    assert "max_input_tokens is 1000" in str(submission.refusal.error)
    assert backend.replies == [] and memory.history == []


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
    assert "memora/classroom/job.py" in path, "the request is sent from the message's reply job"
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


def test_a_turn_that_folds_in_its_own_prepare_reaches_the_summary_request_through_at_most_8_files(job_starts):
    backend = PathRecordingBackend()
    memory = ShortTermMemory(backend, max_recent_turns=1)
    at = new_app(memory)
    send(at, "First question.")
    backend.fail_next("summary")  # the fold ahead after the second reply fails: the third turn folds itself
    send(at, "Second question.")
    assert memory.summarized_message_count == 0
    job_starts.clear()
    backend.stacks.clear()
    send(at, "Third question.")

    assert [kind for kind, _ in backend.stacks][:2] == ["summary", "reply"], "the turn's prepare folded, then sent"
    assert last_reply(memory).newly_summarized == 2
    [summary, *_] = paths(backend, job_starts, "summary")
    assert "memora/memory/core.py" in summary, "the summary request was sent from inside the turn (core.Turn)"
    assert len(summary) <= MAX_FILES, f"{len(summary)} files of memora/ from the chat input to the summary request: {sorted(summary)}"
    print(f"\nsummary request inside the turn: {len(summary)} files: {sorted(summary)}")
