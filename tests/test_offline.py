"""The offline engine: it explains the request, and its summary is extractive."""

from memora import ShortTermMemory
from memora.backends import OfflineBackend
from memora.backends.base import drain
from memora.backends.offline import merge_summary, topic_key
from memora.classroom.job import fold_ahead
from memora.memory.backend import ReplyRequest
from memora.memory.server import summary_request
from memora.text.messages import Message
from memora.text.prompts import SUMMARY_INSTRUCTIONS, SUMMARY_PREAMBLE
from memora.text.tokens import count_text, summary_request_tokens


def test_reply_states_what_a_model_would_have_received():
    request = ReplyRequest(
        model="gpt-5-mini",
        instructions="Be kind.",
        messages=(
            Message("developer", SUMMARY_PREAMBLE + "- My level is B1."),
            Message("user", "hi"),
            Message("assistant", "hello"),
            Message("user", "plan please"),
        ),
        counted_input_tokens=321,
        input_budget=1000,
    )
    completion = drain(OfflineBackend().stream_reply(request))
    assert completion.text.startswith("**Offline mode, no language model.**")
    assert "1 summary message, 2 recent messages, 1 current message" in completion.text
    assert "321 of 1,000 input tokens" in completion.text
    assert "> - My level is B1." in completion.text
    assert completion.usage.input_tokens > 0 and completion.usage.output_tokens > 0


def test_the_reply_speaks_the_page_s_language_and_english_by_default():
    messages = (Message("user", "hi"), Message("assistant", "hello"), Message("user", "plan"))
    request = ReplyRequest("m", "", messages, counted_input_tokens=321, input_budget=1000)
    english = drain(OfflineBackend().stream_reply(request)).text
    chinese = drain(OfflineBackend(language="zh-TW").stream_reply(request)).text
    assert english.startswith("**Offline mode, no language model.**") and "no summary yet, 2 recent messages, 1 current message" in english
    assert chinese.startswith("**離線模式，不是語言模型。**")
    assert "還沒有摘要，2 則最近的訊息，1 則目前的訊息" in chinese and "預算 1,000 個輸入 Token 中的 **321 個**" in chinese
    assert drain(OfflineBackend(language="ja").stream_reply(request)).text == english, "a language it has no words for: English"


def test_reply_streams_in_pieces_that_add_up():
    request = ReplyRequest("m", "", (Message("user", "hi"),))
    items = list(OfflineBackend().stream_reply(request))
    assert len(items) > 5
    assert "".join(items[:-1]) == items[-1].text


def test_summary_keeps_user_statements_and_newer_wins():
    summary = merge_summary(
        "",
        [
            Message("user", "Hi! My English level is B1. I want to practise travel English."),
            Message("assistant", "Great, let's start."),
        ],
        150,
    )
    assert summary == "- My English level is B1.\n- I want to practise travel English."
    summary = merge_summary(summary, [Message("user", "Actually my English level is B2.")], 150)
    assert summary == "- I want to practise travel English.\n- Actually my English level is B2."
    assert topic_key("Actually my English level is B2.") == topic_key("My English level is B1.")


def test_summary_stays_under_the_word_cap_and_keeps_facts_about_the_user():
    filler = [Message("user", f"Tell me about word number {i} in detail.") for i in range(40)]
    summary = merge_summary("- My name is Lin.", filler, 30)
    assert len(summary.split()) - summary.count("- ") <= 30
    assert "My name is Lin." in summary


def test_offline_memory_folds_the_articles_b1_fact():
    memory = ShortTermMemory(OfflineBackend())
    for text in [
        "My English level is B1 and I want to practise travel English.",
        "What does 'check in' mean?",
        "How do I ask for directions?",
        "Can you give me an example with 'could'?",
        "Please plan a practice for my level and goal.",
    ]:
        with memory.turn(text) as turn:
            reply = turn.run()
    assert memory.summarized_message_count == 2
    assert "My English level is B1 and I want to practise travel English." in memory.summary
    assert "1 summary message, 6 recent messages, 1 current message" in reply


def test_the_offline_summary_keeps_the_word_limit_its_instructions_ask_for():
    from memora.text.prompts import summary_word_limit, with_summary_cap

    facts = [Message("user", f"My fact number {n} is that I study English on day {n}.") for n in range(30)]
    backend = OfflineBackend()
    full = backend.summarize(summary_request("offline", SUMMARY_INSTRUCTIONS, "", tuple(facts), 200)).text
    short_instructions = with_summary_cap(SUMMARY_INSTRUCTIONS, 60)
    short = backend.summarize(summary_request("offline", short_instructions, "", tuple(facts), 60)).text
    assert summary_word_limit(short_instructions) == 45

    def words(summary: str) -> int:
        return sum(len(line.removeprefix("- ").split()) for line in summary.splitlines())

    assert words(short) <= 45 < words(full) <= 150
    assert short.splitlines() == full.splitlines()[-len(short.splitlines()) :]  # the newest lines are kept


def test_the_offline_engine_reports_each_request_as_the_memory_counted_it_summaries_included():
    """Offline, nothing is billed: the ledger's reported input is the count the memory checked, for a summary
    request too (its chat framing and priming included), whether the fold runs inside a turn or ahead of it."""
    folds_inside_turns = ShortTermMemory(OfflineBackend(), max_recent_turns=3, max_input_tokens=400)
    folds_ahead = ShortTermMemory(OfflineBackend(), max_recent_turns=1)
    statements = [f"My fact number {n} is that I practise English on day {n} before school." for n in range(8)]
    for text in statements:
        for memory in (folds_inside_turns, folds_ahead):
            with memory.turn(text) as turn:
                turn.run()
        fold_ahead(folds_ahead)  # the page's path: the turn, then the fold ahead of the next one
    for memory in (folds_inside_turns, folds_ahead):
        summaries = [record for record in memory.ledger if record.kind == "summary"]
        assert summaries, "each conversation folded at least once"
        assert [r.input_tokens for r in memory.ledger] == [r.counted_input_tokens for r in memory.ledger]
    # The figure is the summary request's own count, framing and priming included, not its two texts alone.
    request = summary_request("offline", SUMMARY_INSTRUCTIONS, "", (Message("user", statements[0]),), 200)
    reported = OfflineBackend().summarize(request).usage.input_tokens
    assert reported == summary_request_tokens(request.instructions, request.input_text)
    assert reported > count_text(request.instructions) + count_text(request.input_text)
