"""The benchmark's Markdown tables."""

from __future__ import annotations

from memora.bench.run import REFERENCE, Report


def _x(ratio: float | None) -> str:
    return "n/a" if ratio is None else f"{ratio:.2f}x"


def markdown(report: Report) -> str:
    """The whole report as Markdown: one token table per conversation length, then timing and goals."""
    lines = [
        "# Memora memory benchmark",
        "",
        f"Budget {report.budget} input tokens, {report.recent_turns} recent turns, batch k={report.batch}, seed {report.seed}. "
        "Model: a recording backend (script replies, extractive summaries capped at 200 tokens, real o200k_base counts). "
        f"Ratios (`x`) are to the article's v0.7 algorithm (`{REFERENCE}`).",
    ]
    lines += _token_tables(report) + _bookkeeping_table(report) + _ttft_table(report) + _batch_table(report)
    lines += ["", "## Goals (measured)", ""]
    if not report.tokens or max(report.tokens) < 100:
        lines += ["Conversations this short (`--quick`) only check that the benchmark runs; judge the goals on a full run.", ""]
    lines += [f"- [{'x' if ok else ' '}] {goal}: {why}" for goal, ok, why in report.goals]
    lines += ["", f"Benchmark ran in {report.seconds:.1f} s."]
    return "\n".join(lines)


def _token_tables(report: Report) -> list[str]:
    lines: list[str] = []
    for turns, rows in report.tokens.items():
        lines += [
            "",
            f"## {turns}-turn conversation",
            "",
            "| strategy | input tokens | output tokens | largest reply request | over budget | "
            "calls/turn reply / summary / count | model calls | replies that waited on a summary (most in one turn) "
            "| summaries after a reply |",
            "|---|---:|---:|---:|---:|---|---:|---:|---:|",
        ]
        for r in rows:
            ratio = r.ratio_to_article
            per = r.calls_per_turn
            lines.append(
                f"| {r.strategy} | {r.input_tokens:,} ({_x(ratio['input_tokens'])}) "
                f"| {r.output_tokens:,} ({_x(ratio['output_tokens'])}) "
                f"| {r.largest_reply_input:,} ({_x(ratio['largest_reply_input'])}) "
                f"| {r.over_budget} | {per['reply']:.2f} / {per['summary']:.2f} / {per['count']:.2f} "
                f"| {sum(r.calls.values())} ({_x(ratio['model_calls'])}) "
                f"| {r.turns_waiting_on_summary} ({r.most_summaries_in_one_turn}) | {r.summaries_after_reply} |"
            )
    return lines


def _bookkeeping_table(report: Report) -> list[str]:
    sizes = list(next(iter(report.bookkeeping.values())))
    ref = report.bookkeeping[REFERENCE]
    lines = [
        "",
        "## Memory bookkeeping per turn, model time excluded (median, microseconds)",
        "",
        "| strategy | " + " | ".join(f"{n} turns of history" for n in sizes) + f" | {sizes[-1]} vs {sizes[0]} |",
        "|---|" + "---:|" * (len(sizes) + 1),
    ]
    for name, by_n in report.bookkeeping.items():
        cells = [f"{by_n[n]:,.0f} µs ({_x(by_n[n] / ref[n])})" for n in sizes]
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {_x(by_n[sizes[-1]] / by_n[sizes[0]])} |")
    return lines


def _ttft_table(report: Report) -> list[str]:
    first = report.ttft[0]
    ref_t = next(t for t in report.ttft if t.strategy == REFERENCE)
    lines = [
        "",
        f"## Time from send to first token, {first.delay_ms:.0f} ms per model request, {first.turns} turns",
        "",
        "| strategy | mean | median | max | turns that waited on a summary/count |",
        "|---|---:|---:|---:|---:|",
    ]
    for t in report.ttft:
        lines.append(
            f"| {t.strategy} | {t.mean_ms:.0f} ms ({_x(t.mean_ms / ref_t.mean_ms)}) | {t.median_ms:.0f} ms "
            f"| {t.max_ms:.0f} ms | {t.turns_waiting_on_summary_or_count} |"
        )
    return lines


def _batch_table(report: Report) -> list[str]:
    if not report.batch_by_budget:
        return []
    lines = [
        "",
        f"## Summary requests by budget, {max(report.tokens)} turns: default vs fold_batch_turns={report.batch}",
        "",
        "| max_input_tokens | memora | " + f"memora-batch{report.batch} | fewer by |",
        "|---:|---:|---:|---:|",
    ]
    for budget, (plain, batched) in report.batch_by_budget.items():
        lines.append(f"| {budget} | {plain} | {batched} | {_x(plain / batched if batched else None)} |")
    return lines
