"""Memora's page: `streamlit run streamlit_app.py`. Wiring only; the pieces live in memora/app/page/."""

import streamlit as st

import memora.app.page.session_guard as session_guard
from memora.app.page import budget, chat, conversation, forget, panels, prefold, reply_tail, settings_panel, startup, tools, turn
from memora.app.page.state import LANG, MEMORY

# 420 px: the panels hold tables and a chart, too cramped at the default sidebar width.
st.set_page_config(page_title="Memora", page_icon=":material/school:", layout="centered", initial_sidebar_state=420)

session_guard.install()  # once per process: a websocket attaches only to a session of its own browser's cookie
state = startup.setup_or_refuse()  # a malformed setting stops here, on the page and in the log: never defaults
settled = turn.settle(state[MEMORY])  # before anything reads the memory: a finished reply job leaves its outcome
keeper = conversation.keep(state)  # may restore the URL's conversation into the session, so the memory is read after it
memory = state[MEMORY]
lang = state[LANG]
took = turn.take(memory)  # the text queued by the input, checked once: a reply job, a command, or why not
progress = turn.current()  # the reply job's progress, read once: this whole run draws the same snapshot

with st.sidebar:
    settings_panel.render_language()
    prefold.render_status(prefold.status_slot(), progress or settled, lang)
    panels.render_panels(memory, lang)
    tools.render_tools(memory, lang)
    settings_panel.render_settings(lang)
    forget.render_controls(lang)

chat.render_header(memory, lang)
conversation.render_status(keeper, lang)
conversation.render_finishing(keeper, lang, replying=progress is not None and progress.phase == "replying")  # a stopping process's reply
budget.render_unsaved(keeper, lang)  # this conversation's billed replies the storage could not take yet: "will retry"
chat.render_history(memory, lang, turn.history_shown(memory, progress))
reply_tail.render_tail(progress, lang)
chat.render_command(memory, lang)
chat.render_notice(lang)
chat.render_input(lang, disabled=progress is not None and progress.phase == "replying", took=took)
