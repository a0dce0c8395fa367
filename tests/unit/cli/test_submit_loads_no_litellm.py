"""`jury submit --dry-run` reads prices from the JSON file the litellm package ships
(jury.batchfile.model_catalog) and never imports litellm: that import alone is some 190 MB
and seconds of start-up, which the producer has no use for."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT

SCRIPT = """
import sys
from jury.cli.main import main
try:
    sys.argv = ["jury", "submit", sys.argv[1], "--dry-run"]
    main()
except SystemExit as exc:
    assert not exc.code, exc.code
print("litellm modules:", sorted(m for m in sys.modules if m.split(".")[0] == "litellm"))
"""


def test_a_dry_run_prices_the_batch_without_importing_litellm(tmp_path: Path) -> None:
    (tmp_path / "items.jsonl").write_text('{"id": "a", "input": "Q?", "output": "A."}\n')
    batch = tmp_path / "batch.yaml"
    batch.write_text(
        "name: priced\njudges: [{model: openai/gpt-4o-mini, n: 3}]\n"
        "dimensions: [relevance, accuracy]\nitems: items.jsonl\n"
    )
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(batch)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "$" in done.stdout  # the plan's estimate, from LiteLLM's prices
    assert done.stdout.strip().endswith("litellm modules: []"), done.stdout
