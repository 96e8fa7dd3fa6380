"""The chat column: history, commands, notices and the input box.

A submitted text is queued by the input's callback and read at the top of the
next script run (``memora.app.page.turn``): a command is drawn above the input box, and a
message becomes the session's reply job, which ``memora.app.page.reply_tail`` draws as it
grows. The input is drawn last, so a refused message can put the user's text back
into it in the same run.
"""

from __future__ import annotations

import streamlit as st

from memora.app.page import glossary, render, turn
from memora.app.page import state as keys
from memora.app.page.derived import memory_story
from memora.app.page.i18n import error_message, t
from memora.app.page.markup import small
from memora.app.page.pager import page_of, render_pager
from memora.app.page.picture import picture_caption, picture_spec, request_picture
from memora.app.page.state import Notice
from memora.app.page.views import fold_event, fold_label, run_command
from memora.memory import ShortTermMemory
from memora.teaching.story import Fold, Story, TurnAccount
from memora.text.messages import Message

RECENT_MESSAGES = 20
"""Messages drawn in full on every run; older ones wait in a collapsed, lazily drawn expander."""
OLDER_PAGE = 20
"""Earlier messages drawn at a time: ten turns, a page the size of the recent ones."""


def render_header(memory: ShortTermMemory, lang: str) -> None:
    st.title(t(lang, "page.title"))
    render.caption(t(lang, "page.caption"))
    glossary.render_glossary(lang)
    if memory.server.backend.offline:
        render.alert(
            "info",
            t(lang, "page.offline_banner") + "\n\n" + t(lang, "page.offline_howto"),
            icon=":material/cloud_off:",
        )
    else:
        render.caption(
            t(lang, "page.online_caption", backend=memory.server.backend.label, model=memory.model)
        )


@st.fragment
def render_history(
    memory: ShortTermMemory, lang: str, shown: int | None = None, recent: int = RECENT_MESSAGES
) -> None:
    """The first ``shown`` messages of the history (all by default): the newest ``recent`` in the
    chat, the older ones in a collapsed expander, drawn only while it is open and then one page of
    ``OLDER_PAGE`` at a time.

    The split point and the pages are kept even, so that a user message and its reply stay together.

    A fragment, so that opening or closing a turn box or the earlier messages, or turning their
    page, reruns the chat's history alone, not the sidebar and the rest of the page. One fragment,
    not one a box: Streamlit copies the container stack on each fragment call, about 0.2 ms, which
    ten boxes would pay on every run. A fragment's rerun draws with the arguments of the last full
    run, so it shows the conversation as that run did.
    """
    # one frozen value: a reply job may replace the memory's while this draws
    conversation = memory.conversation
    history = conversation.messages
    shown = len(history) if shown is None else min(shown, len(history))
    told = memory_story(memory)
    split = max(0, shown - recent)
    split -= split % 2
    if split:
        older = st.expander(
            t(lang, "chat.older", count=split),
            key=keys.OLDER_MESSAGES_OPEN,
            on_change="rerun",
            icon=":material/history:",
        )
        with older:
            if older.open:
                page = page_of(split, OLDER_PAGE, st.session_state[keys.OLDER_MESSAGES_PAGE])
                render_pager(lang, keys.OLDER_MESSAGES_PAGE, page)
                for index in range(page.start, page.stop):
                    _render_message(
                        memory, index, history[index], index < conversation.folded, told, lang
                    )
            else:
                render.caption(t(lang, "chat.older_hint", count=shown - split))
    for index in range(split, shown):
        _render_message(memory, index, history[index], index < conversation.folded, told, lang)


