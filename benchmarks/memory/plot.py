"""The cost-against-retention picture: one PNG per budget, one curve per strategy over the summary caps.

matplotlib is a bench requirement only (requirements-bench.txt); without it the
bench names it and writes no picture.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from benchmarks.memory.recording import DEFAULT_CUT
from benchmarks.memory.run import PAGE, PRICED_MODEL, RECOMMENDED
from benchmarks.memory.sweep import OURS, Point

_NAMES = {
    PAGE: "Memora, the article's window + prefold (the page)",
    RECOMMENDED: "Memora, watermark + prefold (recommended)",
    "article-v0.7": "article v0.7 as written",
    "langmem": "langmem summarize_messages",
    "langchain-middleware": "LangChain SummarizationMiddleware",
    "langchain-summary-buffer": "LangChain ConversationSummaryBufferMemory (deprecated)",
    "llamaindex-memory": "LlamaIndex Memory + FactExtractionMemoryBlock",
    "llamaindex-chat-summary": "LlamaIndex ChatSummaryMemoryBuffer (deprecated)",
    "agents-trimming": "OpenAI Agents SDK trimming session (no summary)",
}


def write_plots(points: Sequence[Point], folder: Path) -> list[Path]:
    """Writes ``retention-cost-<budget>.png`` into ``folder`` for each budget; returns the paths.

    Each curve joins one strategy's points from the smallest cap to the largest;
    a hollow marker is a point that went over the budget or dropped the user's
    current message on some held-out seed.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for budget in sorted({p.budget for p in points}):
        fig, ax = plt.subplots(figsize=(8, 5.2), dpi=110)
        # One cut rule per picture: the sensitivity row is a table row, not a curve.
        rule = points[0].cut if points else DEFAULT_CUT
        at = [p for p in points if p.budget == budget and p.cut == rule]
        for strategy in dict.fromkeys(p.strategy for p in at):
            curve = sorted((p for p in at if p.strategy == strategy), key=lambda p: p.cap)
            ours = strategy in OURS
            style = {"linewidth": 2.6 if strategy == RECOMMENDED else 1.6, "linestyle": "-" if ours else "--"}
            (line,) = ax.plot([p.usd for p in curve], [p.retention for p in curve], label=_NAMES.get(strategy, strategy), **style)
            for p in curve:
                face = line.get_color() if p.holds else "white"
                ax.plot(p.usd, p.retention, "o", color=line.get_color(), markerfacecolor=face, markersize=5)
            if curve:
                ax.annotate(f"{curve[0].cap}", (curve[0].usd, curve[0].retention), fontsize=7, xytext=(3, -9), textcoords="offset points")
                ax.annotate(f"{curve[-1].cap}", (curve[-1].usd, curve[-1].retention), fontsize=7, xytext=(3, 3), textcoords="offset points")
        seeds = ", ".join(map(str, at[0].seeds)) if at else ""
        ax.set_title(f"Budget {budget:,} tokens: cost against retention, summary caps {min(p.cap for p in at)}–{max(p.cap for p in at)}")
        ax.set_xlabel(f"$ per 100 turns at {PRICED_MODEL} list prices (mean of held-out seeds {seeds})")
        ax.set_ylabel("retention: planted facts whose latest value reached the request")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="best")
        fig.text(0.01, 0.01, "Numbers at curve ends: summary cap in tokens. Hollow: over budget or question dropped on a seed.", fontsize=7)
        fig.tight_layout(rect=(0, 0.03, 1, 1))
        path = folder / f"retention-cost-{budget}.png"
        fig.savefig(path)
        plt.close(fig)
        paths.append(path)
    return paths
