"""The summary panel's audit: for each summary version, what it folded, cost and changed.

Only the newest versions are audited and drawn (``memora.teaching.audit.audit_summaries``
with ``last``), so a long conversation with hundreds of folds reruns as fast as
a short one. Every text that came from the user or a model goes through
``escape_markdown`` or ``diff_markdown``, so no message can inject links,
images or HTML into the panel.
"""

from __future__ import annotations

import streamlit as st

from memora.app.page import render
from memora.app.page.derived import memory_story
from memora.app.page.i18n import role_name, t
from memora.app.page.markup import plain_text
from memora.app.page.views import fold_label
from memora.memory import ShortTermMemory
from memora.teaching.audit import SummaryAudit, audit_summaries, diff_markdown, escape_markdown
from memora.teaching.story import Story
from memora.text.messages import Message

VERSIONS_AUDITED = 5
"""Versions drawn with their audit, newest first; a long conversation has hundreds."""


def render_summary_audit(memory: ShortTermMemory, lang: str, shown: int = VERSIONS_AUDITED) -> None:
    """The newest ``shown`` versions, newest first, each with tabs: changes, folded messages, full
    text."""
    audits = audit_summaries(memory.conversation.versions, memory.history, last=shown)
    if not audits:
        return
    render.markdown(f"**{t(lang, 'audit.title')}**")
    render.caption(t(lang, "audit.hint"))
    told = memory_story(memory)
    for audit in reversed(audits):
        with st.container(border=True):
            render.caption(version_label(audit, told, lang))
            if audit.cut:
                render.caption(":material/content_cut: " + t(lang, "audit.cut"))
            if audit.clipped:
                render.caption(
                    ":material/compress: " + t(lang, "audit.clipped", count=audit.clipped)
                )
            changes, folded, text = st.tabs(
                [
                    t(lang, "audit.tab_changes"),
                    t(lang, "audit.tab_folded"),
                    t(lang, "audit.tab_text"),
                ]
            )
            with changes:
                if not audit.unchanged:
                    render.markdown(diff_markdown(audit.diff))
                render.caption(change_counts(audit, lang))
            with folded:
                lines = folded_lines(audit, lang)
                if lines:
                    render.markdown("\n".join(lines))
                    render.caption(t(lang, "audit.folded_caption"))
                else:
                    render.caption(t(lang, "audit.no_folded"))
            with text:
                # no Markdown: the version exactly as the next request sent it
                render.plain(audit.text)
    hidden = len(memory.conversation.versions) - len(audits)
    if hidden:
        render.caption(t(lang, "panel.summary_hidden", count=hidden))


def version_label(audit: SummaryAudit, told: Story, lang: str) -> str:
    """``Version 2, after reply 4, for turn 5: folded messages 3–4 (2 messages), 31 tokens``: the
    fold's one label (``told``'s, as the chat's), and the chat's 1-based message numbers."""
    fold = told.folds[audit.version - 1]
    label = fold_label(fold, lang)
    first, last = audit.folded
    if last <= first:
        return t(
            lang,
            "panel.summary_version_rewrite",
            number=audit.version,
            label=label,
            tokens=audit.tokens,
        )
    return t(
        lang,
        "panel.summary_version",
        number=audit.version,
        label=label,
        first=first + 1,
        last=last,
        count=last - first,
        tokens=audit.tokens,
    )


def change_counts(audit: SummaryAudit, lang: str) -> str:
    if audit.version == 1:
        return t(lang, "audit.counts_first", added=audit.added_words)
    if audit.unchanged:
        return t(lang, "audit.unchanged", previous=audit.version - 1)
    return t(
        lang,
        "audit.counts",
        added=audit.added_words,
        removed=audit.removed_words,
        previous=audit.version - 1,
    )


def folded_lines(audit: SummaryAudit, lang: str) -> list[str]:
    """One Markdown list item per folded message: its 1-based history number, role and text, its own
    Markdown removed (``plain_text``) and the rest escaped, so a reply's ``**bold**`` reads as
    words, not asterisks."""
    start = audit.folded[0]
    return [
        f"- **{start + offset + 1}** · {role_name(lang, message.role)}: {_escaped_words(message)}"
        for offset, message in enumerate(audit.folded_messages)
    ]


def _escaped_words(message: Message) -> str:
    """The message's text without its Markdown, its whitespace collapsed, the rest escaped."""
    return escape_markdown(" ".join(plain_text(message.content).split()))
