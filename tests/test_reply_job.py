"""Replies survive reruns: the turn runs on the session's ReplyJob, and only Stop, a deletion or an import cancel it.

The memory-level tests drive ``memora.classroom.job`` directly; the page tests
drive the page through AppTest while a GatedBackend holds the reply after its
first piece, so that each click happens, for certain, in the middle of a reply.
"""

from __future__ import annotations

import threading
import time

import pytest

from memora.app.page import state as keys
from memora.classroom.job import ReplyJob, fold_ahead
from memora.classroom.limits import LimitReached, SessionLimits
from memora.classroom.transcript.format import dumps_transcript
from memora.memory import ShortTermMemory
from memora.memory.backend import BackendError
from memora.text.messages import Message
from tests.support.app import JOB_WAIT_S, drawn_words, expander, finish, new_app, running_job, send, texts
from tests.support.fakes import GatedBackend, ScriptedBackend

pytestmark = pytest.mark.usefixtures("no_secrets")


@pytest.fixture
def gated() -> GatedBackend:
    return GatedBackend()


def replying_job(memory: ShortTermMemory, backend: GatedBackend, text: str, after=None) -> ReplyJob:
    """A job started for ``text`` and held by the backend after the reply's first piece."""
    job = ReplyJob(memory, text, after=after).start()
    assert backend.streaming.wait(JOB_WAIT_S)
    return job


def folds_recorded(calls: list[int]):
    def after(memory: ShortTermMemory):
        calls.append(len(memory.history))
        return memory.prefold()

    return after


# -- the job itself --------------------------------------------------------------


def test_a_job_streams_commits_then_runs_after_under_the_same_turn(gated: GatedBackend) -> None:
    memory = ShortTermMemory(gated, max_recent_turns=1)
    gated.release()
    with memory.turn("First question.") as turn:
        turn.run()
    gated.hold()
    calls: list[int] = []
    job = replying_job(memory, gated, "Second question.", after=folds_recorded(calls))

    held = job.progress
    assert (held.phase, held.user_text, held.reply, held.base) == ("replying", "Second question.", "reply ", 2)
    assert memory.conversation.pending and calls == []
    gated.release()
    assert job.wait(JOB_WAIT_S)

    done = job.progress
    assert (done.phase, done.reply, done.error, done.after_error) == ("done", "reply 2", None, None)
    assert [v.folded for v in memory.conversation.versions] == [(0, 2)]
    assert [m.content for m in memory.history] == ["First question.", "reply 1", "Second question.", "reply 2"]
    assert calls == [4], "after ran once, on the committed history"
    assert gated.replies[-1].messages[-1] == Message("user", "Second question.")
    assert gated.summaries[0].new_messages == (Message("user", "First question."), Message("assistant", "reply 1"))
    assert gated.closed == []


def test_cancel_stops_the_stream_rolls_the_turn_back_and_skips_after(gated: GatedBackend) -> None:
    memory = ShortTermMemory(gated)
    calls: list[int] = []
    job = replying_job(memory, gated, "A long story, please.", after=folds_recorded(calls))
    job.cancel()
    gated.release()
    assert job.wait(JOB_WAIT_S)

    assert (job.progress.phase, job.progress.user_text, job.progress.reply) == ("stopped", "A long story, please.", "reply ")
    assert memory.history == [] and memory.ledger == [] and calls == []
    assert gated.closed == [0], "the model's stream was closed, not read to its end"
    assert gated.billed == []


def test_a_failed_reply_is_rolled_back_and_keeps_its_text_and_reason(gated: GatedBackend) -> None:
    memory = ShortTermMemory(gated)
    gated.fail_next("reply_midstream", lambda: BackendError("the server closed the stream"))
    gated.release()
    job = ReplyJob(memory, "Doomed question.", after=folds_recorded([])).start()
    assert job.wait(JOB_WAIT_S)

    progress = job.progress
    assert (progress.phase, progress.user_text) == ("failed", "Doomed question.")
    assert str(progress.error) == "the server closed the stream"
    assert memory.history == [] and memory.ledger == []
    assert [r.messages[-1].content for r in gated.replies] == ["Doomed question."]


def test_a_turn_refused_by_a_cap_fails_before_any_request(gated: GatedBackend) -> None:
    memory = ShortTermMemory(gated, caps=SessionLimits(max_turns=1))
    gated.release()
    with memory.turn("One.") as turn:
        turn.run()
    job = ReplyJob(memory, "Two.").start()
    assert job.wait(JOB_WAIT_S)
    assert job.progress.phase == "failed" and isinstance(job.progress.error, LimitReached)
    assert len(gated.replies) == 1 and len(memory.history) == 2


