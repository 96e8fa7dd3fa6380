"""The retention probe: do planted facts survive folding into the summary?

A scenario (a JSON file in ``memora/teaching/scenarios/``) plants facts in the first
user turns: a level, a goal, a name, a correction, an open question. The probe
then sends filler turns until every planted turn has left the recent window
and been folded into the summary, asks a final question, and checks each fact
twice: in the summary that the final request sent, and in the final answer.

A fact is **kept** when all its expected keywords are found and none of its
stale keywords (the value a correction replaced) is asserted; **stale** when a
stale keyword is asserted and an expected one is missing; **mixed** when both
are there (read that one yourself); **missing** otherwise. A stale keyword
right after a negation ("B2, not B1", "corrected from B1", 不是 B1) does not
count as asserted. Keywords are whole-word and case-insensitive; Chinese
keywords match as substrings. Keyword checks are a screen, not a judge: a
model may keep a fact in other words.

Offline, the final answer is the offline engine's description of the context,
so the answer column shows what reached the request; the probe then tests the
plumbing and the extractive summarizer, not a model.

Run ``python -m memora.app.probe`` (``--help`` for options), or call ``run_probe``.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, ConfigDict, Field

from memora.classroom.transcript import untrusted
from memora.classroom.transcript.untrusted import NotBlank
from memora.memory import DEFAULT_MODEL, MAX_INPUT_TOKENS, ShortTermMemory
from memora.memory.backend import Backend

SCENARIO_FORMAT = "memora-probe-scenario"
SCENARIO_VERSION = 1
MAX_SCENARIO_BYTES = 256 * 1024
MAX_TURN_CHARS = 2000
SCHEMA_FILE = "scenario.schema.json"
"""The JSON Schema of ``ScenarioFile``, next to the bundled scenarios, for editors and authors."""
FactKind = Literal["fact", "correction", "unresolved_question"]
Status = Literal["kept", "mixed", "stale", "missing"]

_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]")
_NEGATION_BEFORE = re.compile(
    r"(?:\b(?:not|no longer|instead of|rather than|from|previously|formerly)"
    r"|不是|而不是|而非|不再是|從)\W{0,3}$",
    re.IGNORECASE,
)


class ScenarioError(untrusted.UntrustedJSONError):
    """A scenario file is malformed. ``code`` and ``path`` say what and where."""


@dataclass(frozen=True)
class Fact:
    """One planted fact. Each item of ``expect`` must be found; an item that is a
    tuple is a set of alternatives (any one will do). ``stale`` are the values
    a correction replaced, which must not be asserted any more."""

    id: str
    kind: FactKind
    description: str
    expect: tuple[tuple[str, ...], ...]
    stale: tuple[str, ...] = ()


@dataclass(frozen=True)
class Scenario:
    id: str
    title: str
    description: str
    language: str
    plant: tuple[str, ...]
    filler: tuple[str, ...]
    final_question: str
    facts: tuple[Fact, ...]
    max_recent_turns: int = 2
    max_input_tokens: int = MAX_INPUT_TOKENS
    max_filler_turns: int = 12


@dataclass(frozen=True)
class Recall:
    """A fact's fate in one text: its status and the keywords that decided it."""

    status: Status
    found: tuple[str, ...]
    stale_found: tuple[str, ...]


@dataclass(frozen=True)
class FactResult:
    fact: Fact
    summary: Recall
    answer: Recall


