"""The page's words in English and Traditional Chinese (zh-TW); no Streamlit here.

``t(lang, key, **fmt)`` looks a message up and fills its ``{placeholders}``.
Both catalogs must hold exactly the same keys and the same placeholders per
key (a test checks this), so a switch of language never drops a label.
"""

from __future__ import annotations

from memora.backends.base import BackendError
from memora.limits import LimitReached
from memora.memory import ContextBudgetError, SummaryError

LANGUAGES: dict[str, str] = {"en": "English", "zh-TW": "繁體中文"}
DEFAULT_LANGUAGE = "en"

CATALOG: dict[str, dict[str, str]] = {
    "en": {
        # page
        "page.title": "Memora: a chatbot's short-term memory",
        "page.caption": "An English-learning assistant that shows what it remembers. Open the sidebar panels to watch the memory work.",
        "page.offline_banner": "**Offline mode:** replies come from Memora's offline engine, not a language model. It shows what a model would receive, and its summaries only copy what you wrote.",
        "page.offline_howto": "To chat with a real model, set `OPENAI_API_KEY` in the environment or in `.streamlit/secrets.toml`, or paste a key under **Settings** in the sidebar.",
        "page.online_caption": "Backend: {backend} · model `{model}`",
        "page.settings_error": "A configured setting is malformed, so the defaults are used: {reason}",
        "chat.placeholder": "Write in English, or type /history, /context, /summary, /status",
        "chat.older": "Earlier messages ({count})",
        "chat.older_hint": "Open to show them. The newest {count} messages are always shown below.",
        "chat.folded": "Folded into the summary: this message is no longer sent to the model verbatim.",
        "chat.stats": "Turn {turn}: tokens and context",
        "chat.pending_reply": "Waiting for the reply…",
        # per-turn stats
        "stats.counted_input": "Counted input tokens (local, before sending)",
        "stats.actual_input": "Actual input tokens (billed)",
        "stats.output": "Output tokens",
        "stats.summary": "Summary update tokens",
        "stats.messages_sent": "Messages sent in the context",
        "stats.newly_summarized": "Messages newly summarized",
        "stats.session_total": "Session total tokens",
        "stats.not_reported": "not reported",
        "stats.estimated": "{value} (estimated: counted locally)",
        "stats.offline_note": "Offline engine: every figure is a local o200k_base count, no model was billed.",
        "stats.figure": "Figure",
        "stats.value": "Value",
        # notices
        "notice.empty": "The message is empty. Write something first.",
        "notice.restored": "Your message was not sent: {reason} Its text is back in the input box.",
        "notice.interrupted": "The reply was interrupted before it finished, so this turn was not kept. Its text is back in the input box.",
        "notice.reset": "The conversation was reset.",
        # errors
        "error.budget": "This message needs {input_tokens} input tokens with the instructions and summary, but the budget (max_input_tokens) is {max_input_tokens}. Shorten the message or raise the budget.",
        "error.summary": "The summary update failed, so the previous summary is kept.",
        "error.backend": "The model request failed: {detail}",
        "error.value": "The request was refused: {detail}",
        "error.unexpected": "An unexpected error occurred ({kind}).",
        "error.limit.message_too_long": "The message has {value} characters; the limit is {limit}.",
        "error.limit.too_many_turns": "This session has reached its limit of {limit} turns. Reset the conversation to start again.",
        "error.limit.too_many_tokens": "This session has used {value} of its {limit} tokens.",
        # commands
        "cmd.caption": "Command output: nothing was sent to the model.",
        "cmd.unknown": "Unknown command {command}. The commands are /history, /context, /summary and /status.",
        "cmd.no_args": "The command {command} takes no arguments (got: {args}).",
        "cmd.history_title": "Full conversation history",
        "cmd.context_title": "Last request context",
        "cmd.summary_title": "Conversation summary",
        "cmd.status_title": "Short-term memory status",
        "cmd.empty": "(empty)",
        # status
        "status.history": "History messages",
        "status.summarized": "Summarized messages",
        "status.context": "Last context messages",
        "status.has_summary": "Summary available",
        "status.session_tokens": "Session total tokens",
        "status.yes": "Yes",
        "status.no": "No",
        "status.bounded": "Sending the full history would now cost {full} input tokens; the last request sent {sent} of a {budget} budget.",
        # panels
        "panel.status": "Status",
        "panel.summary": "Conversation summary",
        "panel.context": "Last request context",
        "panel.history": "Full history",
        "panel.usage": "Token usage",
        "panel.summary_empty": "No summary yet. Older messages are folded into it when they leave the recent window or the budget.",
        "panel.summary_current": "Current summary",
        "panel.summary_versions": "Earlier versions",
        "panel.summary_version": "Version {number}, turn {turn}: folded messages {first}–{last} ({count} messages), {tokens} tokens",
        "panel.summary_hidden": "…and {count} older versions, not shown.",
        "panel.summary_version_rewrite": "Version {number}, turn {turn}: rewritten without new messages, {tokens} tokens",
        "panel.context_empty": "No request yet. Send a message to see what the model receives.",
                "panel.budget": "Budget: {used} of {budget} input tokens",
        "panel.history_empty": "No messages yet.",
        "panel.lazy_hint": "Drawn when opened, so that long conversations stay fast.",
        "panel.usage_empty": "No model request yet.",
        "panel.usage_ledger": "Ledger: one row per model request",
        "panel.usage_download": "Download the ledger (CSV)",
        "source.summary": "summary",
        "source.window": "recent window",
        "source.current": "current message",
        "mark.summarized": "summarized",
        "mark.window": "in window",
        "mark.current": "current",
        "col.number": "#",
        "col.role": "Role",
        "col.state": "State",
        "col.source": "Source",
        "col.tokens": "Tokens",
        "col.content": "Content",
        # ledger columns, as shown on the page (the CSV keeps the field names)
        "ledger.turn": "Turn",
        "ledger.kind": "Kind",
        "ledger.model": "Model",
        "ledger.counted_input_tokens": "Counted input",
        "ledger.input_tokens": "Input",
        "ledger.output_tokens": "Output",
        "ledger.total_tokens": "Total",
        "ledger.latency_s": "Latency (s)",
        "ledger.reasoning_tokens": "Reasoning",
        "ledger.cached_tokens": "Cached",
        "ledger.estimated": "Estimated",
        "ledger.full_history_tokens": "Full history",
        # chart
        "chart.reply_input": "Reply input",
        "chart.reply_output": "Reply output",
        "chart.summary": "Summaries",
        "chart.full_history": "Full history",
        "chart.budget": "Budget",
        "chart.turn": "Turn",
        "chart.tokens": "Tokens",
        "chart.series": "Series",
        # settings
        "settings.title": "Settings",
        "settings.language": "Language",
        "settings.backend": "Backend",
        "settings.model": "Model",
        "settings.max_input_tokens": "Input-token budget (max_input_tokens)",
        "settings.max_recent_turns": "Recent turns kept verbatim (max_recent_turns)",
        "settings.limits_help": "Applied from the next message.",
        "settings.refused": "Refused: {reason}",
        "settings.api_key": "OpenAI API key",
        "settings.api_key_help": "Kept only in this browser session's memory; never shown or saved.",
        "settings.api_key_configured": "An API key is configured through {source}.",
        "settings.source_secrets": "Streamlit secrets",
        "settings.source_env": "the environment",
        "settings.source_field": "the key field",
        "settings.backend_failed": "Could not switch to {backend}: {reason}",
        "settings.backend_switched": "Now using {backend}. The conversation is kept.",
        "settings.locked": "Settings are locked for this shared page: backend, model, key, budget and window are the teacher's.",
        "settings.locked_refused": "Refused: the settings are locked for this shared page.",
        "settings.reset": "Reset conversation",
        "settings.reset_help": "Clears history, summary and ledger; keeps the settings.",
        "backend.offline": "Offline engine (no language model)",
        "backend.openai": "OpenAI Responses API",
        # Not in memora.settings.BACKENDS yet: the backends branch adds it; the label is ready for the merge.
        "backend.chat": "OpenAI-compatible server (Ollama, LM Studio, vLLM, llama.cpp)",
    },
    "zh-TW": {
        "page.title": "Memora：聊天機器人的短期記憶",
        "page.caption": "一個會展示自己記得什麼的英語學習助理。打開側邊欄的面板，就能看到記憶如何運作。",
        "page.offline_banner": "**離線模式：** 回覆來自 Memora 的離線引擎，不是語言模型。它會顯示模型原本會收到的內容，摘要也只會摘錄你寫過的句子。",
        "page.offline_howto": "若要和真正的模型對話，請在環境變數或 `.streamlit/secrets.toml` 設定 `OPENAI_API_KEY`，或在側邊欄的 **設定** 貼上金鑰。",
        "page.online_caption": "後端：{backend} · 模型 `{model}`",
        "page.settings_error": "有一項設定的格式錯誤，因此改用預設值：{reason}",
        "chat.placeholder": "用英文輸入，或輸入 /history、/context、/summary、/status",
        "chat.older": "較早的訊息（{count}）",
        "chat.older_hint": "展開即可顯示。最新的 {count} 則訊息一律顯示在下方。",
        "chat.folded": "已摺疊進摘要：這則訊息不再原文送給模型。",
        "chat.stats": "第 {turn} 輪：Token 與 Context",
        "chat.pending_reply": "等待回覆中…",
        "stats.counted_input": "計算的輸入 Token（本機計算，送出前）",
        "stats.actual_input": "實際輸入 Token（計費）",
        "stats.output": "輸出 Token",
        "stats.summary": "摘要更新 Token",
        "stats.messages_sent": "Context 中送出的訊息數",
        "stats.newly_summarized": "這一輪新摘要的訊息數",
        "stats.session_total": "本次對話累計 Token",
        "stats.not_reported": "未回報",
        "stats.estimated": "{value}（估計值：本機計算）",
        "stats.offline_note": "離線引擎：所有數字都是本機的 o200k_base 計算結果，沒有任何模型計費。",
        "stats.figure": "項目",
        "stats.value": "數值",
        "notice.empty": "訊息是空的，請先輸入內容。",
        "notice.restored": "你的訊息沒有送出：{reason} 原文已放回輸入框。",
        "notice.interrupted": "回覆在完成前被中斷，因此這一輪沒有保留。原文已放回輸入框。",
        "notice.reset": "對話已重設。",
        "error.budget": "這則訊息加上指示與摘要需要 {input_tokens} 個輸入 Token，但預算（max_input_tokens）只有 {max_input_tokens}。請縮短訊息或提高預算。",
        "error.summary": "摘要更新失敗，因此保留先前的摘要。",
        "error.backend": "模型請求失敗：{detail}",
        "error.value": "請求被拒絕：{detail}",
        "error.unexpected": "發生未預期的錯誤（{kind}）。",
        "error.limit.message_too_long": "訊息有 {value} 個字元，上限是 {limit}。",
        "error.limit.too_many_turns": "這段對話已達 {limit} 輪的上限。請重設對話後再開始。",
        "error.limit.too_many_tokens": "這段對話已使用 {value} 個 Token，上限是 {limit}。",
        "cmd.caption": "指令輸出：沒有送出任何內容給模型。",
        "cmd.unknown": "未知的指令 {command}。可用的指令有 /history、/context、/summary 和 /status。",
        "cmd.no_args": "指令 {command} 不接受參數（收到：{args}）。",
        "cmd.history_title": "完整對話紀錄",
        "cmd.context_title": "上一次請求的 Context",
        "cmd.summary_title": "對話摘要",
        "cmd.status_title": "短期記憶狀態",
        "cmd.empty": "（空）",
        "status.history": "History 訊息數",
        "status.summarized": "已摘要訊息數",
        "status.context": "上次 Context 訊息數",
        "status.has_summary": "是否有摘要",
        "status.session_tokens": "本次對話累計 Token",
        "status.yes": "是",
        "status.no": "否",
        "status.bounded": "若送出完整 History，現在需要 {full} 個輸入 Token；上一次請求只送出 {sent} 個（預算 {budget}）。",
        "panel.status": "狀態",
        "panel.summary": "對話摘要",
        "panel.context": "上一次請求的 Context",
        "panel.history": "完整 History",
        "panel.usage": "Token 用量",
        "panel.summary_empty": "還沒有摘要。較舊的訊息離開最近視窗或超出預算時，會被摺疊進摘要。",
        "panel.summary_current": "目前的摘要",
        "panel.summary_versions": "先前的版本",
        "panel.summary_version": "第 {number} 版，第 {turn} 輪：摺疊了訊息 {first}–{last}（{count} 則），{tokens} 個 Token",
        "panel.summary_hidden": "…以及 {count} 個更早的版本，未顯示。",
        "panel.summary_version_rewrite": "第 {number} 版，第 {turn} 輪：沒有新訊息的改寫，{tokens} 個 Token",
        "panel.context_empty": "還沒有任何請求。送出一則訊息，就能看到模型收到的內容。",
                "panel.budget": "預算：已用 {used} / {budget} 個輸入 Token",
        "panel.history_empty": "還沒有訊息。",
        "panel.lazy_hint": "展開時才繪製，長對話也能保持流暢。",
        "panel.usage_empty": "還沒有任何模型請求。",
        "panel.usage_ledger": "帳本：每個模型請求一列",
        "panel.usage_download": "下載帳本（CSV）",
        "source.summary": "摘要",
        "source.window": "最近視窗",
        "source.current": "目前訊息",
        "mark.summarized": "已摘要",
        "mark.window": "在視窗中",
        "mark.current": "目前",
        "col.number": "#",
        "col.role": "角色",
        "col.state": "狀態",
        "col.source": "來源",
        "col.tokens": "Token",
        "col.content": "內容",
        "ledger.turn": "輪次",
        "ledger.kind": "類型",
        "ledger.model": "模型",
        "ledger.counted_input_tokens": "計算的輸入",
        "ledger.input_tokens": "輸入",
        "ledger.output_tokens": "輸出",
        "ledger.total_tokens": "合計",
        "ledger.latency_s": "延遲（秒）",
        "ledger.reasoning_tokens": "推理",
        "ledger.cached_tokens": "快取",
        "ledger.estimated": "估計值",
        "ledger.full_history_tokens": "完整 History",
        "chart.reply_input": "回覆輸入",
        "chart.reply_output": "回覆輸出",
        "chart.summary": "摘要",
        "chart.full_history": "完整 History",
        "chart.budget": "預算",
        "chart.turn": "輪次",
        "chart.tokens": "Token",
        "chart.series": "項目",
        "settings.title": "設定",
        "settings.language": "介面語言",
        "settings.backend": "後端",
        "settings.model": "模型",
        "settings.max_input_tokens": "輸入 Token 預算（max_input_tokens）",
        "settings.max_recent_turns": "保留原文的最近輪數（max_recent_turns）",
        "settings.limits_help": "從下一則訊息開始套用。",
        "settings.refused": "已拒絕：{reason}",
        "settings.api_key": "OpenAI API 金鑰",
        "settings.api_key_help": "只保存在這個瀏覽器工作階段的記憶體中，不會顯示也不會儲存。",
        "settings.api_key_configured": "已透過 {source} 設定 API 金鑰。",
        "settings.source_secrets": "Streamlit secrets",
        "settings.source_env": "環境變數",
        "settings.source_field": "金鑰欄位",
        "settings.backend_failed": "無法切換到 {backend}：{reason}",
        "settings.backend_switched": "現在使用 {backend}，對話內容保留。",
        "settings.locked": "這個共用頁面的設定已鎖定：後端、模型、金鑰、預算與視窗都由老師設定。",
        "settings.locked_refused": "已拒絕：這個共用頁面的設定已鎖定。",
        "settings.reset": "重設對話",
        "settings.reset_help": "清除 History、摘要和帳本，保留設定。",
        "backend.offline": "離線引擎（不是語言模型）",
        "backend.openai": "OpenAI Responses API",
        "backend.chat": "OpenAI 相容伺服器（Ollama、LM Studio、vLLM、llama.cpp）",
    },
}


