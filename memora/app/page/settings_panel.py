"""The sidebar's language switch and settings: backend, model, key, limits; the fold policy's radio,
which the Status panel draws. (Deleting the conversation is ``memora.app.page.forget``.)

Every change is applied in a widget callback, before the script reruns, so the
panels and the next turn already see it. A refused change leaves the memory as
it was, puts the widget back to the memory's value and says why. While a reply
is being written (``memora.classroom.job``), a change that would alter the memory
under it (backend, model, key, budget, window, fold policy) is kept in its
widget and applied when the reply ends (``apply_deferred``); the page says so.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import streamlit as st

from memora.app.build import build_backend
from memora.app.page import glossary, render
from memora.app.page import state as keys
from memora.app.page.i18n import LANGUAGES, backend_label, t
from memora.app.page.state import Notice, guarded
from memora.app.settings import BACKENDS, FOLD_POLICIES, SettingsError, description
from memora.classroom.job import ReplyJob
from memora.memory import ShortTermMemory


def render_language() -> None:
    st.radio(
        t(st.session_state[keys.LANG], "settings.language"),
        options=list(LANGUAGES),
        format_func=LANGUAGES.__getitem__,
        key=keys.LANG,
        horizontal=True,
        on_change=_keep_panels_open,
    )


def _keep_panels_open() -> None:
    """Sets each panel's and each drawn turn box's open state anew, so the renamed expanders of the
    next run open as they were, not closed."""
    state = st.session_state
    turn_boxes = [
        key for key in state if isinstance(key, str) and key.startswith(keys.TURN_BOX_OPEN_PREFIX)
    ]
    for key in (*keys.PANELS_OPEN, *turn_boxes):
        state[key] = bool(state.get(key, False))


def chosen_option(
    key: str, options: Sequence[str], label: Callable[[str, str], str], fallback: str
) -> None:
    """Re-asserts, before its widget is drawn, the option chosen in the radio or selectbox ``key``.

    Streamlit 1.67 sends a radio's or selectbox's choice as the option's label and
    maps it back through the format_func of the run that draws the widget. After a
    language switch the browser still sends the old language's label, which maps
    to no option: Streamlit then hands over the label itself as the value, the
    widget shows nothing chosen, and a callback would read a label (found in
    Chromium). Read before the widget is drawn, the value is still the option;
    set again through session state, it wins over the browser's stale label. A
    value that is already a label (``label(lang, option)`` in any language) is
    mapped back; anything else becomes ``fallback``.
    """
    state = st.session_state
    value = state.get(key)
    if value not in options:
        value = next(
            (option for option in options for lang in LANGUAGES if label(lang, option) == value),
            fallback,
        )
    state[key] = value


def is_locked() -> bool:
    """Whether the teacher locked the settings (MEMORA_LOCK_SETTINGS); read from the server-side
    settings only."""
    return bool(st.session_state[keys.SETTINGS].locked)


def render_settings(lang: str) -> None:
    state = st.session_state
    locked = is_locked()
    with render.lazy_panel(
        lang, "settings.title", keys.SETTINGS_PANEL_OPEN, ":material/tune:"
    ) as opened:
        if not opened and not state[keys.DEFERRED_SETTINGS]:
            # Streamlit drops a widget's state when it is not drawn, but not the value seeded before
            # it: reopened, the widget would show that stale seed. Closed, the inputs follow the
            # memory instead. A change waiting for the reply lives in its widget
            # (``apply_deferred``), so while one waits the body is drawn, closed.
            _inputs_from_memory()
            return
        if locked:
            render.alert("info", t(lang, "settings.locked"), icon=":material/lock:")
        # Backends added to memora.app.settings.BACKENDS appear here without a change to the page.
        chosen_option(keys.BACKEND_INPUT, BACKENDS, backend_label, state[keys.BACKEND_NAME])
        st.selectbox(
            t(lang, "settings.backend"),
            options=list(BACKENDS),
            format_func=lambda name: backend_label(lang, name),
            key=keys.BACKEND_INPUT,
            on_change=_apply_backend,
            disabled=locked,
        )
        st.text_input(
            t(lang, "settings.model"),
            key=keys.MODEL_INPUT,
            on_change=_apply_backend,
            disabled=locked,
        )
        _render_key_field(lang, locked)
        # No min_value: Streamlit would clamp 0 or -1 silently, and the memory's own reason is the
        # lesson.
        st.number_input(
            t(lang, "settings.max_input_tokens"),
            key=keys.BUDGET_INPUT,
            step=100,
            help=t(lang, "settings.limits_help") + variable_help(lang, "MEMORA_MAX_INPUT_TOKENS"),
            on_change=_apply_limits,
            disabled=locked,
        )
        st.number_input(
            t(lang, "settings.max_recent_turns"),
            key=keys.WINDOW_INPUT,
            step=1,
            help=t(lang, "settings.limits_help") + variable_help(lang, "MEMORA_MAX_RECENT_TURNS"),
            on_change=_apply_limits,
            disabled=locked,
        )
        notice: Notice | None = state[keys.SETTINGS_NOTICE]
        if notice is not None:
            _show(notice, lang)


def render_fold_policy(lang: str) -> None:
    """The fold policy's radio, in the Status panel, so the other policy is one click away.

    The article's window comes first, as the default; each option's caption says what it teaches or
    saves. It changes the memory as the budget and window do (``_apply_limits``): refused when
    locked, kept for later while a reply is being written.
    """
    memory: ShortTermMemory = st.session_state[keys.MEMORY]
    chosen_option(
        keys.FOLD_POLICY_INPUT,
        FOLD_POLICIES,
        lambda lang, policy: t(lang, f"policy.{policy}"),
        memory.limits.fold_policy,
    )
    st.radio(
        t(lang, "settings.fold_policy"),
        options=list(FOLD_POLICIES),
        format_func=lambda policy: t(lang, f"policy.{policy}"),
        captions=[t(lang, f"policy.{policy}_caption") for policy in FOLD_POLICIES],
        key=keys.FOLD_POLICY_INPUT,
        help=t(lang, "settings.fold_policy_help")
        + "\n\n"
        + glossary.explain(lang, "recent_window", "watermark")
        + variable_help(lang, "MEMORA_FOLD_POLICY"),
        on_change=_apply_limits,
        disabled=is_locked(),
    )


def variable_help(lang: str, variable: str) -> str:
    """The end of a widget's help: the variable that sets the widget's value at start and, on the
    English page, what it means, in the settings' own words (``memora.app.settings.description``, as
    docs/configuration.md shows them). Those words are written in English only: the 繁體中文
    page names the variable, as code, and leaves the words to the English page."""
    if lang == "en":
        return f"\n\n`{variable}`: {description(variable)}."
    return f"\n\n`{variable}`"


def _render_key_field(lang: str, locked: bool) -> None:
    """Where the key comes from, or a password field for one; a locked page has no field."""
    source = st.session_state[keys.KEY_SOURCE]
    if source in ("secrets", "env"):
        render.caption(
            t(lang, "settings.api_key_configured", source=t(lang, f"settings.source_{source}"))
        )
    elif not locked:  # a locked page has no key field: it uses the teacher's configuration only
        st.text_input(
            t(lang, "settings.api_key"),
            key=keys.API_KEY_INPUT,
            type="password",
            help=t(lang, "settings.api_key_help"),
            on_change=_apply_typed_key,
            autocomplete="off",
        )
        if source == "field":
            render.caption(
                t(lang, "settings.api_key_configured", source=t(lang, "settings.source_field"))
            )


def _show(notice: Notice, lang: str) -> None:
    params = dict(notice.params)
    if "backend" in params:
        params["backend"] = backend_label(lang, params["backend"])
    render.alert(notice.level, t(lang, notice.key, **params))


def _refuse_when_locked() -> bool:
    """Puts every locked widget back to the memory's values and says why; True when locked.

    A disabled widget is only the visible half of the lock: a crafted request
    can still carry a new value, so each callback asks this first.
    """
    if not is_locked():
        return False
    state = st.session_state
    _inputs_from_memory()
    state[keys.FOLD_POLICY_INPUT] = state[keys.MEMORY].limits.fold_policy
    state[keys.SETTINGS_NOTICE] = Notice("error", "settings.locked_refused")
    return True


def _inputs_from_memory() -> None:
    """Sets the Settings panel's widgets to the session's backend and the memory's values."""
    state = st.session_state
    memory: ShortTermMemory = state[keys.MEMORY]
    state[keys.BACKEND_INPUT] = state[keys.BACKEND_NAME]
    state[keys.MODEL_INPUT] = memory.model
    state[keys.API_KEY_INPUT] = ""
    state[keys.BUDGET_INPUT] = memory.max_input_tokens
    state[keys.WINDOW_INPUT] = memory.max_recent_turns