@dataclass(frozen=True)
class ProbeReport:
    """What one probe run found.

    ``folded`` is False when the planted turns never left the recent window
    within ``max_filler_turns``: then the summary was never tested and the
    recall figures mean nothing (``conclusive`` is False).
    ``summary`` is the summary the final request sent; ``answer`` the final reply.
    Recall is the share of facts whose status is ``kept``.
    """

    scenario_id: str
    scenario_title: str
    backend_label: str
    offline: bool
    model: str
    filler_turns: int
    folded: bool
    summary: str
    answer: str
    facts: tuple[FactResult, ...]
    summary_versions: int
    session_total_tokens: int

    @property
    def conclusive(self) -> bool:
        return self.folded

    @property
    def summary_recall(self) -> float:
        return _share(r.summary.status == "kept" for r in self.facts)

    @property
    def answer_recall(self) -> float:
        return _share(r.answer.status == "kept" for r in self.facts)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict: every field, plus the two recall figures."""
        data = asdict(self)
        data["conclusive"] = self.conclusive
        data["summary_recall"] = self.summary_recall
        data["answer_recall"] = self.answer_recall
        return data


def _share(flags: Any) -> float:
    flags = list(flags)
    return sum(flags) / len(flags) if flags else 0.0


# -- scenarios ----------------------------------------------------------------


# The file format. Each model checks its own values; parse_scenario adds the rules across facts.

Id = Annotated[
    str,
    Field(
        max_length=64,
        pattern=r"^[a-z0-9][a-z0-9-]{0,63}$",
        description="Lowercase letters, digits and dashes.",
    ),
]
Keyword = Annotated[str, Field(min_length=1, max_length=100), NotBlank]
TurnText = Annotated[str, Field(min_length=1, max_length=MAX_TURN_CHARS), NotBlank]


def _as_alternatives(item: Any) -> Any:
    return [item] if isinstance(item, str) else item


KeywordList = Annotated[list[Keyword], Field(min_length=1, max_length=10)]
Alternatives = Annotated[
    KeywordList, BeforeValidator(_as_alternatives, json_schema_input_type=Keyword | KeywordList)
]
"""A keyword, or a list of alternative keywords; read as a list either way."""


class FactEntry(untrusted.StrictModel):
    """One planted fact, as a scenario file writes it."""

    model_config = ConfigDict(
        json_schema_extra={  # parse_scenario's rule, for editors
            "if": {"properties": {"kind": {"const": "correction"}}},
            "then": {"required": ["stale"], "properties": {"stale": {"minItems": 1}}},
        }
    )

    id: Id
    kind: FactKind
    description: Annotated[
        str, Field(max_length=200, description="The fact in a few words, for the report's table.")
    ]
    expect: Annotated[
        list[Alternatives],
        Field(
            min_length=1,
            max_length=10,
            description=(
                "Keywords that must all be found; an item that is a list holds alternatives (any "
                "one will do)."
            ),
        ),
    ]
    stale: Annotated[
        list[Keyword],
        Field(
            max_length=10,
            description=(
                "Values a correction replaced, which must not be asserted any more. Required for "
                "a correction."
            ),
            default=[],
        ),
    ]


class ScenarioFile(untrusted.StrictModel):
    """A Memora retention-probe scenario (python -m memora.app.probe): docs/teaching-tools.md."""

    format: Literal["memora-probe-scenario"]
    version: Literal[1]
    id: Id
    title: Annotated[str, Field(min_length=1, max_length=200), NotBlank]
    description: Annotated[str, Field(max_length=1000)] = ""
    language: Annotated[
        str,
        Field(
            min_length=1, max_length=16, description="The language of the turns, e.g. en or zh-TW."
        ),
        NotBlank,
    ]
    plant: Annotated[
        list[TurnText],
        Field(min_length=1, max_length=20, description="The user turns that plant the facts."),
    ]
    filler: Annotated[
        list[TurnText],
        Field(
            min_length=1,
            max_length=50,
            description=(
                "Turns sent, in a cycle, until the planted turns are folded into the summary."
            ),
        ),
    ]
    final_question: TurnText
    facts: Annotated[list[FactEntry], Field(min_length=1, max_length=50)]
    max_recent_turns: Annotated[int, Field(ge=0, le=20)] = 2
    max_input_tokens: Annotated[int, Field(ge=1, le=1_000_000)] = MAX_INPUT_TOKENS
    max_filler_turns: Annotated[int, Field(ge=1, le=100)] = 12


def parse_scenario(raw: bytes | str) -> Scenario:
    """A scenario from JSON text, validated strictly; raises ScenarioError.

    Unknown keys, wrong types, empty texts, duplicate fact ids, a correction
    without stale values, and files over 256 KiB are all errors.
    """
    data = untrusted.parse_json(raw, ScenarioError, max_bytes=MAX_SCENARIO_BYTES)
    untrusted.check_header(
        data,
        ScenarioError,
        format=SCENARIO_FORMAT,
        version=SCENARIO_VERSION,
        what="a probe scenario",
    )
    file = untrusted.validate(ScenarioFile, data, ScenarioError)
    seen: set[str] = set()
    for i, fact in enumerate(file.facts):
        if fact.kind == "correction" and not fact.stale:
            raise ScenarioError(
                "missing_key",
                "a correction needs the stale values it replaced.",
                f"facts[{i}].stale",
                key="stale",
            )
        if fact.id in seen:
            raise ScenarioError(
                "duplicate_id",
                f"the fact id {fact.id!r} is used twice.",
                f"facts[{i}].id",
                id=fact.id,
            )
        seen.add(fact.id)
    facts = tuple(
        Fact(f.id, f.kind, f.description, tuple(tuple(k) for k in f.expect), tuple(f.stale))
        for f in file.facts
    )
    fields = file.model_dump(
        include={
            "id",
            "title",
            "description",
            "language",
            "final_question",
            "max_recent_turns",
            "max_input_tokens",
            "max_filler_turns",
        }
    )
    return Scenario(**fields, plant=tuple(file.plant), filler=tuple(file.filler), facts=facts)


def scenario_schema() -> dict[str, Any]:
    """The JSON Schema for scenario authors; ``memora/teaching/scenarios/scenario.schema.json``
    holds it."""
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        **ScenarioFile.model_json_schema(),
    }


def bundled_scenarios() -> tuple[Scenario, ...]:
    """Every scenario shipped in ``memora/teaching/scenarios``, sorted by id."""
    folder = resources.files("memora.teaching") / "scenarios"
    found = [
        parse_scenario(entry.read_bytes())
        for entry in folder.iterdir()
        if entry.name.endswith(".json") and entry.name != SCHEMA_FILE
    ]
    return tuple(sorted(found, key=lambda s: s.id))


def load_scenario(name_or_path: str) -> Scenario:
    """A bundled scenario by id, or a scenario file by path. Raises ScenarioError if neither
    exists."""
    for scenario in bundled_scenarios():
        if scenario.id == name_or_path:
            return scenario
    path = Path(name_or_path)
    if path.is_file():
        if path.stat().st_size > MAX_SCENARIO_BYTES:
            raise ScenarioError(
                "too_large",
                f"The file is over {MAX_SCENARIO_BYTES:,} bytes.",
                limit=MAX_SCENARIO_BYTES,
            )
        return parse_scenario(path.read_bytes())
    ids = ", ".join(s.id for s in bundled_scenarios())
    raise ScenarioError(
        "unknown_scenario", f"No scenario {name_or_path!r}; bundled: {ids}.", name=name_or_path
    )


# -- checking -----------------------------------------------------------------


def _occurrences(text: str, keyword: str) -> list[int]:
    if _CJK.search(keyword):
        pattern = re.compile(re.escape(keyword), re.IGNORECASE)
    else:
        pattern = re.compile(rf"(?<!\w){re.escape(keyword)}(?!\w)", re.IGNORECASE)
    return [m.start() for m in pattern.finditer(text)]


def check_fact(fact: Fact, text: str) -> Recall:
    """The fact's status in ``text``; see the module docstring for the rules."""
    found = []
    complete = True
    for options in fact.expect:
        hit = next((k for k in options if _occurrences(text, k)), None)
        if hit is None:
            complete = False
        else:
            found.append(hit)
    stale_found = tuple(
        k
        for k in fact.stale
        if any(
            not _NEGATION_BEFORE.search(text[max(0, at - 24) : at]) for at in _occurrences(text, k)
        )
    )
    if complete and not stale_found:
        status: Status = "kept"
    elif complete:
        status = "mixed"
    elif stale_found:
        status = "stale"
    else:
        status = "missing"
    return Recall(status, tuple(found), stale_found)


