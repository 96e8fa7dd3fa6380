"""The README a teacher reads first: short, in two languages, with a picture the screenshot script made.

And the commands it gives are the ones CI runs: ``.ci/run`` ends with the README's test command, verbatim.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
README_ZH = (ROOT / "README.zh-TW.md").read_text(encoding="utf-8")


def commands(text: str) -> list[str]:
    return re.findall(r"```bash\n(.*?)\n```", text, flags=re.S)


def test_the_readme_is_short_and_opens_with_the_chinese_link_and_the_page_s_picture():
    lines = README.splitlines()
    assert len(lines) <= 300
    assert "README.zh-TW.md" in "\n".join(lines[:5])
    picture = re.search(r"!\[[^\]]+\]\((docs/screenshot-en-1440x1000\.png)\)", README)
    assert picture and (ROOT / picture[1]).is_file() and README.index(picture[0]) < README.index("## Quickstart")
    assert "## A five-minute lesson plan" in README and "## Sharing with a class" in README


def test_ci_runs_the_readme_s_test_command_verbatim_and_both_readmes_give_the_same_two_commands():
    setup_and_start, setup_and_test = commands(README)[:2]
    assert "streamlit run streamlit_app.py" in setup_and_start and "pytest" in setup_and_test
    assert (ROOT / ".ci" / "run").read_text(encoding="utf-8").rstrip("\n").splitlines()[-1] == setup_and_test
    assert commands(README_ZH)[:2] == [setup_and_start, setup_and_test]


def test_every_local_link_of_the_readmes_and_docs_leads_to_a_file():
    for path in (ROOT / "README.md", ROOT / "README.zh-TW.md", *sorted((ROOT / "docs").glob("*.md"))):
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", path.read_text(encoding="utf-8")):
            if not target.startswith(("http://", "https://")):
                assert (path.parent / target).exists(), f"{path.relative_to(ROOT)} links to {target}, which is not there"


def test_the_chinese_readme_has_the_lesson_plan_in_chinese_with_the_page_s_own_words():
    from memora.app.page.i18n import t

    assert "## 五分鐘教案" in README_ZH and "(docs/screenshot-zh-TW-1440x1000.png)" in README_ZH
    for key in ("panel.context", "panel.history", "glossary.title", "mark.summarized"):
        assert t("zh-TW", key) in README_ZH, key


def test_both_readmes_describe_the_token_usage_chart_s_lines_as_the_chart_draws_them():
    """Issue 43: the READMEs called the full history the dashed line. The chart draws the budget and the full history
    as solid lines, in their own colours, and dashes only the other policy's replay, an estimate."""
    from memora.app.page.chart import usage_chart_spec
    from memora.app.page.i18n import t

    colour_words = {"#E45756": {"en": "red", "zh-TW": "紅色"}, "#54A24B": {"en": "green", "zh-TW": "綠色"}}
    for lang, readme in (("en", README), ("zh-TW", README_ZH)):
        spec = usage_chart_spec(lang, ["watermark"])
        scale = spec["layer"][0]["encoding"]["color"]["scale"]
        colour = dict(zip(scale["domain"], scale["range"], strict=True))
        dash = spec["layer"][1]["encoding"]["strokeDash"]
        dashed = dash["condition"]["test"]["oneOf"]
        assert dashed == [t(lang, "whatif.chart_line", strategy=t(lang, "whatif.watermark"))]
        assert dash["value"] == [1, 0], "every other line is solid"
        full_history, budget = t(lang, "chart.full_history"), t(lang, "chart.budget")
        readme = " ".join(readme.split())  # the READMEs wrap their lines; the checks read sentences
        if lang == "en":
            assert f"solid {colour_words[colour[full_history]]['en']} *{full_history}*" in readme
            assert f"solid {colour_words[colour[budget]]['en']} *{budget}*" in readme
            assert f"dashed line, *{dashed[0]}*" in readme
        else:
            assert f"{colour_words[colour[full_history]]['zh-TW']}實線的*{full_history}*" in readme
            assert f"{colour_words[colour[budget]]['zh-TW']}實線的*{budget}*" in readme
            assert f"虛線*{dashed[0]}*" in readme
        clauses = re.split(r"(?<=[.;。；])\s*", readme)
        assert not [c for c in clauses if ("dashed" in c or "虛線" in c) and full_history in c], "the full history is solid"