def folds_after_message(told: Story, index: int) -> tuple[Fold, ...]:
    """The folds that happened right after history message ``index``: after a reply, the folds ahead
    it was followed by; after a user message, the folds its own turn made before its reply."""
    if index % 2:
        return tuple(fold for fold in told.folds_after((index + 1) // 2) if fold.ahead)
    return tuple(fold for fold in told.folds_after(index // 2) if not fold.ahead)


def _render_message(
    memory: ShortTermMemory, index: int, message: Message, folded: bool, told: Story, lang: str
) -> None:
    account = told.turn((index + 1) // 2) if index % 2 else None
    with st.chat_message(message.role):
        # The number line and the words are one element: a chat of 20 messages drawn by every run of
        # every page is 20 elements fewer a run than with the number in a caption of its own.
        number = t(lang, "chat.number", number=index + 1)
        if folded:
            number_line = small(f"{number} · :material/inventory_2: {t(lang, 'chat.folded')}")
            render.markdown(
                f"{number_line}\n\n{message.content}",
                help=glossary.explain(lang, "fold", "summary"),
            )
        else:
            render.markdown(f"{small(number)}\n\n{message.content}")
        if account is not None:
            _render_turn_box(memory, account, lang)
    for fold in folds_after_message(told, index):
        render.alert("info", fold_event(memory, fold, lang), icon=":material/compress:")


def _render_turn_box(memory: ShortTermMemory, account: TurnAccount, lang: str) -> None:
    """What a reply shows under it: the cut note and the over-budget warning, always; then the
    turn's box, whose picture and words (the picture's caption, the table, the fold lines) are drawn
    only while it is open.

    Streamlit runs a collapsed expander's body on every run, and ``st.vega_lite_chart`` converted
    the picture's rows to Arrow each time: up to ten hidden charts a run, growing with the
    conversation, made the page cost 1.84x the CPU with 40 students (issue 43). An open box stays
    open through every later run, so its words are one Markdown element under the chart, not four.
    Each box keeps its open state under its turn's key (``keys.turn_box_open``).
    """
    record = account.record
    if record.cut and memory.limits.max_reply_tokens is not None:
        render.caption(
            ":material/content_cut: " + t(lang, "chat.cut", cap=memory.limits.max_reply_tokens)
        )
    if record.over_budget:
        render.alert(
            "warning",
            t(
                lang,
                "chat.over_budget",
                billed=record.server_input_tokens,
                budget=record.input_budget,
                counted=record.counted_input_tokens,
            ),
            icon=":material/warning:",
        )
    with render.lazy_expander(
        t(lang, "chat.stats", turn=record.turn),
        keys.turn_box_open(record.turn),
        ":material/analytics:",
    ) as is_open:
        if not is_open:
            return
        if record.parts is None:
            words = [small(t(lang, "picture.not_kept"))]
        else:
            picture = request_picture(record.parts, row="turn")
            render.chart(picture_spec([picture], lang))
            words = [small(picture_caption(picture, lang))]
        words.append(stats_table(account, lang))
        for fold in account.folds:
            words.append(
                small(
                    t(
                        lang,
                        "stats.fold",
                        version=fold.version,
                        label=fold_label(fold, lang),
                        count=fold.count,
                    )
                )
            )
        if memory.server.backend.offline:
            words.append(small(t(lang, "stats.offline_note")))
        render.markdown("\n\n".join(words))


def stats_table(account: TurnAccount, lang: str) -> str:
    """The article's per-turn block as a Markdown table; each input figure says whose it is (billed
    only by a provider that bills by it), and a figure the server tokenizer's own count contradicts
    says so. The folds and the session total are the story's (``memora.teaching.story``): a fold
    ahead counts for the turn it served."""
    record = account.record
    actual = (
        t(lang, "stats.not_reported") if record.input_tokens is None else f"{record.input_tokens:,}"
    )
    if record.estimated and record.input_tokens is not None:
        actual = t(lang, "stats.estimated", value=actual)
    elif record.implausible:
        actual = t(lang, "stats.implausible", value=actual)
    elif record.disagrees:
        actual = t(
            lang, "stats.disagrees", value=actual, exact=f"{record.server_counted_input_tokens:,}"
        )
    elif record.input_tokens is not None:
        actual = t(lang, "stats.billed" if record.billed else "stats.reported", value=actual)
    output = (
        t(lang, "stats.not_reported")
        if record.output_tokens is None
        else f"{record.output_tokens:,}"
    )
    rows = [
        ("stats.counted_input", f"{record.counted_input_tokens:,}"),
        *(
            [("stats.server_counted", f"{record.server_counted_input_tokens:,}")]
            if record.server_counted_input_tokens is not None
            else []
        ),
        ("stats.actual_input", actual),
        ("stats.output", output),
        ("stats.summary", f"{account.summary_tokens:,}"),
        ("stats.messages_sent", f"{record.context_messages or 0}"),
        ("stats.newly_summarized", f"{account.newly_summarized}"),
        ("stats.session_total", f"{account.session_total:,}"),
    ]
    head = f"| {t(lang, 'stats.figure')} | {t(lang, 'stats.value')} |\n|---|--:|\n"
    return head + "\n".join(f"| {t(lang, key)} | {value} |" for key, value in rows)


def render_command(memory: ShortTermMemory, lang: str) -> None:
    command = st.session_state[keys.COMMAND]
    if command is None:
        return
    output = run_command(memory, *command, lang)
    with st.container(border=True):
        if output.error:
            render.alert("warning", output.body, icon=":material/help:")
        else:
            render.markdown(f"**{output.title}**")
            render.code(output.body, language=None, wrap_lines=True)
        render.caption(t(lang, "cmd.caption"))


def render_notice(lang: str) -> None:
    notice: Notice | None = st.session_state[keys.NOTICE]
    if notice is None:
        return
    params = dict(notice.params)
    if notice.error is not None:
        params["reason"] = error_message(lang, notice.error)
    render.alert(notice.level, t(lang, notice.key, **params))


def render_input(lang: str, disabled: bool = False, took: bool = True) -> None:
    """The chat input, drawn last; refilled with the text of a turn that failed. ``disabled`` while
    a reply is written. ``took``: whether this run took a queued text (``turn.take``); a submission
    it did not take is caught up."""
    state = st.session_state
    restore = state[keys.RESTORE_TEXT]
    if restore is not None:
        # Setting a chat_input's value through its key before it is drawn needs Streamlit 1.47+.
        state[keys.CHAT_INPUT] = restore
        state[keys.RESTORE_TEXT] = None
    submitted = st.chat_input(
        t(lang, "chat.placeholder"),
        key=keys.CHAT_INPUT,
        on_submit=turn.queue,
        submit_mode="disable",
        disabled=disabled,
    )
    turn.catch_up(submitted, took)
