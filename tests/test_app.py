"""The page, driven through Streamlit's AppTest: chat, panels, settings, commands, failures.

Every test runs from an empty temporary directory with no OPENAI_API_KEY, so
there is no secrets file and the page opens in offline mode unless a test
injects a backend or ``at.secrets``.
"""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from memora.app.page import state as keys
from memora.memory import ShortTermMemory
from memora.memory.backend import BackendError
from memora.memory.core import full_history_tokens
from memora.teaching.story import story
from tests.support.app import (
    APP,
    assert_alternating,
    expander,
    ledger_cards,
    new_app,
    number_line,
    open_panels,
    open_turn_boxes,
    send,
    status_figures,
    texts,
    words,
)

B1 = "My English level is B1 and I want to practise travel English."
FILLER = ["How do I ask for directions?", "What should I say at a hotel?", "How do I order food?", "How do I buy a train ticket?"]

pytestmark = pytest.mark.usefixtures("no_secrets")


def test_a_key_in_the_environment_selects_openai_without_showing_it(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env-secret-456")
    at = new_app()
    assert not at.exception
    assert not at.session_state[keys.MEMORY].server.backend.offline
    assert at.session_state[keys.KEY_SOURCE] == "env"
    assert "configured through the environment" in texts(at)
    assert "sk-env-secret-456" not in texts(at)


def test_offline_mode_with_no_secrets_file_opens_and_says_so():
    at = new_app()
    assert not at.exception
    memory = at.session_state[keys.MEMORY]
    assert memory.server.backend.offline
    banner = at.info[0].value
    assert "Offline mode" in banner and "not a language model" in banner and "OPENAI_API_KEY" in banner
    assert at.session_state[keys.KEY_SOURCE] is None
    key_field = [w for w in at.text_input if w.key == keys.API_KEY_INPUT]
    assert key_field and key_field[0].proto.type == key_field[0].proto.PASSWORD


def test_acceptance_b1_fact_survives_folding_and_reaches_the_practice_plan_request():
    at = new_app()
    send(at, B1)
    for text in FILLER:
        send(at, text)
    memory: ShortTermMemory = at.session_state[keys.MEMORY]
    assert memory.summarized_message_count >= 2, "the B1 turn should have left the 3-turn window"
    assert "B1" in memory.summary and "travel English" in memory.summary

    send(at, "Can you make me a practice plan?")
    prepared = memory.last_prepared
    assert prepared.sources[0] == "summary" and "B1" in prepared.context_messages[0].content
    assert prepared.sources[-1] == "current" and set(prepared.sources[1:-1]) == {"window"}
    assert len(prepared.context_messages) < len(memory.history)
    # The offline reply reports the summary it would have sent, so the fact is on the page.
    assert "B1" in at.chat_message[-1].markdown[0].value

    at.session_state[keys.SUMMARY_PANEL_OPEN] = True  # drawn only while open
    at.run()
    panel = expander(at, "Conversation summary")
    assert any("B1" in m.value for m in panel.markdown)
    at.session_state[keys.CONTEXT_PANEL_OPEN] = True
    at.run()
    context = expander(at, "Last request context")
    cards = [c.value.split(" · ") for c in context.caption if c.value.endswith(" tokens")]
    named = ("summary", "recent window", "current message")
    sources = [next(label for label in labels if label in named) for labels in cards]
    assert sources == ["summary"] + ["recent window"] * (len(sources) - 2) + ["current message"]
    # The message cards carry the chat's numbers, from the request's record: the window, then the current message.
    parts = memory.last_prepared.parts
    assert [labels[0] for labels in cards[1:]] == [f"#{number}" for number in parts.numbers]
    # Each card shows the start of its message, and the whole of it one click away.
    assert "B1" in context.text[1].value and context.text[1].value == memory.last_prepared.context_messages[0].content

    metrics = status_figures(at)
    assert metrics["History messages"] == str(len(memory.history)) == "12"
    assert int(metrics["Last context messages"]) == len(prepared.context_messages) <= 2 * memory.max_recent_turns + 2
    assert metrics["Summary available"] == "Yes"


def test_history_grows_while_context_stays_bounded():
    at = new_app()
    history_sizes, context_sizes = [], []
    for text in [B1, *FILLER, *FILLER]:
        send(at, text)
        metrics = {label: int(value.replace(",", "")) for label, value in status_figures(at).items() if label != "Summary available"}
        history_sizes.append(metrics["History messages"])
        context_sizes.append(metrics["Last context messages"])
    assert history_sizes == list(range(2, 2 * len(history_sizes) + 1, 2))
    memory = at.session_state[keys.MEMORY]
    assert max(context_sizes) <= 2 * memory.max_recent_turns + 2
    assert memory.last_prepared.input_tokens <= memory.max_input_tokens
    assert memory.last_prepared.input_tokens < full_history_tokens(memory)


def test_folded_messages_are_marked_and_each_reply_has_its_stats():
    at = new_app()
    for text in [B1, *FILLER]:
        send(at, text)
    memory = at.session_state[keys.MEMORY]
    messages = at.chat_message
    assert len(messages) == len(memory.history)
    folded = [m for m in messages if "Folded into the summary" in number_line(m)]
    assert len(folded) == memory.summarized_message_count
    assert words(messages[0]) == B1

    open_turn_boxes(at, 5)  # a box draws its figures only when opened
    stats = expander(at, "Turn 5: tokens and context")
    table = stats.markdown[0].value
    turn_5 = story(memory).turn(5)
    assert f"| Counted input tokens (local, before sending) | {turn_5.record.counted_input_tokens:,} |" in table
    # The page folded the first pair right after turn 4's reply (prefold): that fold served turn 5, and its box says so,
    # though turn 5's own request folded nothing.
    assert turn_5.record.newly_summarized == 0 and memory.conversation.versions[0].turn == 4
    assert "| Messages newly summarized | 2 |" in table
    assert "summary v1, after reply 4, for turn 5" in table
    assert table.endswith(":gray[:small[Offline engine: every figure is a local o200k_base count, no model was billed.]]")


def test_panels_show_summary_versions_context_budget_history_and_ledger():
    at = new_app()
    for text in [B1, *FILLER, "Thanks, one more question about taxis."]:
        send(at, text)
    memory: ShortTermMemory = at.session_state[keys.MEMORY]
    # One pair folded after each reply from turn 4 on, ahead of the turn that needs it (prefold).
    assert len(memory.conversation.versions) == 3

    at.session_state[keys.SUMMARY_PANEL_OPEN] = True  # drawn only while open
    at.run()
    summary = expander(at, "Conversation summary")
    labels = [c.value for c in summary.caption if c.value.startswith("Version")]
    assert labels[0].startswith("Version 3, after reply 6, for turn 7: folded messages 5–6 (2 messages)")
    assert labels[2].startswith("Version 1, after reply 4, for turn 5: folded messages 1–2 (2 messages)")

    # The context is drawn only once its expander is open.
    assert not [c for c in expander(at, "Last request context").caption if c.value.endswith(" tokens")]
    at.session_state[keys.CONTEXT_PANEL_OPEN] = True
    at.run()
    context = expander(at, "Last request context")
    cards = [c.value for c in context.caption if c.value.endswith(" tokens")]
    assert len(cards) == len(memory.last_prepared.context_messages)
    assert cards[0].startswith("developer · summary · ")
    # Messages 5-6 were sent in turn 6 and folded after its reply, for turn 7: their cards say both.
    folded_since = "sent in turn 6; folded into the summary for turn 7"
    assert cards[1] == f"#5 · user · recent window · {folded_since} · {memory.conversation.counts[4]} tokens"
    assert cards[-1].startswith("#11 · user · current message · ")
    assert [int(card.rsplit(" · ", 1)[1].split()[0]) for card in cards] == list(memory.last_prepared.message_tokens)
    # The picture at the top of the sidebar says the same request in words, part by part, against the budget.
    prepared = memory.last_prepared
    sent = next(m.value for m in at.sidebar.markdown if "Last request: :gray[instructions " in m.value)
    assert f"{prepared.input_tokens:,} of {memory.max_input_tokens:,} used" in sent
    summary_tokens = prepared.message_tokens[0]
    assert f" · :orange[summary {summary_tokens:,}] · " in sent, "each part in its bar's colour: the caption is the legend"

    # The full history is drawn only once its expander is open.
    assert not expander(at, "Full history").get("popover")
    assert not expander(at, "Token usage").get("vega_lite_chart")
    at.session_state[keys.HISTORY_PANEL_OPEN] = True
    at.session_state[keys.USAGE_PANEL_OPEN] = True
    at.run()
    history = expander(at, "Full history")
    cards = [c.value.split(" · ") for c in history.caption if c.value[0].isdigit()]
    marks = ["summarized"] * 4 + ["sent last time, summarized since"] * 2 + ["in window"] * 4 + ["current", "in window"]
    assert [card[2] for card in cards] == marks
    assert history.text[1].value == B1, "the first card's whole message, one click away"

    usage = expander(at, "Token usage")
    ledger = ledger_cards(usage)
    assert len(ledger) == len(memory.ledger) == 6 + 3
    assert sorted({card["Kind"] for card in ledger}) == ["reply", "summary"]
    full = [int(card["Full history"].replace(",", "")) for card in ledger if card["Full history"] != "–"]
    assert full == [r.full_history_tokens for r in memory.ledger if r.kind == "reply"]
    # A summary request's card carries its fold's one label, as the chat tells it.
    heads = [c.value for c in usage.caption if c.value[0].isdigit()]
    assert any(" · summary v1, after reply 4, for turn 5 · " in head for head in heads)
    assert usage.get("vega_lite_chart"), "the usage chart is drawn"
    assert usage.get("download_button")


def test_settings_apply_live_and_nonsense_is_refused_with_the_reason():
    at = new_app()
    memory: ShortTermMemory = at.session_state[keys.MEMORY]
    budget = next(w for w in at.number_input if w.key == keys.BUDGET_INPUT)
    budget.set_value(1500).run()
    assert memory.max_input_tokens == 1500
    window = next(w for w in at.number_input if w.key == keys.WINDOW_INPUT)
    window.set_value(1).run()
    assert memory.max_recent_turns == 1

    for nonsense in (0, -1):
        next(w for w in at.number_input if w.key == keys.BUDGET_INPUT).set_value(nonsense).run()
        assert memory.max_input_tokens == 1500
        assert "Refused: max_input_tokens must be at least" in at.error[0].value
        assert next(w for w in at.number_input if w.key == keys.BUDGET_INPUT).value == 1500
    next(w for w in at.number_input if w.key == keys.WINDOW_INPUT).set_value(-1).run()
    assert memory.max_recent_turns == 1
    assert "max_recent_turns must be 0 or more" in at.error[0].value

    # The new window applies from the next turn: the third turn sends the first pair only as the summary.
    for text in (B1, "Second question.", "Third question."):
        send(at, text)
    assert memory.last_prepared.sources == ("summary", "window", "window", "current")
    assert memory.conversation.versions[0].folded == (0, 2)
    assert memory.summarized_message_count == 4, "and the second pair was folded after the third reply"


def test_switching_to_openai_without_a_key_is_refused_and_stays_offline():
    at = new_app()
    at.selectbox(key=keys.BACKEND_INPUT).select("openai").run()
    memory = at.session_state[keys.MEMORY]
    assert memory.server.backend.offline
    assert at.selectbox(key=keys.BACKEND_INPUT).value == "offline"
    assert "Could not switch to OpenAI Responses API" in at.error[0].value
    assert "OPENAI_API_KEY" in at.error[0].value


def test_a_key_in_secrets_selects_openai_and_never_reaches_the_page():
    at = open_panels(AppTest.from_file(APP, default_timeout=30))
    at.secrets["OPENAI_API_KEY"] = "sk-test-secret-value-123"
    at.run()
    assert not at.exception
    memory = at.session_state[keys.MEMORY]
    assert not memory.server.backend.offline
    assert at.session_state[keys.KEY_SOURCE] == "secrets"
    assert not at.info, "no offline banner with a key"
    assert "configured through Streamlit secrets" in texts(at)
    assert not [w for w in at.text_input if w.key == keys.API_KEY_INPUT]
    assert "sk-test-secret-value-123" not in texts(at)
    assert all("sk-test" not in str(w.value) for w in at.text_input)


def test_commands_call_no_model_and_odd_arguments_get_a_clear_message(backend):
    memory = ShortTermMemory(backend, max_recent_turns=1)
    at = new_app(memory)
    for text in [B1, "Second question.", "Third question."]:
        send(at, text)
    sent = (len(backend.replies), len(backend.summaries))
    history = list(memory.history)

    send(at, "/history")
    assert at.code[0].value.splitlines()[0] == f"  1 [summarized] user: {B1}"
    send(at, "/context")
    assert at.code[0].value.splitlines()[0].startswith("developer: Summary of the earlier conversation") or at.code[0].value.startswith(
        "developer:"
    )
    send(at, "/summary")
    assert at.code[0].value == memory.summary
    send(at, "/status")
    assert at.code[0].value.splitlines() == [
        "History messages: 6",
        f"Summarized messages: {memory.summarized_message_count}",
        f"Last context messages: {len(memory.last_context)}",
        "Summary available: Yes",
        f"Session total tokens: {memory.session_total_tokens}",
    ]
    assert "nothing was sent to the model" in at.main.caption[-1].value

    send(at, "/status foo")
    assert at.warning[0].value == "The command /status takes no arguments (got: foo)."
    send(at, "/unknown")
    assert at.warning[0].value.startswith("Unknown command /unknown.")
    assert (len(backend.replies), len(backend.summaries)) == sent
    assert memory.history == history


def test_empty_message_gets_a_clear_message_and_sends_nothing(backend):
    memory = ShortTermMemory(backend)
    at = new_app(memory)
    send(at, "   \n ")
    assert at.warning[0].value == "The message is empty. Write something first."
    assert memory.history == [] and backend.replies == []


def test_failed_reply_is_rolled_back_and_its_text_goes_back_into_the_input(backend):
    memory = ShortTermMemory(backend)
    at = new_app(memory)
    send(at, "First question.")
    backend.fail_next("reply_midstream", lambda: BackendError("the server closed the stream"))
    send(at, "Second question, which fails.")

    assert_alternating(memory)
    assert [m.content for m in memory.history] == ["First question.", "reply 1"]
    assert [r.messages[-1].content for r in backend.replies] == ["First question.", "Second question, which fails."]
    assert [r.kind for r in memory.ledger] == ["reply"]
    chat_input = at.chat_input[0]
    assert chat_input.proto.set_value and chat_input.proto.value == "Second question, which fails."
    assert at.error[0].value == (
        "Your message got no reply: The model request failed: the server closed the stream Its text is back in the input box."
    )
    assert len(at.chat_message) == 2

    send(at, "Second question, which fails.")
    assert [m.content for m in memory.history][-2:] == ["Second question, which fails.", "reply 3"]
    assert not at.error


def test_a_message_over_the_budget_fails_before_any_request(backend):
    memory = ShortTermMemory(backend)
    at = new_app(memory)
    long_text = "travel " * 1500
    send(at, long_text)
    assert memory.history == [] and backend.replies == [] and backend.summaries == []
    assert "input tokens with the instructions and summary, but the budget (max_input_tokens) is 1000" in at.error[0].value
    assert at.chat_input[0].proto.value == long_text


def test_user_markdown_and_html_render_safely():
    at = new_app()
    send(at, "**bold** <script>alert(1)</script> <b>x</b>")
    assert words(at.chat_message[0]) == "**bold** <script>alert(1)</script> <b>x</b>"
    assert all(not m.proto.allow_html for m in at.markdown)


def test_deleting_the_conversation_empties_the_page_and_keeps_the_settings():
    at = new_app()
    next(w for w in at.number_input if w.key == keys.BUDGET_INPUT).set_value(1200).run()
    send(at, B1)
    next(b for b in at.button if b.label == "Yes, delete it").click().run()
    memory = at.session_state[keys.MEMORY]
    assert memory.history == [] and memory.ledger == [] and memory.summary == ""
    assert memory.max_input_tokens == 1200 and memory.server.backend.offline
    assert at.success[-1].value == "The conversation was deleted from this server. This is a new, empty one."
    assert not at.chat_message


def test_language_switch_translates_the_page():
    at = new_app()
    send(at, B1)
    at.radio(key=keys.LANG).set_value("zh-TW").run()
    assert not at.exception
    assert at.title[0].value == "Memora：聊天機器人的短期記憶"
    labels = {e.label for e in at.expander}
    assert {"狀態", "對話摘要", "上一次請求的上下文", "完整對話紀錄", "Token 用量", "設定", "第 1 輪：Token 與上下文"} <= labels
    assert set(status_figures(at)) == {"對話紀錄訊息數", "已摘要訊息數", "上次上下文訊息數", "是否有摘要", "本次對話累計 Token"}
    assert at.chat_input[0].placeholder.startswith("用英文輸入")
    assert "離線模式" in at.info[0].value
    send(at, "/status foo")
    assert at.warning[0].value == "指令 /status 不接受參數（收到：foo）。"
    # The offline engine answers in the page's language from the next reply; the first stays as it was written.
    send(at, "I want to practise travel English.")
    replies = [m for m in at.session_state[keys.MEMORY].history if m.role == "assistant"]
    assert replies[0].content.startswith("**Offline mode") and replies[1].content.startswith("**離線模式，不是語言模型。**")
    send(at, "/context")
    assert "使用者: I want to practise travel English." in at.code[0].value and "**" not in at.code[0].value


def test_failed_summary_keeps_the_old_summary_and_restores_the_text(backend):
    memory = ShortTermMemory(backend, max_recent_turns=1)
    at = new_app(memory)
    send(at, B1)
    # The fold after the second reply fails, and so does the third turn's own try at it.
    backend.fail_next("summary")
    backend.fail_next("summary")
    send(at, "Second question.")
    send(at, "Third question, whose fold fails.")
    assert_alternating(memory)
    assert len(memory.history) == 4 and memory.summary == "" and memory.summarized_message_count == 0
    assert [r.kind for r in memory.ledger] == ["reply", "reply"]
    assert at.chat_input[0].proto.value == "Third question, whose fold fails."
    assert "scripted failure" in at.error[0].value

    send(at, "Third question, whose fold fails.")
    first = memory.conversation.versions[0]
    assert first.folded == (0, 2) and first.turn == 3 and "B1" in first.text
    assert backend.summaries[2].new_messages[0].content == B1


def test_summary_panel_draws_only_the_latest_versions_of_a_long_conversation(backend):
    memory = ShortTermMemory(backend, max_recent_turns=1)
    for number in range(1, 11):
        with memory.turn(f"Question {number}.") as turn:
            turn.run()
    assert len(memory.conversation.versions) == 8
    at = new_app(memory)
    # Opening the page folds the pair the next turn needs (prefold): a ninth version.
    assert len(memory.conversation.versions) == 9
    at.session_state[keys.SUMMARY_PANEL_OPEN] = True  # drawn only while open
    at.run()
    panel = expander(at, "Conversation summary")
    captions = [c.value for c in panel.caption]
    labels = [c for c in captions if c.startswith("Version")]
    assert labels[0].startswith("Version 9, after reply 10, for turn 11: folded messages 17–18")
    assert [c.split(",")[0] for c in labels] == ["Version 9", "Version 8", "Version 7", "Version 6", "Version 5"]
    assert captions[-1] == "…and 4 older versions, not shown."


def test_a_typed_key_switches_to_openai_and_leaves_the_field_empty():
    at = new_app()
    at.text_input(key=keys.API_KEY_INPUT).input("sk-typed-secret-789").run()
    assert not at.exception
    memory = at.session_state[keys.MEMORY]
    assert not memory.server.backend.offline
    assert at.session_state[keys.KEY_SOURCE] == "field"
    assert at.session_state[keys.SETTINGS].api_key == "sk-typed-secret-789"
    assert at.text_input(key=keys.API_KEY_INPUT).value == ""
    assert "sk-typed-secret-789" not in texts(at) and "sk-typed-secret-789" not in repr(at.session_state[keys.SETTINGS])
    assert "Now using OpenAI Responses API" in at.success[0].value


def test_older_chat_messages_are_drawn_only_when_their_expander_is_open(backend):
    memory = ShortTermMemory(backend)
    for number in range(1, 13):
        with memory.turn(f"Question {number}.") as turn:
            turn.run()
    at = new_app(memory)
    older = expander(at, "Earlier messages (4)")
    assert older.caption[0].value.startswith("Open to show them. The newest 20 messages")
    assert len(at.chat_message) == 20
    assert words(at.chat_message[0]) == "Question 3."
    at.session_state[keys.OLDER_MESSAGES_OPEN] = True
    at.run()
    assert len(at.chat_message) == 24
    assert words(at.chat_message[0]) == "Question 1."


def long_memory(backend, turns: int) -> ShortTermMemory:
    memory = ShortTermMemory(backend)
    for number in range(1, turns + 1):
        with memory.turn(f"Question {number}.") as turn:
            turn.run()
    return memory


def test_earlier_chat_messages_are_drawn_a_page_at_a_time_and_every_page_is_reachable(backend):
    at = new_app(long_memory(backend, 40))
    assert len(at.chat_message) == 20
    at.session_state[keys.OLDER_MESSAGES_OPEN] = True
    at.run()
    older = expander(at, "Earlier messages (60)")
    assert "Page 1 of 3 (41–60 of 60)" in [c.value for c in older.caption]
    assert len(at.chat_message) == 20 + 20  # one page of the earlier messages, then the newest 20
    assert words(at.chat_message[0]) == "Question 21."
    older_button = at.button(key=f"{keys.OLDER_MESSAGES_PAGE}_pager.older")
    older_button.click().run()
    older_button.click().run()
    assert words(at.chat_message[0]) == "Question 1."
    assert "Page 3 of 3 (1–20 of 60)" in [c.value for c in expander(at, "Earlier messages (60)").caption]
    assert at.button(key=f"{keys.OLDER_MESSAGES_PAGE}_pager.older").disabled
    at.button(key=f"{keys.OLDER_MESSAGES_PAGE}_pager.newer").click().run()
    assert words(at.chat_message[0]) == "Question 11."


def test_the_full_history_and_the_ledger_show_a_page_of_rows_and_reach_every_row(backend):
    memory = long_memory(backend, 30)
    at = new_app(memory)
    at.session_state[keys.HISTORY_PANEL_OPEN] = True
    at.session_state[keys.USAGE_PANEL_OPEN] = True
    at.run()
    numbers = [int(c.value.split(" · ")[0]) for c in expander(at, "Full history").caption if c.value[0].isdigit()]
    assert numbers == list(range(11, 61))
    at.button(key=f"{keys.HISTORY_PAGE}_pager.older").click().run()
    history = expander(at, "Full history")
    numbers = [int(c.value.split(" · ")[0]) for c in history.caption if c.value[0].isdigit()]
    assert numbers == list(range(1, 11)) and history.text[1].value == "Question 1."

    usage = expander(at, "Token usage")
    assert len(memory.ledger) > 50
    assert len(ledger_cards(usage)) == 50
    total = len(memory.ledger)
    assert f"Page 1 of 2 ({total - 49}–{total} of {total})" in [c.value for c in usage.caption]
    at.button(key=f"{keys.LEDGER_PAGE}_pager.older").click().run()
    rows = ledger_cards(expander(at, "Token usage"))
    assert len(rows) == total - 50 and rows[0]["Turn"] == "1"


def test_the_settings_and_tools_panels_draw_their_widgets_only_while_open():
    # Issue 28: every student's page reran both panels' widgets on every turn, closed or not.
    at = AppTest.from_file(APP, default_timeout=30).run()
    assert not [w for w in at.number_input if w.key == keys.BUDGET_INPUT]
    assert not [w for w in at.selectbox if w.key == keys.PROBE_SCENARIO_INPUT]
    open_panels(at).run()
    budget = at.number_input(key=keys.BUDGET_INPUT)
    budget.set_value(1500).run()
    at.session_state[keys.SETTINGS_PANEL_OPEN] = False
    at.run()
    assert not [w for w in at.number_input if w.key == keys.BUDGET_INPUT]
    at.session_state[keys.SETTINGS_PANEL_OPEN] = True
    at.run()
    # Reopened, the input shows the memory's budget, not a value Streamlit dropped with the closed widget.
    assert at.number_input(key=keys.BUDGET_INPUT).value == at.session_state[keys.MEMORY].max_input_tokens == 1500
    assert at.selectbox(key=keys.PROBE_SCENARIO_INPUT) is not None


@pytest.mark.parametrize("lang", ["en", "zh-TW"])
def test_the_glossary_explains_the_lesson_s_words_where_they_first_appear(lang):
    from memora.app.page.glossary import TERMS, entry
    from memora.app.page.i18n import t

    at = new_app()
    at.radio(key=keys.LANG).set_value(lang).run()
    for text in (B1, "How do I ask for directions?", "What should I say at a hotel?", "How do I order food?"):
        at = send(at, text)
    at.session_state[keys.USAGE_PANEL_OPEN] = True  # the ledger is drawn only in its open panel
    at.run()
    assert not any(entry(lang, term) in texts(at) for term in TERMS), "closed, the glossary draws no words"
    at.session_state[keys.GLOSSARY_OPEN] = True
    at.run()
    page = texts(at)
    assert all(entry(lang, term) in page for term in TERMS), "the glossary popover lists every term"
    helps = {element.proto.help for kind in ("caption", "markdown", "metric", "radio") for element in getattr(at, kind)}
    shown = "\n".join(helps)
    for term in TERMS:
        assert entry(lang, term) in shown, f"{term} is linked to its entry where it first appears"
    folded = next(m for m in at.markdown if t(lang, "chat.folded") in m.value)
    assert entry(lang, "fold") in folded.proto.help and t(lang, "glossary.more") in folded.proto.help
