"""The sidebar's "Teaching tools": the retention probe, and export/import of the conversation.

The probe plays a scripted conversation against the session's backend in a
fresh memory (``memora.teaching.probe.run_probe``), so the user's own conversation is
never touched. Export reads only the memory (``memora.classroom.transcript.format``), never the
settings, so no key or server URL can leave in the file. Import builds a new
memory and swaps it in only once the file passed every check; an invalid file
leaves the current conversation exactly as it was.
"""

from __future__ import annotations

import functools
import json
import math
from typing import Any

import pandas as pd
import streamlit as st

from memora.app.page import conversation, render
from memora.app.page import state as keys
from memora.app.page.i18n import CATALOG, DEFAULT_LANGUAGE, backend_label, error_message, t
from memora.app.page.settings_panel import discard_job
from memora.app.page.state import Notice
from memora.app.page.turn import speak
from memora.classroom.transcript.format import (
    MAX_TRANSCRIPT_BYTES,
    TranscriptError,
    continue_in_session,
    dumps_transcript,
    parse_transcript,
)
from memora.memory import ShortTermMemory
from memora.teaching.audit import escape_markdown
from memora.teaching.probe import Fact, ProbeReport, Scenario, bundled_scenarios, run_probe

DEFAULT_SCENARIO = "article-b1-travel"
PROGRESS_TEXT_CHARS = 60
UPLOAD_LIMIT_MB = math.ceil(MAX_TRANSCRIPT_BYTES / 1024 / 1024)
"""The transcript's own limit in Streamlit's unit (MiB), so the upload box shows the limit the
import enforces."""


def render_tools(memory: ShortTermMemory, lang: str) -> None:
    with render.lazy_panel(
        lang, "tools.title", keys.TOOLS_PANEL_OPEN, ":material/science:"
    ) as opened:
        if not opened:
            return
        probe_tab, transcript_tab = st.tabs(
            [t(lang, "tools.tab_probe"), t(lang, "tools.tab_transcript")]
        )
        with probe_tab:
            render_probe(memory, lang)
        with transcript_tab:
            render_transcript(memory, lang)


# -- retention probe ----------------------------------------------------------


@functools.cache
def scenarios() -> dict[str, Scenario]:
    """The bundled scenarios by id; parsed once per process, as they ship with the code."""
    return {scenario.id: scenario for scenario in bundled_scenarios()}


def probe_turns(scenario: Scenario) -> int:
    """The most user turns a probe of ``scenario`` can send: planted, filler, final question."""
    return len(scenario.plant) + scenario.max_filler_turns + 1


def render_probe(memory: ShortTermMemory, lang: str) -> None:
    """The probe's scenario picker, button and report.

    On a locked classroom page with a real model, the probe is off: it sends up
    to 14 requests outside the session caps, on the teacher's key, per click.
    """
    state = st.session_state
    if state[keys.SETTINGS].locked and not memory.server.backend.offline:
        render.caption(t(lang, "probe.locked"))
        return
    available = scenarios()
    if state[keys.PROBE_SCENARIO_INPUT] not in available:
        state[keys.PROBE_SCENARIO_INPUT] = (
            DEFAULT_SCENARIO if DEFAULT_SCENARIO in available else next(iter(available))
        )
    render.caption(t(lang, "probe.intro"))
    st.selectbox(
        t(lang, "probe.scenario"),
        options=list(available),
        format_func=lambda i: scenario_title(lang, available[i].id, available[i].title),
        key=keys.PROBE_SCENARIO_INPUT,
    )
    scenario = available[state[keys.PROBE_SCENARIO_INPUT]]
    total = probe_turns(scenario)
    render.caption(
        t(
            lang,
            "probe.requests",
            turns=total,
            backend=backend_label(lang, state[keys.BACKEND_NAME]),
        )
    )
    if st.button(t(lang, "probe.run"), icon=":material/play_arrow:"):
        state[keys.PROBE_RESULT] = run_with_progress(scenario, memory, lang, total)
    result = state[keys.PROBE_RESULT]
    if isinstance(result, ProbeReport):
        render_report(result, lang)
    elif isinstance(result, Exception):
        render.alert("error", t(lang, "probe.failed", reason=error_message(lang, result)))


def run_with_progress(
    scenario: Scenario, memory: ShortTermMemory, lang: str, total: int
) -> ProbeReport | Exception:
    """Runs the probe on the memory's backend and model, with a progress bar; returns the report or
    the error.

    Only ``Exception`` is caught: Streamlit's stop and rerun end the probe, and
    its own memory (never the session's) goes with it.
    """
    bar = st.progress(0.0)

    def on_turn(number: int, text: str) -> None:
        shown = text if len(text) <= PROGRESS_TEXT_CHARS else text[: PROGRESS_TEXT_CHARS - 1] + "…"
        bar.progress(
            min(number / total, 1.0),
            text=t(lang, "probe.progress", number=number, total=total, text=shown),
        )

    # offline, the engine's account of each request is in the page's language, as a turn's is
    speak(memory, lang)
    try:
        report = run_probe(scenario, memory.server.backend, model=memory.model, on_turn=on_turn)
    except Exception as error:  # a failed model request or budget: shown, the page stays up
        bar.empty()
        return error
    bar.progress(1.0, text=t(lang, "probe.done"))
    return report


