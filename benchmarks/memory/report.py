"""The benchmark's Markdown tables."""

from __future__ import annotations

from benchmarks.memory.run import PAGE, PRICED_MODEL, RECOMMENDED, REFERENCE, Report, TokenFigures, list_price


def _x(ratio: float | None) -> str:
    return "n/a" if ratio is None else f"{ratio:.2f}x"


def markdown(report: Report) -> str:
    """The whole report as Markdown: one token table per conversation length, then timing."""
    lines = [
        "# Memora memory benchmark",
        "",
        f"Budget {report.budget} input tokens, {report.recent_turns} recent turns, seed {report.seed}. "
        f"Model: a recording backend (script replies, extractive summaries capped at 200 tokens and cut at the `{report.cut}` "
        "rule, real o200k_base counts). "
        f"Ratios (`x`) are to the article's v0.7 algorithm (`{REFERENCE}`).",
    ]
    lines += _token_tables(report) + _peer_tables(report) + _bookkeeping_table(report) + _ttft_table(report) + _policy_table(report)
    if not report.tokens or max(report.tokens) < 100:
        lines += ["", "Conversations this short (`--quick`) only check that the benchmark runs."]
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
            f"| summaries after a reply | $ per 100 turns at {PRICED_MODEL} (summary input / output) "
            "| retention (stale / missing) | replies without the current message |",
            "|---|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|",
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
                f"| {r.turns_waiting_on_summary} ({r.most_summaries_in_one_turn}) | {r.summaries_after_reply} | {usd_cell(r)} "
                f"| {_share(r.recalled, r)} ({_share(r.stale, r)} / {_share(r.missing, r)}) | {r.without_current} |"
            )
    return lines


def _share(count: int, row: TokenFigures) -> str:
    return f"{count / row.facts_probed:.2f}" if row.facts_probed else "n/a"


def usd_cell(row: TokenFigures) -> str:
    """``$0.0412 ($0.0051 / $0.0105)``: per 100 turns, then its summary input and summary output parts."""
    usd = row.usd_per_100_turns
    return f"${usd['total']:.4f} (${usd['summary_input']:.4f} / ${usd['summary_output']:.4f})"


def _peer_tables(report: Report) -> list[str]:
    if not report.sweep and not report.peers_missing:
        return []
    price = list_price()
    first = report.sweep[0] if report.sweep else None
    lines = [
        "",
        "## Cost against retention, every strategy and peer at equal summary caps",
        "",
        "Each peer with its own memory class and its own fake model, returning the same extractive summary within the same "
        f"cap, cut the same way (`{report.cut}`: "
        + (
            "its beginning kept, as Memora's summarizer and a model stopped by its output cap do"
            if report.cut == "beginning"
            else "its oldest lines dropped first"
        )
        + "; the other rule is a sensitivity row at one cap); a peer's token knob (in brackets) tuned on the tuning seed "
        "only, at each budget, cap and cut rule (see `benchmarks/memory/peers.py`). Retention: the share of planted facts, "
        "last stated 4 or more turns earlier and not restated by the current message, whose latest value reached the reply "
        "request; stale: an older value did instead; missing: none did. Summary requests are checked against the budget "
        f"too. $ at {PRICED_MODEL} list prices (${price.input:.2f} input, ${price.output:.2f} output per 1M tokens, read "
        f"{_checked()}), no prompt cache, mean over the held-out seeds"
        + (f" {', '.join(map(str, first.seeds))}, {first.turns}-turn scripts." if first else "."),
    ]
    if report.peers_missing:
        lines += ["", "Left out, library not installed: " + ", ".join(report.peers_missing) + " (`pip install -r requirements-bench.txt`)."]
    for budget in sorted({p.budget for p in report.sweep}):
        lines += _budget_table(report, budget)
    return lines + _dominance(report.sweep)


def _budget_table(report: Report, budget: int) -> list[str]:
    lines = [
        "",
        f"### Budget {budget:,} tokens, {report.recent_turns} recent turns",
        "",
        "| strategy | cut | summary cap | $ per 100 turns | retention | stale | missing | summaries per turn "
        "| replies over budget, per seed | summary requests over budget, per seed (largest) "
        "| replies without the current message, per seed |",
        "|---|---|---:|---:|---:|---:|---:|---:|---|---|---|",
    ]
    at = [p for p in report.sweep if p.budget == budget]
    for p in sorted(at, key=lambda p: (p.strategy, p.cut != report.cut, p.cap)):
        lines.append(
            f"| {p.label} | {p.cut} | {p.cap} | ${p.usd:.4f} | {p.retention:.2f} | {p.stale:.2f} | {p.missing:.2f} "
            f"| {p.summaries_per_turn:.2f} | {' / '.join(map(str, p.over_budget))} "
            f"| {' / '.join(map(str, p.summary_over_budget))} ({p.largest_summary_input:,}) "
            f"| {' / '.join(map(str, p.without_current))} |"
        )
    return lines


def _dominance(points: list) -> list[str]:
    from benchmarks.memory.sweep import dominating

    lines: list[str] = []
    for ours in (RECOMMENDED, PAGE):
        for every_request, holding in (
            (False, "whose replies hold (0 over budget, 0 without the question, every seed)"),
            (True, "that hold for every request, summary requests included"),
        ):
            beaten = dominating(points, ours, every_request=every_request)
            lines += ["", f"Peers {holding}, cheaper and better than {ours} at equal cap and cut:"]
            lines += [
                f"- {m.budget:,} tokens, cap {m.cap}, cut {m.cut}: {p.label} ${p.usd:.4f} / {p.retention:.2f} "
                f"vs ${m.usd:.4f} / {m.retention:.2f}"
                for m, p in beaten
            ] or ["- none"]
    return lines


def _checked() -> str:
    from memora.teaching.prices import PRICES_CHECKED

    return PRICES_CHECKED


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
    if report.tokenization_us:
        lines += _ratio_table(report, report.tokenization_us, "one tokenization of the turn's new message")
    if report.new_text_us:
        lines += _ratio_table(report, report.new_text_us, "one tokenization of the turn's new text, its message and its reply")
    return lines


def _ratio_table(report: Report, unit: float, what: str) -> list[str]:
    sizes = list(next(iter(report.bookkeeping.values())))
    lines = [
        "",
        f"As a ratio to {what} ({unit:,.1f} µs, uncached o200k_base, same turns):",
        "",
        "| strategy | " + " | ".join(f"{n} turns of history" for n in sizes) + " |",
        "|---|" + "---:|" * len(sizes),
    ]
    for name, by_n in report.bookkeeping.items():
        lines.append(f"| {name} | " + " | ".join(f"{by_n[n] / unit:.2f}x" for n in sizes) + " |")
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


def _policy_table(report: Report) -> list[str]:
    if not report.summaries_by_budget:
        return []
    names = list(next(iter(report.summaries_by_budget.values())))
    lines = [
        "",
        f"## Summary requests by budget, {max(report.tokens)} turns, under each fold policy",
        "",
        "| max_input_tokens | " + " | ".join(names) + " |",
        "|---:|" + "---:|" * len(names),
    ]
    for budget, counts in report.summaries_by_budget.items():
        lines.append(f"| {budget} | " + " | ".join(str(counts[name]) for name in names) + " |")
    return lines