# -- running ------------------------------------------------------------------


def run_probe(
    scenario: Scenario,
    backend: Backend,
    *,
    model: str = DEFAULT_MODEL,
    on_turn: Callable[[int, str], None] | None = None,
) -> ProbeReport:
    """Plays ``scenario`` against ``backend`` in a fresh memory and checks every fact.

    ``on_turn(number, text)`` is called before each user turn (for a progress bar).
    Model errors (``BackendError``) and budget errors propagate: a probe that
    could not finish has no result. The fresh memory uses the scenario's window
    and budget, so the caller's own conversation is never touched.
    """
    memory = ShortTermMemory(
        backend,
        model=model,
        max_input_tokens=scenario.max_input_tokens,
        max_recent_turns=scenario.max_recent_turns,
    )
    number = 0

    def say(text: str) -> str:
        nonlocal number
        number += 1
        if on_turn:
            on_turn(number, text)
        with memory.turn(text) as turn:
            return turn.run()

    for text in scenario.plant:
        say(text)
    planted_end = len(memory.history)
    filler = 0
    while memory.summarized_message_count < planted_end and filler < scenario.max_filler_turns:
        say(scenario.filler[filler % len(scenario.filler)])
        filler += 1
    answer = say(scenario.final_question)
    # The final request may fold once more; check what it actually sent.
    summary = memory.summary
    return ProbeReport(
        scenario_id=scenario.id,
        scenario_title=scenario.title,
        backend_label=memory.server.backend.label,
        offline=bool(getattr(memory.server.backend, "offline", False)),
        model=model,
        filler_turns=filler,
        folded=memory.summarized_message_count >= planted_end,
        summary=summary,
        answer=answer,
        facts=tuple(
            FactResult(f, check_fact(f, summary), check_fact(f, answer)) for f in scenario.facts
        ),
        summary_versions=len(memory.conversation.versions),
        session_total_tokens=memory.session_total_tokens,
    )


