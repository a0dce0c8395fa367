"""Broken batch files, each refused with one BatchFileError: the fixtures in tests/data/bad
and a key-looking `api_key_env`, refused without being echoed."""

from __future__ import annotations

from pathlib import Path

import pytest

from jury.batchfile.loading import load_batch
from jury.errors import BatchFileError
from tests.unit.batchfile.test_loading import BAD, UNSET, refused


def test_key_looking_api_key_env_is_refused_without_echoing_it(tmp_path: Path) -> None:
    path = tmp_path / "batch.yaml"
    path.write_text(
        "judges:\n  - model: openai/x\n    api_key_env: sk-abc123-xyz\n"
        "dimensions: [relevance]\nitems: [{id: a, output: x}]\n"
    )
    message = refused(path)
    assert "judges[0]" in message
    assert "api_key_env" in message
    assert "sk-abc123-xyz" not in message


BAD_BATCHES = [*sorted(p.name for p in BAD.glob("*.yaml")), "json_syntax.json"]


@pytest.mark.parametrize("name", BAD_BATCHES)
def test_every_bad_fixture_is_refused(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(UNSET, raising=False)
    with pytest.raises(BatchFileError):
        load_batch(BAD / name)
