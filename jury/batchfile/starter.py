"""Trying jury on one's own data: `jury init` writes a starter batch file and items file that
`jury submit` accepts as they are, and `jury submit --limit N` judges only the first N items."""

from __future__ import annotations

import dataclasses
import json
from itertools import islice
from pathlib import Path

from jury.batchfile.loading import BatchSource, ItemStats
from jury.errors import JuryError
from jury.schemas.item_dimensions import n_cells

BATCH_FILE = "batch.yaml"
ITEMS_FILE = "items.jsonl"

STARTER_BATCH = """\
# A starter batch: 4 answers × 2 dimensions × 2 judges × 2 samples = 32 judgments.
# As written it uses two personas of the bundled judge simulator, so it runs with no key:
#   export JURY_EGRESS_ALLOW=127.0.0.1:8011   # workers reach loopback only when allowed
#   jury simulate --port 8011 &      # the fake judge server
#   jury worker &                    # a worker (Redis at JURY_BROKER_URL)
#   jury submit batch.yaml --wait    # judge, follow, print the verdicts
# For real judges, replace the panel with models LiteLLM knows, their keys in the workers'
# environment (OPENAI_API_KEY, ANTHROPIC_API_KEY, …), for example:
#   - {model: openai/gpt-4o-mini, n: 3}
#   - {model: anthropic/claude-haiku-4-5, n: 3}
# and, to cap the spend, `max_cost_usd: 5` (every judge then needs a known price: LiteLLM's,
# or input_cost_per_token/output_cost_per_token declared on the judge).
name: starter
judges:
  - model: openai/balanced
    n: 2
    api_base: ${JURY_SIMULATOR_URL:-http://127.0.0.1:8011/v1}
  - model: openai/strict
    n: 2
    api_base: ${JURY_SIMULATOR_URL:-http://127.0.0.1:8011/v1}
dimensions:
  - relevance                      # a built-in criterion
  - name: tone                     # a criterion of your own: a name and a description
    description: Is the tone professional and kind? 5 = warm and professional; 1 = rude.
    scale: {min: 1, max: 5}
    threshold: 3.5
items: items.jsonl                 # one JSON object per line: id and output required
"""

STARTER_ITEMS = [
    {
        "id": "refund-1",
        "input": "How do I get a refund for a duplicate charge?",
        "output": "Sorry about that! Open Billing > History, pick the duplicate and press "
        "Refund; it reaches your card in 3-5 business days.",
    },
    {
        "id": "refund-2",
        "input": "How do I get a refund for a duplicate charge?",
        "output": "Refunds are not something we discuss.",
    },
    {
        "id": "password-1",
        "input": "I forgot my password.",
        "output": "Use 'Forgot password' on the sign-in page and follow the link we email you.",
    },
    {
        "id": "export-1",
        "input": "Can I export my data?",
        "output": "Yes: Settings > Privacy > Export gives you a ZIP of everything within a day.",
    },
]


def write_starter(folder: Path, force: bool = False) -> list[Path]:
    """Write the starter batch and items into `folder`; refuses to overwrite unless `force`."""
    paths = [folder / BATCH_FILE, folder / ITEMS_FILE]
    existing = [str(p) for p in paths if p.exists()]
    if existing and not force:
        raise JuryError(
            f"{' and '.join(existing)} already exist{'s' if len(existing) == 1 else ''}: "
            "jury init does not overwrite files. Run it in an empty folder (`jury init "
            "FOLDER`), or pass --force to replace them."
        )
    try:
        folder.mkdir(parents=True, exist_ok=True)
        paths[0].write_text(STARTER_BATCH, encoding="utf-8")
        paths[1].write_text(
            "".join(json.dumps(item) + "\n" for item in STARTER_ITEMS), encoding="utf-8"
        )
    except OSError as exc:
        raise JuryError(f"cannot write the starter files in {folder}: {exc.strerror}") from None
    return paths


def first_items(source: BatchSource, limit: int) -> BatchSource:
    """The same batch with only its first `limit` items (all of them were validated)."""
    if limit >= source.stats.count:
        return source
    items = list(islice(source.items(), limit))
    # The plan's token estimate needs the items' size: their share of the whole file's.
    chars = source.stats.text_chars * len(items) // max(source.stats.count, 1)
    return dataclasses.replace(
        source,
        inline_items=items,
        items_file=None,
        stats=ItemStats(len(items), chars, cells=n_cells(source.config, items)),
    )
