import json
from datetime import UTC, datetime

import pytest

from memora.backends import OfflineBackend
from memora.classroom.transcript.format import (
    MAX_TRANSCRIPT_BYTES,
    TranscriptError,
    dumps_transcript,
    export_transcript,
    parse_transcript,
    restore_memory,
)
from memora.memory import ShortTermMemory
from memora.memory.core import last_reply
from memora.teaching.story import story
from tests.support.fakes import ScriptedBackend

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)


# Per-turn stats are derived from the ledger now; files from before carry them in a list of their own.
LEGACY_TURN_STATS = {
    "assistant_index": 1,
    "turn": 1,
    "newly_summarized_count": 0,
    "context_messages": 1,
    "counted_input_tokens": 80,
    "input_tokens": 80,
    "output_tokens": 40,
    "summary_token_usage": 0,
    "session_total_tokens": 120,
    "estimated": False,
}


def test_a_legacy_file_with_turn_stats_still_restores_them_from_the_list():
    memory = chatted(OfflineBackend(), "hello")
    data = export_transcript(memory)
    data["ledger"] = [
        {k: v for k, v in r.items() if k not in ("context_messages", "newly_summarized", "summary_tokens")} for r in data["ledger"]
    ]
    data["turn_stats"] = [LEGACY_TURN_STATS | {"context_messages": 7, "newly_summarized_count": 2, "summary_token_usage": 33}]
    restored = restore_memory(parse_transcript(json.dumps(data)), OfflineBackend())
    reply = last_reply(restored)
    assert (reply.context_messages, reply.newly_summarized, reply.summary_tokens) == (7, 2, 33)


def chatted(backend, *texts, **options) -> ShortTermMemory:
    memory = ShortTermMemory(backend, max_recent_turns=1, **options)
    for text in texts:
        with memory.turn(text) as turn:
            turn.run()
    return memory


@pytest.fixture
def exported() -> dict:
    memory = chatted(ScriptedBackend(), "My name is Ana.", "I am B1.", "I like trains.", "Hello again.")
    return export_transcript(memory, now=NOW)


def rejected(data, **options) -> TranscriptError:
    raw = data if isinstance(data, (bytes, str)) else json.dumps(data)
    with pytest.raises(TranscriptError) as caught:
        parse_transcript(raw, **options)
    return caught.value


def test_round_trip_restores_the_whole_state():
    original = chatted(ScriptedBackend(), "My name is Ana.", "I am B1.", "I like trains.", "Hello again.")
    restored = restore_memory(parse_transcript(dumps_transcript(original, now=NOW)), ScriptedBackend())
    assert restored.history == original.history
    assert restored.conversation.versions == original.conversation.versions
    assert restored.summary == original.summary and restored.summarized_message_count == original.summarized_message_count > 0
    assert restored.ledger == original.ledger
    assert story(restored) == story(original)
    assert restored.last_context == original.last_context
    assert restored.get_status() == original.get_status()
    assert (restored.model, restored.max_input_tokens, restored.max_recent_turns) == ("gpt-5-mini", 1000, 1)
    assert export_transcript(restored, now=NOW) == export_transcript(original, now=NOW)


def test_imported_conversation_keeps_chatting_from_its_state():
    original = chatted(ScriptedBackend(), "My name is Ana.", "I am B1.", "I like trains.")
    backend = ScriptedBackend()
    restored = restore_memory(parse_transcript(dumps_transcript(original)), backend)
    with restored.turn("What do you remember?") as turn:
        turn.run()

    # The pair before the last left the one-turn window; it is folded onto the imported summary.
    pointer, kept = original.summarized_message_count, len(original.history) - 2
    (summary_request,) = backend.summaries
    assert summary_request.existing_summary == original.summary
    assert summary_request.new_messages == tuple(original.history[pointer:kept])
    (reply,) = backend.replies
    assert reply.messages[0].role == "developer" and restored.summary in reply.messages[0].content
    assert reply.messages[-1].content == "What do you remember?"
    assert len(restored.history) == len(original.history) + 2
    assert restored.ledger[: len(original.ledger)] == original.ledger
    assert restored.conversation.versions[-1].folded == (pointer, kept)
    assert reply.messages[1:3] == tuple(original.history[kept:])


def test_export_never_contains_the_key_or_base_url():
    import openai

    secret, base = "sk-test-SECRET-0123456789", "https://user:pa55@proxy.example/v1"
    from memora.backends.openai_responses import OpenAIResponsesBackend

    memory = ShortTermMemory(OpenAIResponsesBackend(openai.OpenAI(api_key=secret, base_url=base)))
    memory.restore(chatted(OfflineBackend(), "hello").history)
    text = dumps_transcript(memory).decode()
    assert secret not in text and "pa55" not in text and "proxy.example" not in text
    assert set(json.loads(text)["settings"]) == {
        "model",
        "max_input_tokens",
        "max_recent_turns",
        "max_summary_tokens",
        "offline",
    }


def test_pending_user_message_is_not_exported():
    memory = chatted(ScriptedBackend(), "one")
    memory.add_user_message("pending")
    data = export_transcript(memory)
    assert [m["content"] for m in data["history"]][-1] == "reply 1"
    assert restore_memory(parse_transcript(json.dumps(data)), ScriptedBackend()).conversation.pending is False


def test_offline_flag_is_exported():
    assert export_transcript(chatted(OfflineBackend(), "hi there"))["settings"]["offline"] is True