def _deferred_while_replying(change: str) -> bool:
    """Keeps ``change`` (``"limits"`` or ``"backend"``) for ``apply_deferred`` while a job runs;
    True when it did."""
    state = st.session_state
    job: ReplyJob | None = state[keys.REPLY_JOB]
    if job is None or job.progress.finished:
        return False
    state[keys.DEFERRED_SETTINGS] = state[keys.DEFERRED_SETTINGS] | {change}
    state[keys.SETTINGS_NOTICE] = Notice("info", "settings.deferred")
    return True


def apply_deferred() -> None:
    """Applies the changes kept while a job ran, from their widgets' current values; call once it
    has finished."""
    state = st.session_state
    deferred = state[keys.DEFERRED_SETTINGS]
    state[keys.DEFERRED_SETTINGS] = frozenset()
    if "backend" in deferred:
        _apply_backend()
    if "limits" in deferred:
        _apply_limits()


DISCARD_WAIT_S = 5.0
"""How long a deletion or an import waits for a cancelled job to let go of the old memory before
going on without it."""


def discard_job() -> None:
    """Cancels the session's job and waits a bounded time for it; its outcome is never shown. For a
    deletion and an import."""
    state = st.session_state
    job: ReplyJob | None = state[keys.REPLY_JOB]
    state[keys.REPLY_JOB] = None
    if job is not None:
        job.cancel()
        job.wait(DISCARD_WAIT_S)