def t(lang: str, key: str, **fmt: object) -> str:
    """The message ``key`` in ``lang``, with ``fmt`` filled in.

    An unknown language falls back to English. An unknown key raises KeyError,
    so a typo fails in tests rather than showing a raw key on the page.
    """
    catalog = CATALOG.get(lang, CATALOG[DEFAULT_LANGUAGE])
    text = catalog[key]
    return text.format(**fmt) if fmt else text


def backend_label(lang: str, name: str) -> str:
    """A backend's display name; backends added later without a label show their own name."""
    key = f"backend.{name}"
    return t(lang, key) if key in CATALOG.get(lang, CATALOG[DEFAULT_LANGUAGE]) else name


def error_message(lang: str, error: BaseException) -> str:
    """A user-safe, translated sentence for a failed turn.

    Core errors get their own message; a BackendError's text is already
    user-safe (no secrets), so it is shown as detail. Anything else shows only
    its type, because its text could carry a request's internals.
    """
    if isinstance(error, ContextBudgetError):
        return t(lang, "error.budget", input_tokens=error.input_tokens, max_input_tokens=error.max_input_tokens)
    if isinstance(error, LimitReached):
        return t(lang, f"error.limit.{error.code}", value=f"{error.value:,}", limit=f"{error.limit:,}")
    if isinstance(error, SummaryError):
        return t(lang, "error.summary")
    if isinstance(error, BackendError):
        return t(lang, "error.backend", detail=str(error))
    if isinstance(error, ValueError):
        return t(lang, "error.value", detail=str(error))
    return t(lang, "error.unexpected", kind=type(error).__name__)