@pytest.mark.parametrize(
    "mutate, code, path",
    [
        (lambda d: d.update(version=2), "unsupported_version", "version"),
        (lambda d: d.update(format="chat-log"), "wrong_format", "format"),
        (lambda d: d.update(extra=1), "unknown_key", ""),
        (lambda d: d["settings"].update(api_key="sk-x"), "unknown_key", "settings"),
        (lambda d: d.pop("ledger"), "missing_key", ""),
        (lambda d: d["history"][0].update(role="system"), "bad_role", "history[0].role"),
        (lambda d: d["history"].__setitem__(slice(0, 2), d["history"][1::-1]), "pairs_out_of_order", "history[0].role"),
        (lambda d: d["history"].pop(), "unpaired_message", "history[6]"),
        (lambda d: d["history"][0].update(content=5), "wrong_type", "history[0].content"),
        (lambda d: d["history"][0].update(content="  "), "empty_string", "history[0].content"),
        (
            lambda d: d["summary_versions"][0].update(summarized_message_count=3),
            "odd_summary_pointer",
            "summary_versions[0].summarized_message_count",
        ),
        (
            lambda d: d["summary_versions"][-1].update(summarized_message_count=40, folded=[d["summary_versions"][-1]["folded"][0], 40]),
            "summary_beyond_history",
            "summary_versions[1].summarized_message_count",
        ),
        (lambda d: d["summary_versions"][1].update(folded=[0, 4]), "summary_chain_broken", "summary_versions[1].folded"),
        (lambda d: d["summary_versions"][0].update(folded=[0, 2, 4]), "too_many_items", "summary_versions[0].folded"),
        (lambda d: d["summary_versions"][0].update(turn=1, tokens=-1), "number_out_of_range", "summary_versions[0].tokens"),
        (
            lambda d: d["summary_versions"][1].update(turn=1) or d["summary_versions"][0].update(turn=3),
            "summary_chain_broken",
            "summary_versions[1].turn",
        ),
        (lambda d: d["ledger"][0].update(kind="bonus"), "bad_value", "ledger[0].kind"),
        (lambda d: d["ledger"][0].update(total_tokens=True), "wrong_type", "ledger[0].total_tokens"),
        (lambda d: d["ledger"][0].update(input_tokens=10**30), "number_out_of_range", "ledger[0].input_tokens"),
        (lambda d: d["ledger"][0].update(turn=99), "number_out_of_range", "ledger[0].turn"),
        (lambda d: d.update(turn_stats=[LEGACY_TURN_STATS | {"assistant_index": 2}]), "bad_value", "turn_stats[0].assistant_index"),
        (lambda d: d["last_context"][0].update(role="tool"), "bad_role", "last_context[0].role"),
        (lambda d: d["settings"].update(max_recent_turns="3"), "wrong_type", "settings.max_recent_turns"),
        (lambda d: d.update(created_at="yesterday"), "bad_value", "created_at"),
        (lambda d: d["summary_versions"][0].update(text="x" * 20_001), "string_too_long", "summary_versions[0].text"),
    ],
)
def test_malformed_transcripts_are_rejected_with_code_and_path(exported, mutate, code, path):
    mutate(exported)
    error = rejected(exported)
    assert (error.code, error.path) == (code, path), str(error)
    assert isinstance(error, ValueError)


def test_too_large_is_rejected_before_parsing():
    error = rejected(b"{" * (MAX_TRANSCRIPT_BYTES + 1))
    assert error.code == "too_large" and error.details == {"size": MAX_TRANSCRIPT_BYTES + 1, "limit": MAX_TRANSCRIPT_BYTES}
    assert rejected(b"[" * 200, max_bytes=100).code == "too_large"


@pytest.mark.parametrize(
    "raw, code",
    [
        (b"[" * 200_000 + b"]" * 200_000, "too_deep"),
        (b'{"a": NaN}', "bad_number"),
        (b'{"a": -Infinity}', "bad_number"),
        (b'{"a": 1e999}', "bad_number"),
        (b'{"a": ' + b"9" * 5000 + b"}", "bad_number"),
        (b'{"format": "memora-transcript", "format": "x"}', "duplicate_key"),
        ("{}".encode("utf-16"), "bad_encoding"),
        (b'{"format": "memora-transcript\xff"}', "bad_encoding"),
        (b"{'format': 1}", "not_json"),
        (b"", "not_json"),
        (b"[]", "wrong_type"),
        (b'"memora-transcript"', "wrong_type"),
    ],
)
def test_hostile_files_are_rejected(raw, code):
    assert rejected(raw).code == code


def test_lone_surrogates_and_bom(exported):
    exported["history"][0]["content"] = "\ud800"
    text = json.dumps(exported)  # json escapes it as \ud800, which Python would parse back
    error = rejected(text)
    assert (error.code, error.path) == ("bad_encoding", "history[0].content")
    del exported["history"][0]["content"]
    exported["history"][0]["content"] = "My name is Ana."
    assert parse_transcript(b"\xef\xbb\xbf" + json.dumps(exported).encode()).history[0].content == "My name is Ana."


def test_settings_that_do_not_fit_this_installation(exported):
    exported["settings"]["max_input_tokens"] = 50
    with pytest.raises(TranscriptError) as caught:
        restore_memory(parse_transcript(json.dumps(exported)), ScriptedBackend())
    assert caught.value.code == "bad_settings" and "max_input_tokens" in str(caught.value)


def test_rewrite_versions_chain_without_moving_the_pointer():
    memory = chatted(ScriptedBackend(), "one", "two", "three")
    memory.update_summary([])
    data = export_transcript(memory)
    assert data["summary_versions"][-1]["folded"][0] == data["summary_versions"][-1]["folded"][1]
    assert parse_transcript(json.dumps(data)).summary_versions == tuple(memory.conversation.versions)