def test_a_failed_after_leaves_the_reply_committed_and_says_why(gated: GatedBackend) -> None:
    memory = ShortTermMemory(gated, max_recent_turns=1)
    gated.release()
    with memory.turn("First question.") as turn:
        turn.run()
    gated.fail_next("summary")
    job = ReplyJob(memory, "Second question.", after=ShortTermMemory.prefold).start()
    assert job.wait(JOB_WAIT_S)
    assert job.progress.phase == "done" and str(job.progress.after_error) == "scripted failure"
    assert [m.content for m in memory.history][-1] == "reply 2" and memory.conversation.versions == ()


def test_a_job_without_a_turn_only_runs_after(gated: GatedBackend) -> None:
    memory = ShortTermMemory(gated, max_recent_turns=1)
    gated.release()
    for text in ("One.", "Two."):
        with memory.turn(text) as turn:
            turn.run()
    job = ReplyJob(memory, None, after=ShortTermMemory.prefold)
    assert job.progress.phase == "summarizing"
    assert job.start().wait(JOB_WAIT_S)
    assert job.progress.phase == "done" and [v.folded for v in memory.conversation.versions] == [(0, 2)]
    assert len(gated.replies) == 2 and len(gated.summaries) == 1


def test_fold_ahead_leaves_a_fold_the_caps_refuse_to_the_next_message_and_reports_a_failed_request(gated: GatedBackend) -> None:
    memory = ShortTermMemory(gated, max_recent_turns=0, caps=SessionLimits(max_turns=1))
    gated.release()
    with memory.turn("One.") as turn:
        turn.run()
    assert memory.plan().fold == 2, "a fold is due, but the session is at its cap"
    job = ReplyJob(memory, None, after=fold_ahead).start()
    assert job.wait(JOB_WAIT_S)
    # Not a failure to show: the next message is refused, with the cap's reason, before anything is sent.
    assert job.progress.phase == "done" and job.progress.after_error is None
    assert gated.summaries == [] and memory.conversation.versions == ()

    # Without the cap, the same fold ahead is sent; its failure is the job's to report.
    memory = ShortTermMemory(gated, max_recent_turns=0)
    with memory.turn("One.") as turn:
        turn.run()
    gated.fail_next("summary")
    job = ReplyJob(memory, None, after=fold_ahead).start()
    assert job.wait(JOB_WAIT_S)
    assert str(job.progress.after_error) == "scripted failure" and memory.conversation.versions == ()
    assert len(gated.summaries) == 1


# -- the page ------------------------------------------------------------------------


def held_reply(gated: GatedBackend, text: str = "A question whose reply is slow."):
    """The page with a reply held mid-stream, after one finished turn."""
    memory = ShortTermMemory(gated)
    at = new_app(memory)
    gated.release()
    send(at, "First question.")
    gated.hold()
    at.chat_input[0].set_value(text).run()
    assert not at.exception, at.exception
    assert gated.streaming.wait(JOB_WAIT_S)
    return at, memory


def test_while_a_reply_streams_the_page_draws_it_and_the_input_waits(gated: GatedBackend) -> None:
    at, _ = held_reply(gated)
    at.run()  # the tail's next redraw, as the browser's timer causes
    assert [drawn_words(m) for m in at.chat_message] == ["First question.", "reply 1", "A question whose reply is slow.", "reply"]
    assert at.chat_input[0].proto.disabled
    assert at.button(key=keys.STOP_BUTTON).label == "Stop"
    gated.release()
    finish(at)
    assert [drawn_words(m) for m in at.chat_message][-2:] == ["A question whose reply is slow.", "reply 2"]
    assert not at.chat_input[0].proto.disabled and running_job(at) is None


def test_clicks_during_a_reply_let_it_complete_and_commit(gated: GatedBackend) -> None:
    """The red-team clicks that used to throw the reply away: the two expanders, the language, the probe's panel."""
    at, memory = held_reply(gated)
    expander(at, "Full history")  # drawn, so its toggle exists
    at.session_state[keys.HISTORY_PANEL_OPEN] = True
    at.run()
    at.session_state[keys.USAGE_PANEL_OPEN] = True
    at.run()
    at.radio(key=keys.LANG).set_value("zh-TW").run()
    assert not at.exception
    assert running_job(at) is not None and memory.conversation.pending, "the reply is still being written"

    gated.release()
    finish(at)
    assert [m.content for m in memory.history] == ["First question.", "reply 1", "A question whose reply is slow.", "reply 2"]
    assert [r.kind for r in memory.ledger] == ["reply", "reply"]
    assert gated.closed == [] and len(gated.replies) == 2
    assert drawn_words(at.chat_message[-1]) == "reply 2"
    assert at.chat_input[0].proto.value == "", "nothing was given back: nothing was lost"