# -- output -------------------------------------------------------------------


def format_report(report: ProbeReport) -> str:
    """A plain-text table: one row per fact, a recall line, and the final summary."""
    rows = [("fact", "kind", "summary", "answer")] + [
        (r.fact.description, r.fact.kind, r.summary.status, r.answer.status) for r in report.facts
    ]
    widths = [max(_width(row[i]) for row in rows) for i in range(4)]
    lines = [
        f"Scenario: {report.scenario_id} - {report.scenario_title}",
        f"Backend: {report.backend_label}{'' if report.offline else f' · model {report.model}'} · "
        f"{report.filler_turns} filler turns · {report.summary_versions} summary versions · "
        f"{report.session_total_tokens} tokens",
    ]
    if report.offline:
        lines.append(
            "Offline: the answer column checks the context the offline engine describes, not a "
            "model's reply."
        )
    if not report.folded:
        lines.append(
            "INCONCLUSIVE: the planted turns were never folded into the summary; raise "
            "max_filler_turns."
        )
    lines.append("")
    for k, row in enumerate(rows):
        lines.append(
            "  ".join(
                cell + " " * (w - _width(cell)) for cell, w in zip(row, widths, strict=True)
            ).rstrip()
        )
        if k == 0:
            lines.append("  ".join("-" * w for w in widths))
    lines.append("")
    lines.append(recall_line(report))
    lines.append("Summary sent with the final question:")
    lines.extend("  " + line for line in (report.summary or "(empty)").splitlines())
    return "\n".join(lines)


def recall_line(report: ProbeReport) -> str:
    """The facts kept, as counts: in the summary, and in the model's answer, or offline in what
    would have been sent (no model answered, so no share of a model's recall is shown)."""
    total = len(report.facts)
    in_summary = sum(r.summary.status == "kept" for r in report.facts)
    in_answer = sum(r.answer.status == "kept" for r in report.facts)
    second = "in what would have been sent" if report.offline else "in the model's answer"
    return f"Facts kept: in the summary {in_summary} of {total}, {second} {in_answer} of {total}"


def _width(text: str) -> int:
    """Terminal columns: CJK characters take two."""
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)