def answer_key(report: ProbeReport, prefix: str) -> str:
    """The catalog key for the answer's figure: offline there is no answer, only what would have
    been sent."""
    return f"{prefix}_sent" if report.offline else f"{prefix}_answer"


def scenario_title(lang: str, scenario_id: str, title: str) -> str:
    """A bundled scenario's title in ``lang`` (``scenario.<id>``); a scenario the catalogs do not
    name keeps its own."""
    return CATALOG[lang].get(f"scenario.{scenario_id}", title)


def fact_name(lang: str, scenario_id: str, fact: Fact) -> str:
    """A planted fact's name in ``lang`` (``scenario.<id>.<fact>``), else the scenario file's own
    description."""
    return CATALOG[lang].get(f"scenario.{scenario_id}.{fact.id}", fact.description)


def probe_frame(report: ProbeReport, lang: str) -> pd.DataFrame:
    """One row per fact: description, kind, status in the summary and in the answer, translated."""
    return pd.DataFrame(
        {
            t(lang, "probe.col_fact"): [
                fact_name(lang, report.scenario_id, r.fact) for r in report.facts
            ],
            t(lang, "probe.col_kind"): [t(lang, f"probe.kind.{r.fact.kind}") for r in report.facts],
            t(lang, "probe.col_summary"): [
                t(lang, f"probe.status.{r.summary.status}") for r in report.facts
            ],
            t(lang, answer_key(report, "probe.col")): [
                t(lang, f"probe.status.{r.answer.status}") for r in report.facts
            ],
        }
    )


def render_report(report: ProbeReport, lang: str) -> None:
    """The report: what was probed, then how many facts each place kept, as counts ("2 of 2"), never
    a bare share.

    Offline, no model answers: the second figure is the facts found in the engine's account of what
    would have been sent, and it is labelled so; the header names the model only when one answered.
    """
    backend = escape_markdown(report.backend_label)
    if report.offline:
        backend = backend_label(lang, "offline")
    header = t(
        lang,
        "probe.header",
        title=escape_markdown(scenario_title(lang, report.scenario_id, report.scenario_title)),
        backend=backend,
        filler=report.filler_turns,
        versions=report.summary_versions,
        tokens=f"{report.session_total_tokens:,}",
    )
    if not report.offline:
        header += " · " + t(lang, "probe.model", model=report.model)
    render.markdown(header)
    if report.offline:
        render.alert("info", t(lang, "probe.offline_note"), icon=":material/cloud_off:")
    if not report.conclusive:
        render.alert("warning", t(lang, "probe.inconclusive"))
    total = len(report.facts)
    in_summary = sum(r.summary.status == "kept" for r in report.facts)
    in_answer = sum(r.answer.status == "kept" for r in report.facts)
    summary_recall, answer_recall = st.columns(2)
    summary_recall.metric(
        t(lang, "probe.recall_summary"), t(lang, "probe.kept_of", kept=in_summary, total=total)
    )
    answer_recall.metric(
        t(lang, answer_key(report, "probe.recall")),
        t(lang, "probe.kept_of", kept=in_answer, total=total),
    )
    # A static table, the fact as its row's name: it wraps to a phone's width, where a data grid
    # scrolled sideways.
    table = probe_frame(report, lang)
    st.table(table.set_index(table.columns[0]))
    render.caption(t(lang, "probe.legend"))
    render.markdown(f"**{t(lang, 'probe.final_summary')}**")
    render.code(report.summary or t(lang, "cmd.empty"), language=None, wrap_lines=True)


# -- export and import --------------------------------------------------------


def render_transcript(memory: ShortTermMemory, lang: str) -> None:
    st.download_button(
        t(lang, "transcript.export"),
        # Built only when clicked: a long conversation's JSON is not rebuilt on every rerun.
        data=lambda: dumps_transcript(memory),
        file_name="memora-conversation.json",
        mime="application/json",
        help=t(lang, "transcript.export_help"),
        icon=":material/download:",
        on_click="ignore",
    )
    upload_box_words(lang)
    st.file_uploader(
        t(lang, "transcript.import"),
        type=["json"],
        key=keys.IMPORT_INPUT,
        max_upload_size=UPLOAD_LIMIT_MB,
        help=t(lang, "transcript.import_help"),
    )
    st.button(
        t(lang, "transcript.import_button"), on_click=import_uploaded, icon=":material/upload_file:"
    )
    notice: Notice | None = st.session_state[keys.IMPORT_NOTICE]
    if notice is not None:
        render.alert(notice.level, t(lang, notice.key, **import_notice_params(notice, lang)))