def test_a_budget_change_during_a_reply_waits_for_it_and_says_so(gated: GatedBackend) -> None:
    at, memory = held_reply(gated)
    at.number_input(key=keys.BUDGET_INPUT).set_value(1500).run()
    assert memory.max_input_tokens == 1000, "the reply in flight was planned for 1,000"
    assert "this change applies as soon as it has finished" in texts(at)
    gated.release()
    finish(at)
    assert memory.max_input_tokens == 1500 and at.number_input(key=keys.BUDGET_INPUT).value == 1500
    assert memory.history[-1].content == "reply 2"
    assert "this change applies" not in texts(at)


def test_stop_during_a_reply_stops_it_and_gives_the_text_back(gated: GatedBackend) -> None:
    at, memory = held_reply(gated, "Interrupted question.")
    at.button(key=keys.STOP_BUTTON).click().run()
    gated.release()
    finish(at)
    assert [m.content for m in memory.history] == ["First question.", "reply 1"]
    assert gated.closed == [1] and [kind for kind, _ in gated.billed] == ["reply"]
    assert at.chat_input[0].proto.value == "Interrupted question."
    assert at.info[-1].value == "Stopped. The reply was not kept; your message is back in the input box."
    assert len(at.chat_message) == 2


def next_piece_once_cancelled(job: ReplyJob, gated: GatedBackend) -> None:
    """Releases the held reply once ``job`` is cancelled: its next piece arrives while a deletion or an import waits for it."""
    while not job.cancelled:
        time.sleep(0.01)
    gated.release()


def test_deleting_the_conversation_during_a_reply_cancels_it_and_nothing_is_committed(gated: GatedBackend) -> None:
    at, old = held_reply(gated)
    reset = next(b for b in at.button if b.label == "Yes, delete it")
    job = running_job(at)
    assert job is not None
    threading.Thread(target=next_piece_once_cancelled, args=(job, gated), daemon=True).start()
    reset.click().run()
    assert job.wait(JOB_WAIT_S) and job.progress.phase == "stopped"
    memory = at.session_state[keys.MEMORY]
    assert memory is not old and memory.history == [] and memory.ledger == []
    assert [m.content for m in old.history] == ["First question.", "reply 1"], "the old memory was rolled back, not committed"
    assert running_job(at) is None and not at.chat_message
    assert at.chat_input[0].proto.value == ""
    assert at.success[-1].value == "The conversation was deleted from this server. This is a new, empty one."


def test_a_message_forced_through_during_a_reply_goes_back_to_the_input(gated: GatedBackend) -> None:
    at, memory = held_reply(gated)
    at.session_state[keys.PENDING_TEXT] = "Sent too soon."
    at.run()
    assert at.warning[-1].value.startswith("A reply is still being written.")
    assert at.chat_input[0].proto.value == "Sent too soon."
    gated.release()
    finish(at)
    assert [m.content for m in memory.history][-2:] == ["A question whose reply is slow.", "reply 2"]
    assert len(gated.replies) == 2


def test_an_import_during_a_reply_cancels_it_and_continues_from_the_file(gated: GatedBackend) -> None:
    source = ShortTermMemory(ScriptedBackend())
    with source.turn("A lesson from another day.") as turn:
        turn.run()
    at, old = held_reply(gated)
    job = running_job(at)
    assert job is not None
    at.file_uploader(key=keys.IMPORT_INPUT).set_value(("lesson.json", dumps_transcript(source), "application/json")).run()
    threading.Thread(target=next_piece_once_cancelled, args=(job, gated), daemon=True).start()
    next(b for b in at.button if b.label == "Continue from this file").click().run()
    assert not at.exception

    assert job.wait(JOB_WAIT_S) and job.progress.phase == "stopped"
    imported = at.session_state[keys.MEMORY]
    assert imported.history == source.history and imported.server.backend is gated
    assert [m.content for m in old.history] == ["First question.", "reply 1"], "the old memory was rolled back, not committed"
    assert running_job(at) is None and at.chat_input[0].proto.value == ""
    assert "Stopped" not in texts(at)


def test_a_change_waiting_for_the_reply_survives_its_panel_being_closed(gated: GatedBackend) -> None:
    # The Settings panel draws its widgets only while open; the budget waiting in its input must not be dropped
    # with them when the student closes the panel before the reply ends.
    at, memory = held_reply(gated)
    at.number_input(key=keys.BUDGET_INPUT).set_value(1500).run()
    at.session_state[keys.SETTINGS_PANEL_OPEN] = False
    at.run()
    gated.release()
    finish(at)
    assert memory.max_input_tokens == 1500
