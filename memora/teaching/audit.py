"""Auditable summaries: what each summary version folded, cost, and changed.

For every ``SummaryVersion`` in a memory this gives the history messages it
folded (by index and in full), the tokens its request spent, and a word-level
diff against the version before it, so a reader can see which facts were
added, rewritten or dropped at each fold.

Words are runs of letters, digits and punctuation between spaces. Chinese,
Japanese and Korean text has no spaces, so each CJK character is its own word;
a changed ``B1`` to ``B2`` in ``我的程度是 B1`` then shows as one changed word
instead of a changed sentence.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from memora.text.messages import Message

DiffKind = Literal["same", "added", "removed"]

_CJK = (
    "\u2e80-\u2fdf\u3000-\u303f\u3040-\u30ff\u3100-\u312f\u3130-\u318f\u31a0-\u31ff"
    "\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef"
    "\U00020000-\U0002fa1f"
)
# A token is one CJK character or one run of other non-space characters, with
# the whitespace after it, so that joining the tokens gives back the text.
_TOKEN = re.compile(rf"(?:[{_CJK}]|[^\s{_CJK}]+)\s*|\s+")


@dataclass(frozen=True)
class DiffSegment:
    """A run of text that both versions share (``same``) or only the new (``added``)
    or only the old (``removed``) version has. ``text`` keeps its whitespace."""

    kind: DiffKind
    text: str


@dataclass(frozen=True)
class SummaryAudit:
    """One summary version, explained.

    ``version`` is 1-based. ``folded`` is the half-open history range this version
    folded in and ``folded_messages`` are those messages; both are empty for a
    rewrite that moved no messages (the article's ``update_summary``).
    ``tokens`` is what the summary request cost (input plus output) and ``turn``
    the user turn that triggered it. ``diff`` compares ``text`` with
    ``previous_text``, which is ``""`` for the first version, so the first diff is
    all ``added``. ``cut`` and ``clipped`` come from the version: a summary
    trimmed to its last whole sentence, and folded messages shortened to fit.
    """

    version: int
    turn: int
    folded: tuple[int, int]
    folded_messages: tuple[Message, ...]
    summarized_message_count: int
    tokens: int
    text: str
    previous_text: str
    diff: tuple[DiffSegment, ...]
    cut: bool = False
    clipped: int = 0

    @property
    def added_words(self) -> int:
        return sum(len(tokenize(s.text)) for s in self.diff if s.kind == "added")

    @property
    def removed_words(self) -> int:
        return sum(len(tokenize(s.text)) for s in self.diff if s.kind == "removed")

    @property
    def unchanged(self) -> bool:
        return all(s.kind == "same" for s in self.diff)


def tokenize(text: str) -> list[str]:
    """The words of ``text``, each with its trailing whitespace; CJK characters one by one.

    ``"".join(tokenize(text)) == text``; leading whitespace is a token of its own.
    """
    return _TOKEN.findall(text)


def word_diff(old: str, new: str) -> tuple[DiffSegment, ...]:
    """The word-level diff from ``old`` to ``new``, as segments in reading order.

    Words compare without their whitespace, so reflowed lines do not count as
    changes; the segment text comes from the new version for ``same`` runs. When
    a run is replaced, its ``removed`` segment comes before its ``added`` one.
    Two empty texts give no segments; an empty ``old`` gives one ``added`` segment.
    Joining the ``same`` and ``added`` segments gives back ``new``; joining the
    ``same`` and ``removed`` segments gives back ``old`` up to whitespace.
    """
    old_tokens = tokenize(old)
    new_tokens = tokenize(new)
    matcher = difflib.SequenceMatcher(
        a=[t.strip() for t in old_tokens], b=[t.strip() for t in new_tokens], autojunk=False
    )
    segments: list[DiffSegment] = []

    def add(kind: DiffKind, tokens: Sequence[str]) -> None:
        text = "".join(tokens)
        if not text:
            return
        if segments and segments[-1].kind == kind:
            segments[-1] = DiffSegment(kind, segments[-1].text + text)
        else:
            segments.append(DiffSegment(kind, text))

    for tag, a0, a1, b0, b1 in matcher.get_opcodes():
        if tag == "equal":
            add("same", new_tokens[b0:b1])
        else:
            removed = old_tokens[a0:a1]
            # A same-run ends with the new text's spacing; when the new text ends
            # there but the old one went on, the old space comes back here.
            if (
                removed
                and a0
                and old_tokens[a0 - 1][-1:].isspace()
                and segments
                and not segments[-1].text[-1:].isspace()
            ):
                removed = [" ", *removed]
            add("removed", removed)
            add("added", new_tokens[b0:b1])
    return tuple(segments)


def audit_summaries(
    summary_versions: Sequence, history: Sequence[Message], *, last: int | None = None
) -> tuple[SummaryAudit, ...]:
    """One ``SummaryAudit`` per version, oldest first.

    ``summary_versions`` are ``memory.conversation.versions`` and ``history`` is
    ``memory.history``. A folded range that reaches past ``history`` (which a
    consistent memory never has) yields only the messages that exist.
    ``last`` keeps only the newest ``last`` versions, numbered as in the full
    list, and diffs only those: a page that shows a few versions then costs the
    same at the hundredth fold as at the first. ``last=0`` gives ``()``.
    """
    first = 0 if last is None else max(0, len(summary_versions) - max(0, last))
    if first >= len(summary_versions):
        return ()
    audits = []
    previous = summary_versions[first - 1].text if first else ""
    for number, version in enumerate(summary_versions[first:], start=first + 1):
        start, end = version.folded
        audits.append(
            SummaryAudit(
                version=number,
                turn=version.turn,
                folded=(start, end),
                folded_messages=tuple(history[start:end]),
                summarized_message_count=version.summarized_message_count,
                tokens=version.tokens,
                text=version.text,
                previous_text=previous,
                diff=word_diff(previous, version.text),
                cut=version.cut,
                clipped=version.clipped,
            )
        )
        previous = version.text
    return tuple(audits)


# Every character CommonMark (and Streamlit's :color[] directives) treats as markup.
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()<>#+\-=.!|~:$&^])")


def escape_markdown(text: str) -> str:
    """``text`` with every Markdown and HTML special character backslash-escaped.

    ``<`` and ``&`` are escaped too, so no HTML tag or entity survives; a
    rendered result shows exactly the characters of ``text``.
    """
    return _MARKDOWN_SPECIAL.sub(r"\\\1", text)


def diff_markdown(segments: Sequence[DiffSegment]) -> str:
    """The diff as safe Markdown: added words in bold, removed words struck through.

    All text is escaped (see ``escape_markdown``), so a summary cannot inject
    links, images or HTML. Line breaks are kept as hard breaks, and markers are
    put around each line's words, never around whitespace, so that they render.
    No segments give ``""``.
    """
    marks = {"same": "", "added": "**", "removed": "~~"}
    lines: list[str] = [""]
    for segment in segments:
        mark = marks[segment.kind]
        pieces = segment.text.split("\n")
        for i, piece in enumerate(pieces):
            if i:
                lines.append("")
            core = piece.strip()
            if not core:
                lines[-1] += " " if piece else ""
                continue
            lead = piece[: len(piece) - len(piece.lstrip())]
            trail = piece[len(piece.rstrip()) :]
            lines[-1] += (
                (" " if lead else "") + mark + escape_markdown(core) + mark + (" " if trail else "")
            )
    # Two trailing spaces make a hard line break; blank lines separate paragraphs.
    return "  \n".join(line.strip() for line in lines if line.strip())
