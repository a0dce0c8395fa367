"""Trying jury on one's own data: `jury init` writes a starter batch file and items file that
`jury submit` accepts as they are, and `jury submit --limit N` judges only the first N items."""

from __future__ import annotations

import dataclasses
import json
import os
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
    """Write the starter batch and items into `folder`; refuses to overwrite unless `force`,
    and never writes through a symbolic link (a dangling one named like a starter file would
    otherwise create its target wherever it points)."""
    paths = [folder / BATCH_FILE, folder / ITEMS_FILE]
    links = [str(p) for p in paths if p.is_symlink()]
    if links:
        what = "is a symbolic link" if len(links) == 1 else "are symbolic links"
        raise JuryError(
            f"{' and '.join(links)} {what}: jury init never writes through one. Remove it, "
            "or run jury init in another folder (`jury init FOLDER`)."
        )
    existing = [str(p) for p in paths if os.path.lexists(p)]
    if existing and not force:
        raise JuryError(
            f"{' and '.join(existing)} already exist{'s' if len(existing) == 1 else ''}: "
            "jury init does not overwrite files. Run it in an empty folder (`jury init "
            "FOLDER`), or pass --force to replace them."
        )
    items = "".join(json.dumps(item) + "\n" for item in STARTER_ITEMS)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for path, text in zip(paths, (STARTER_BATCH, items), strict=True):
            _write_new(path, text)
    except OSError as exc:
        raise JuryError(
            f"cannot write the starter files in {folder}: {exc.strerror or exc}"
        ) from None
    return paths


def _write_new(path: Path, text: str) -> None:
    """`text` into a file created afresh beside `path` (O_EXCL and O_NOFOLLOW: never an
    existing file, never through a link), then renamed over `path`, which replaces a name,
    never a link's target."""
    fresh = path.with_name(f".{path.name}.{os.getpid()}.new")
    fd = os.open(fresh, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(fresh, path)
    except BaseException:
        fresh.unlink(missing_ok=True)
        raise


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
