"""The article's prompts (Memora v0.7), word for word, and the summary's framing."""

import re
from functools import cache

SYSTEM_PROMPT = """
You are Memora, a personal English learning assistant.

Your goal is to help the user learn English clearly and efficiently.

Guidelines:
- Explain concepts in simple language.
- Keep answers focused on the user's question.
- Use short examples when helpful.
- Avoid unnecessary technical grammar terminology.
"""

SUMMARY_INSTRUCTIONS = """
You maintain a compact summary of an ongoing conversation.

Requirements:
- Merge the existing summary with the new messages.
- Preserve user facts, preferences, goals, corrections,
  decisions, and unresolved questions.
- Remove greetings, repetition, and unimportant wording.
- Do not invent information.
- If newer information corrects older information,
  keep the newer information.
- Keep the summary under 150 words.
- Use the same language as the conversation when possible.
- Return only the updated summary.
"""

SUMMARY_PREAMBLE = (
    "The following is a compact summary of earlier "
    "conversation. Use it as background context. "
    "If it conflicts with recent messages, prefer "
    "the recent messages.\n\n"
)
"""Put before the summary in the ``developer`` message of each request."""

SUMMARY_INPUT = """
Existing summary:
{summary}

New messages:
{transcript}
"""
"""A summary request's one input message, in the article's exact layout: ``summary`` is the running
summary, or ``(empty)`` before the first fold; ``transcript`` one ``role: content`` line per message
to fold."""

SUMMARY_WORD_LIMIT = 150
"""The word cap that SUMMARY_INSTRUCTIONS asks of the model."""

WORDS_PER_TOKEN = SUMMARY_WORD_LIMIT / 200
"""The article asks for 150 words of a summary Memora caps at 200 tokens; a shorter cap keeps that
ratio."""

_WORD_LIMIT = re.compile(r"under (\d+) words")


@cache
def summary_word_limit(instructions: str) -> int:
    """The "under N words" that summary ``instructions`` ask for; ``SUMMARY_WORD_LIMIT`` when they
    name none.

    The offline engine and the benchmark's recorder keep their extractive summaries within it.
    """
    found = _WORD_LIMIT.search(instructions)
    return int(found.group(1)) if found else SUMMARY_WORD_LIMIT


@cache
def with_summary_cap(instructions: str, max_summary_tokens: int) -> str:
    """``instructions`` asking for at most the words that fit ``max_summary_tokens``
    (``WORDS_PER_TOKEN``).

    Only a word limit already in the text ("under N words") changes, and only down, so the
    article's instructions are unchanged at its own 200-token cap; instructions naming no
    word limit are returned as they are (the token cap still bounds the output).
    """
    words = int(max_summary_tokens * WORDS_PER_TOKEN)
    if words >= summary_word_limit(instructions):
        return instructions
    return _WORD_LIMIT.sub(f"under {words} words", instructions, count=1)
