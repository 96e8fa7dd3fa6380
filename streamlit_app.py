"""Memora's page: `streamlit run streamlit_app.py`. Wiring only; the pieces live in memora/ui/."""

import streamlit as st

from memora.ui import chat, conversation, panels, prefold, settings_panel, tools
from memora.ui.state import LANG, MEMORY, setup_state

# 420 px: the panels hold tables and a chart, too cramped at the default sidebar width.
st.set_page_config(page_title="Memora", page_icon=":material/school:", layout="centered", initial_sidebar_state=420)

state = setup_state()
memory = state[MEMORY]
chat.settle_interrupted_turn(memory)  # before anything reads the memory: an interrupted run may still be rolling back
keeper = conversation.keep(state)  # may restore the URL's conversation into the session, so the memory is read again
memory = state[MEMORY]
lang = state[LANG]

with st.sidebar:
    settings_panel.render_language()
    summary_status = prefold.status_slot()
    panels.render_panels(memory, lang)
    tools.render_tools(memory, lang)
    settings_panel.render_settings(lang)

chat.render_header(memory, lang)
conversation.render_status(keeper, lang)
chat.render_history(memory, lang)
chat.handle_pending(memory, lang)
chat.render_command(memory, lang)
chat.render_notice(lang)
chat.render_input(lang)

# Last, once the whole page is up: the user reads the reply while the summary is folded.
prefold.prefold_after_reply(state[MEMORY], lang, summary_status)
