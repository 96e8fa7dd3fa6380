"""Fold policies are objects in one registry, and one pure plan decides every fold, live or replayed."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from memora.app.settings import FOLD_POLICIES
from memora.backends import OfflineBackend
from memora.memory import ShortTermMemory, policies
from memora.memory.core import local_budget
from memora.teaching.replay import real_folds, replay, replay_sizes
from tests.support.memory import chat

ROOT = Path(__file__).resolve().parents[1]

TOY_POLICY = '''
"""A toy policy for the registry's test: it keeps only the last pair verbatim, whatever the window says."""

from dataclasses import dataclass

from memora.text.tokens import count_message


@dataclass(frozen=True)
class LastPairOnly:
    name: str = "last_pair_only"

    def first_fold(self, unfolded, size, budget, older):
        older = len(unfolded) - 2  # its own window: one pair, whatever max_recent_turns says
        return (older, "window") if older > 0 else (0, "none")

    def expected_message(self, user_messages):
        return count_message("user", "")

    def certain_fold(self, expected, shortest, older):
        return expected


POLICY = LastPairOnly()
'''

CATALOG = {
    "en.toml": ("Last pair only", "A toy: one pair verbatim.", "Fold policy: last pair only.", "Last pair only"),
    "zh-TW.toml": ("只留最後一對", "玩具策略：只保留一對原文。", "摺疊策略：只留最後一對。", "只留最後一對"),
}

CHECK = """
from memora.backends import OfflineBackend
from memora.memory import ShortTermMemory
from memora.app.settings import FOLD_POLICIES, load_settings
from memora.classroom.store.saved import SavedFile
from memora.teaching.what_if import what_if
from memora.app.page.i18n import t
from benchmarks.memory.run import strategies
from tests.support.memory import chat

assert FOLD_POLICIES == ("window", "last_pair_only", "watermark"), FOLD_POLICIES
assert load_settings({}, {"MEMORA_FOLD_POLICY": "last_pair_only"}).fold_policy == "last_pair_only"
saved = {"format": "memora-conversation", "version": 1, "language": "en", "fold_policy": "last_pair_only", "transcript": {}}
assert SavedFile.model_validate(saved).fold_policy == "last_pair_only"
memory = ShortTermMemory(OfflineBackend(), max_recent_turns=3, fold_policy="last_pair_only")
chat(memory, "one", "two", "three")
assert memory.summarized_message_count == 2, "the window of 3 would fold nothing yet"
assert [c.strategy for c in what_if(memory).columns] == ["last_pair_only", "window", "watermark", "full_history"]
assert {"memora-last_pair_only", "memora-last_pair_only+prefold"} <= set(strategies())
assert t("zh-TW", "policy.last_pair_only") == "只留最後一對"
print("registered")
"""


def test_a_new_policy_is_one_file_plus_its_catalog_strings_and_everything_that_lists_policies_finds_it(tmp_path):
    for part in ("memora", "benchmarks", "tests/support"):
        shutil.copytree(ROOT / part, tmp_path / part, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "tests" / "__init__.py", tmp_path / "tests" / "__init__.py")
    (tmp_path / "memora/memory/policies/last_pair_only.py").write_text(TOY_POLICY, encoding="utf-8")
    for catalog, (label, caption, note, column) in CATALOG.items():
        with (tmp_path / "memora/app/page/locales" / catalog).open("a", encoding="utf-8") as file:
            file.write(
                textwrap.dedent(f'''
                "policy.last_pair_only" = "{label}"
                "policy.last_pair_only_caption" = "{caption}"
                "policy.last_pair_only_note" = "{note}"
                "whatif.last_pair_only" = "{column}"
                ''')
            )
    done = subprocess.run([sys.executable, "-c", CHECK], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "registered"


def test_the_registry_lists_the_default_first_and_refuses_an_unknown_name():
    assert FOLD_POLICIES == policies.names() == ("window", "watermark")
    with pytest.raises(ValueError, match="window, watermark"):
        ShortTermMemory(OfflineBackend(), fold_policy="sometimes")


@pytest.mark.parametrize("policy", policies.names())
def test_the_what_if_replay_and_a_real_run_fold_the_same_spans_because_one_plan_decides_both(policy):
    memory = ShortTermMemory(OfflineBackend(), max_input_tokens=700, max_recent_turns=2, fold_policy=policy)
    for turn in range(14):
        chat(memory, f"Turn {turn}: I practise English for travel, " + "and I like trains very much. " * (turn % 4))
        memory.prefold()  # as the page does after each reply
    real = [v.folded for v in memory.conversation.versions]
    assert len(real) >= 2, "the conversation must fold for the comparison to mean anything"
    sizes = replay_sizes(memory)
    replayed = replay(
        memory.conversation.finished_counts, policy, sizes, budget=local_budget(memory), max_recent_turns=2,
        real_folds=real_folds(memory),
    )  # fmt: skip
    assert [r.span for r in replayed.requests if r.kind == "summary"] == real
    assert not replayed.estimated


def test_importing_the_memory_loads_no_sdk_no_streamlit_and_no_pandas():
    code = "import sys, memora.memory; print(sorted(m for m in ('openai', 'streamlit', 'pandas') if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_checking_a_message_before_it_is_sent_leaves_the_reason_of_the_last_fold_alone():
    memory = ShortTermMemory(OfflineBackend(), max_recent_turns=1)
    chat(memory, "one", "two")
    assert memory.conversation.fold_plan is None and memory.summarized_message_count == 0
    memory.plan("three")  # its plan folds the first pair, but nothing is folded yet
    assert memory.conversation.fold_plan is None
    chat(memory, "three")
    assert memory.conversation.fold_plan is not None and memory.conversation.fold_plan.reason == "window"