UPLOAD_BOX = f".st-key-{keys.IMPORT_INPUT}"
"""The import box's element, by its key: the one upload box whose words the page sets
(``upload_box_words``)."""


def upload_box_words(lang: str) -> None:
    """The import box's button and limit in ``lang``, the limit being the transcript's own (2 MiB).

    Streamlit writes them in English ("Upload", "2MB per file • JSON") with no option to change
    them; a style sheet (``upload_box_style``) hides its words and shows the catalog's in their
    place. A Streamlit that renames these elements shows its own English words again, never none.
    """
    st.html(upload_box_style(lang))


def upload_box_style(lang: str) -> str:
    """The style sheet of ``upload_box_words``. The catalog's words go in as CSS strings, with every
    ``<`` escaped, so that no catalog text can end the sheet or add markup."""
    limit = f"{MAX_TRANSCRIPT_BYTES // 1024 // 1024} MiB"
    button = _css_string(t(lang, "transcript.upload"))
    instructions = _css_string(t(lang, "transcript.upload_limit", limit=limit))
    words = f"{UPLOAD_BOX} [data-testid=stFileUploaderDropzone]"
    dropzone_text = f"{words} [data-testid=stFileUploaderDropzoneInstructions]"
    hidden = f"{words} [data-testid=stMarkdownContainer] p, {dropzone_text} span"
    return (
        "<style>"
        f"{hidden} {{display: none}}"
        f"{words} button [data-testid=stMarkdownContainer]::after {{content: {button}}}"
        f"{dropzone_text} > div::after {{content: {instructions}; font-size: 0.8rem}}"
        "</style>"
    )


def _css_string(text: str) -> str:
    """``text`` as a quoted CSS string: JSON's quoting (a CSS string takes its backslash escapes),
    ``<`` as ``\\3c``."""
    return json.dumps(text, ensure_ascii=False).replace("<", "\\3c ")


def import_uploaded() -> None:
    """The import button's callback: a new memory from the uploaded file, or a notice saying why
    not.

    The new memory continues on the session's backend, model, token counter and
    session limits, with the transcript's history, summary versions and ledger.
    Unlocked, it takes the file's budget and window; on a locked page
    (MEMORA_LOCK_SETTINGS) it keeps the server's, and the file brings only the
    conversation. The file must also fit the session's caps (``check_caps``).
    Nothing in the session changes unless the whole file is valid, and the
    import itself sends no request: the prefold waits for the next reply.
    """
    state = st.session_state
    uploaded = state.get(keys.IMPORT_INPUT)
    if uploaded is None:
        state[keys.IMPORT_NOTICE] = Notice("warning", "transcript.no_file")
        return
    old: ShortTermMemory = state[keys.MEMORY]
    try:
        transcript = parse_transcript(uploaded.getvalue())
        memory = continue_in_session(transcript, old, locked=state[keys.SETTINGS].locked)
    except TranscriptError as error:
        state[keys.IMPORT_NOTICE] = Notice(
            "error",
            "transcript.failed",
            {"name": uploaded.name, "code": error.code, "path": error.path},
        )
        return
    # saved at once, or refused by a store cap with nothing changed
    refused = conversation.adopt_import(state, memory)
    if refused is not None:
        state[keys.IMPORT_NOTICE] = refused
        return
    discard_job()  # a reply in flight belongs to the old memory: cancelled, never committed
    state[keys.MEMORY] = memory
    # The limit widgets follow the imported memory.
    state[keys.BUDGET_INPUT] = memory.max_input_tokens
    state[keys.WINDOW_INPUT] = memory.max_recent_turns
    state[keys.PENDING_TEXT] = None
    state[keys.RESTORE_TEXT] = None
    state[keys.COMMAND] = None
    state[keys.NOTICE] = None
    # As if the prefold had already run for this history: an import alone must send no request.
    state[keys.PREFOLD_AT] = len(memory.history)
    state[keys.IMPORT_NOTICE] = Notice(
        "success",
        "transcript.imported",
        {
            "name": uploaded.name,
            "messages": len(memory.history),
            "versions": len(memory.conversation.versions),
        },
    )


def import_notice_params(notice: Notice, lang: str) -> dict[str, Any]:
    """The notice's placeholders, escaped (a file name is the user's), with the error code's
    translated reason.

    Code and path are shown in code spans, where Markdown does not apply; a
    backtick, which could close the span, cannot come from this module's codes
    and is replaced in a path (which may quote a key from the file).
    """
    params = {name: escape_markdown(str(value)) for name, value in notice.params.items()}
    if notice.key == "transcript.failed":
        code = str(notice.params["code"])
        reason_key = f"transcript.code.{code}"
        if reason_key not in CATALOG[DEFAULT_LANGUAGE]:
            reason_key = "transcript.code.other"
        params["reason"] = t(lang, reason_key)
        params["code"] = code.replace("`", "'")
        path = str(notice.params["path"]).replace("`", "'")
        params["path"] = path or t(lang, "transcript.path_root")
    return params