def _apply_limits() -> None:
    state = st.session_state
    memory: ShortTermMemory = state[keys.MEMORY]
    if _refuse_when_locked() or _deferred_while_replying("limits"):
        return
    try:
        memory.configure(
            max_input_tokens=int(state[keys.BUDGET_INPUT]),
            max_recent_turns=int(state[keys.WINDOW_INPUT]),
            fold_policy=state[keys.FOLD_POLICY_INPUT],
        )
    except ValueError as error:
        state[keys.SETTINGS_NOTICE] = Notice("error", "settings.refused", {"reason": str(error)})
        state[keys.BUDGET_INPUT] = memory.max_input_tokens
        state[keys.WINDOW_INPUT] = memory.max_recent_turns
        state[keys.FOLD_POLICY_INPUT] = memory.limits.fold_policy
    else:
        state[keys.SETTINGS_NOTICE] = None


def _apply_typed_key() -> None:
    state = st.session_state
    if _refuse_when_locked():
        return
    typed = state[keys.API_KEY_INPUT].strip()
    # The key moves into the session's settings and out of the widget, so the browser does not keep
    # it.
    state[keys.API_KEY_INPUT] = ""
    if not typed:
        return
    state[keys.SETTINGS] = state[keys.SETTINGS].with_changes(api_key=typed)
    state[keys.KEY_SOURCE] = "field"
    if state[keys.BACKEND_INPUT] == "offline" and "openai" in BACKENDS:
        state[keys.BACKEND_INPUT] = "openai"
    _apply_backend()


def _apply_backend() -> None:
    """Swaps the memory's backend and model; the conversation is kept."""
    state = st.session_state
    memory: ShortTermMemory = state[keys.MEMORY]
    if _refuse_when_locked() or _deferred_while_replying("backend"):
        return
    name = state[keys.BACKEND_INPUT]
    model = state[keys.MODEL_INPUT].strip() or memory.model
    settings = state[keys.SETTINGS].with_changes(backend=name, model=model)
    try:
        backend = guarded(settings, build_backend(settings))
    except (SettingsError, ValueError) as error:
        state[keys.SETTINGS_NOTICE] = Notice(
            "error", "settings.backend_failed", {"backend": name, "reason": str(error)}
        )
        state[keys.BACKEND_INPUT] = state[keys.BACKEND_NAME]
        state[keys.MODEL_INPUT] = memory.model
        return
    memory.configure(backend=backend, model=model)  # a new server's count is learned afresh
    state[keys.SETTINGS] = settings
    state[keys.BACKEND_NAME] = name
    state[keys.MODEL_INPUT] = model
    state[keys.SETTINGS_NOTICE] = Notice("success", "settings.backend_switched", {"backend": name})
