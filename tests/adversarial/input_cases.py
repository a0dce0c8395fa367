"""Hostile input to `jury submit`: resources, numbers and names, terminal text, placeholders.

Every refused case must end with exit 2 and one paragraph, nothing enqueued and nothing
recorded (the runner's caller checks the queues and the database afterwards).
"""

from __future__ import annotations

import json
import os
import unicodedata
from io import StringIO
from pathlib import Path

from rich.console import Console

from jury.batchfile.loading import load_batch
from jury.results.formats import verdict_table
from jury.results.terminal import safe_text
from jury.schemas.results import ConsensusMetrics, JudgeEvaluation, Level, Verdict
from tests.adversarial.cases import (
    PANEL,
    accepted,
    batch_with_items,
    case,
    refused,
    submit,
    write,
)

# --- resources: bounded memory and time whatever the input ---------------------------------


def in_item_metadata(lines: list[str]) -> str:
    """A batch whose only item's metadata holds these YAML lines: a place any value is
    accepted, so only the alias limit stands between them and the machine."""
    metadata = "".join(f"      {line}\n" for line in lines)
    return PANEL + "items:\n  - id: a\n    output: x\n    metadata:\n" + metadata


@case("resources", "exit 2: YAML aliases repeat more than 10,000 nodes (9^9 in all)")
def yaml_alias_bomb(folder: Path) -> None:
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for level in range(1, 10):
        refs = ", ".join([f"*a{level - 1}"] * 9)
        lines.append(f"a{level}: &a{level} [{refs}]")
    path = write(folder, "bomb.yaml", in_item_metadata(lines))
    refused(["submit", str(path), "--dry-run"], "YAML aliases repeat more than 10,000 nodes")


@case("resources", "exit 2: merge keys (<<: *x) count as aliases")
def yaml_merge_key_bomb(folder: Path) -> None:
    lines = ["m0: &m0 {k0: 1, k1: 2, k2: 3, k3: 4, k4: 5, k5: 6, k6: 7, k7: 8}"]
    for level in range(1, 12):
        merged = ", ".join(f"x{n}: *m{level - 1}" for n in range(6))
        lines.append(f"m{level}: &m{level} {{<<: *m{level - 1}, {merged}}}")
    refused(["submit", str(write(folder, "merge.yaml", in_item_metadata(lines)))], "aliases")


@case("resources", "exit 2: an alias inside its own anchor is refused, not looped")
def yaml_recursive_alias(folder: Path) -> None:
    path = write(folder, "loop.yaml", PANEL + "loop: &me [1, *me]\nitems: [{id: a, output: x}]\n")
    refused(["submit", str(path)], "alias *me refers to an anchor that is not defined before it")


@case("resources", "exit 2: YAML nested deeper than 32 levels")
def yaml_deep_nesting(folder: Path) -> None:
    path = write(folder, "deep.yaml", PANEL + "x: " + "[" * 20000 + "]" * 20000 + "\nitems: []\n")
    refused(["submit", str(path)], "nest deeper than 32 levels", "JURY_MAX_NESTING_DEPTH")


@case("resources", "exit 2: JSON nested 200,000 deep, no RecursionError")
def json_deep_nesting(folder: Path) -> None:
    path = write(folder, "deep.json", '{"x": ' + "[" * 200_000 + "]" * 200_000 + "}")
    refused(["submit", str(path)], "deep.json", "nest deeper than 32 levels")


@case("resources", "exit 2: an item line nested 100,000 deep names its line")
def jsonl_deep_item(folder: Path) -> None:
    nested = '{"id": "a", "output": "x", "metadata": {"m": ' + "[" * 100_000 + "]" * 100_000
    write(folder, "items.jsonl", '{"id": "ok", "output": "x"}\n' + nested + "}}\n")
    refused(["submit", str(batch_with_items(folder, "items.jsonl"))], "line 2", "nest deeper")


@case("resources", "exit 2 at once: a FIFO as the items file is not opened for ever", max_s=10)
def fifo_items(folder: Path) -> None:
    os.mkfifo(folder / "items.jsonl")
    batch = batch_with_items(folder, "items.jsonl")
    refused(["submit", str(batch)], "items.jsonl", "a FIFO, socket or device, not a regular file")


@case("resources", "exit 2 at once: /dev/zero as the items file is not read", max_s=10)
def dev_zero_items(folder: Path) -> None:
    refused(["submit", str(batch_with_items(folder, "/dev/zero"))], "/dev/zero", "not a regular")


@case("resources", "exit 2 at once: /dev/zero as the batch file is not read", max_s=10)
def dev_zero_batch(folder: Path) -> None:
    refused(["submit", "/dev/zero"], "/dev/zero", "not a regular file")


@case("resources", "exit 2: a directory as the items file")
def directory_items(folder: Path) -> None:
    (folder / "items").mkdir()
    refused(["submit", str(batch_with_items(folder, "items"))], "is a directory")


@case("resources", "exit 0: a 10 MB inline JSON batch is read as JSON, fast", max_mib=128)
def inline_json_10mb(folder: Path) -> None:
    items = [{"id": f"q{n}", "output": "an answer of some length " * 20} for n in range(19_000)]
    spec = {"name": "big", "judges": ["openai/gpt-4o-mini"], "dimensions": ["relevance"]}
    path = write(folder, "big.json", json.dumps({**spec, "items": items}))
    assert path.stat().st_size > 10_000_000
    accepted(["submit", str(path), "--dry-run"], "19,000 items")


@case("resources", "exit 2: a batch file over JURY_MAX_DOCUMENT_BYTES")
def document_over_limit(folder: Path) -> None:
    path = write(folder, "batch.yaml", PANEL + "items: [{id: a, output: " + "x" * 5000 + "}]\n")
    env = {"JURY_MAX_DOCUMENT_BYTES": "4096"}
    refused(["submit", str(path)], "over the limit of 4,096", "JURY_MAX_DOCUMENT_BYTES", env=env)


@case("resources", "exit 2: a 50 MB line without an end costs its bound, not 50 MB", max_mib=24)
def endless_line(folder: Path) -> None:
    with (folder / "items.jsonl").open("wb") as handle:
        handle.write(b'{"id": "a", "output": "')
        for _ in range(50):
            handle.write(b"z" * 1_000_000)
    batch = batch_with_items(folder, "items.jsonl", "max_item_chars: 1000\n")
    refused(["submit", str(batch)], "line 1", "far over max_item_chars")


@case("resources", "exit 2: a CSV cell of 20 MB", max_mib=24)
def csv_huge_field(folder: Path) -> None:
    with (folder / "items.csv").open("w") as handle:
        handle.write('id,output\na,"')
        for _ in range(20):
            handle.write("y" * 1_000_000)
        handle.write('"\n')
    batch = batch_with_items(folder, "items.csv", "max_item_chars: 1000\n")
    refused(["submit", str(batch)], "items.csv", "far over max_item_chars")


@case("resources", "exit 2: an integer of 5,000 digits")
def huge_integer(folder: Path) -> None:
    path = write(folder, "batch.json", '{"judges": ["openai/x"], "max_item_chars": 1' + "0" * 5000)
    refused(["submit", str(path)], "batch.json", "thousands of digits")


@case("resources", "exit 2: NaN in an item's metadata (JSON Lines)")
def nan_in_item(folder: Path) -> None:
    write(folder, "items.jsonl", '{"id": "a", "output": "x", "metadata": {"v": NaN}}\n')
    refused(["submit", str(batch_with_items(folder, "items.jsonl"))], "line 1", "NaN is not")


@case("resources", "exit 2: 1e400 in an item's metadata is not infinity")
def overflow_in_item(folder: Path) -> None:
    write(folder, "items.jsonl", '{"id": "a", "output": "x", "metadata": {"v": 1e400}}\n')
    batch = batch_with_items(folder, "items.jsonl")
    refused(["submit", str(batch)], "line 1", "too large to be a finite number")


@case("resources", "exit 2: a Parquet file of garbage bytes")
def parquet_garbage(folder: Path) -> None:
    write(folder, "items.parquet", b"PAR1" + os.urandom(2000))
    refused(["submit", str(batch_with_items(folder, "items.parquet"))], "not a Parquet file")


# --- numbers and names -----------------------------------------------------------------------


ONE_ITEM = "items: [{id: a, output: x}]\n"


def custom(scale: str = "{min: 1, max: 5}", threshold: str = "3") -> str:
    tone = f"name: tone, description: kind?, scale: {scale}, threshold: {threshold}"
    return f"dimensions: [{{{tone}}}]\n"


def refused_batch(folder: Path, text: str, *needles: str, name: str = "batch.yaml") -> None:
    refused(["submit", str(write(folder, name, text))], *needles)


@case("names", "exit 2: a scale bound of .inf")
def scale_infinity(folder: Path) -> None:
    text = "judges: [openai/x]\n" + custom("{min: 1, max: .inf}") + "items: [{id: a, output: x}]\n"
    refused_batch(folder, text, "dimensions[0].scale.max", "finite number")


@case("names", "exit 2: a scale bound of 1e308")
def scale_huge(folder: Path) -> None:
    text = (
        "judges: [openai/x]\n" + custom("{min: 1, max: 1.0e+308}") + "items: [{id: a, output: x}]\n"
    )
    refused_batch(folder, text, "dimensions[0].scale.max", "less than or equal to 1000000")


@case("names", "exit 2: a weight of 1e308")
def weight_huge(folder: Path) -> None:
    text = "judges: [{model: openai/x, weight: 1.0e+308}]\ndimensions: [relevance]\n" + ONE_ITEM
    refused_batch(folder, text, "judges[0].weight")


@case("names", "exit 2: a JSON threshold of NaN")
def threshold_nan(folder: Path) -> None:
    tone = '{"name": "tone", "description": "d", "threshold": NaN}'
    spec = f'{{"judges": ["openai/x"], "dimensions": [{tone}], "items": []}}'
    refused_batch(folder, spec, "NaN is not a number jury accepts", name="batch.json")


@case("names", "exit 2: a criterion named ../etc")
def criterion_path(folder: Path) -> None:
    text = "judges: [openai/x]\ndimensions: [{name: ../etc, description: d}]\n" + ONE_ITEM
    refused_batch(folder, text, "criterion name '../etc' may hold only letters")


@case("names", "exit 2: two ids that differ by an invisible character")
def invisible_duplicate(folder: Path) -> None:
    write(
        folder, "items.jsonl", '{"id": "q1", "output": "x"}\n{"id": "q\\u200b1", "output": "y"}\n'
    )
    refused(["submit", str(batch_with_items(folder, "items.jsonl"))], "line 2", "q\\u200b1")


@case("names", "exit 2: an id with a right-to-left override")
def rtl_override_id(folder: Path) -> None:
    write(folder, "items.jsonl", '{"id": "invoice-\\u202egnp.exe", "output": "x"}\n')
    refused(["submit", str(batch_with_items(folder, "items.jsonl"))], "\\u202e", "direction")


@case("names", "exit 2: an id in decomposed (NFD) form")
def nfd_id(folder: Path) -> None:
    item = json.dumps({"id": unicodedata.normalize("NFD", "réponse"), "output": "x"})
    write(folder, "items.jsonl", item + "\n")
    refused(["submit", str(batch_with_items(folder, "items.jsonl"))], "NFC")


@case("names", "exit 2: a batch name with a window-title escape sequence")
def batch_name_escape(folder: Path) -> None:
    text = 'name: "demo\\e]0;owned\\a"\n' + PANEL + "items: [{id: a, output: x}]\n"
    refused_batch(folder, text, "batch name", "\\x1b]0;owned\\x07")


@case("names", "exit 2: --batch-id with quotes and a semicolon")
def batch_id_quotes(folder: Path) -> None:
    batch = batch_with_items(folder, "[{id: a, output: x}]")
    refused(["submit", str(batch), "--batch-id", 'x"; rm -rf ~'], "--batch-id", "ASCII letters")


@case("names", "exit 2: --batch-id with slashes")
def batch_id_slashes(folder: Path) -> None:
    batch = batch_with_items(folder, "[{id: a, output: x}]")
    refused(["submit", str(batch), "--batch-id", "../../etc/passwd"], "--batch-id")


@case("names", "exit 2: a judge name with a line break")
def judge_name_newline(folder: Path) -> None:
    text = 'judges: [{model: openai/x, name: "a\\nb"}]\ndimensions: [relevance]\n' + ONE_ITEM
    refused_batch(folder, text, "judge name")


# --- terminal: text from a batch printed as text ---------------------------------------------


@case("terminal", "exit 0: a batch name of markup is printed as written in the plan")
def markup_batch_name(folder: Path) -> None:
    text = (
        'name: "[/] [link=http://evil.invalid]x[/link] [bold]"\n'
        + PANEL
        + "items: [{id: a, output: x}]\n"
    )
    accepted(
        ["submit", str(write(folder, "b.yaml", text)), "--dry-run"],
        "[link=http://evil.invalid]x[/link]",
    )


@case("terminal", "exit 2: an error that repeats markup does not crash printing it")
def markup_in_error(folder: Path) -> None:
    text = 'judges: [{model: openai/x, name: "[/bold]x"}]\ndimensions: [relevance]\n' + ONE_ITEM
    refused_batch(folder, text, "[/bold]x")


@case("terminal", "exit 2: a markup key in the batch file is named as written")
def markup_unknown_key(folder: Path) -> None:
    refused_batch(
        folder, PANEL + '"[red]evil[/]": 1\nitems: [{id: a, output: x}]\n', "[red]evil[/]"
    )


@case("terminal", "exit 2: a duplicate markup id is repeated as written")
def markup_duplicate_id(folder: Path) -> None:
    items = '[{id: "[/x]", output: a}, {id: "[/x]", output: b}]'
    refused(["submit", str(batch_with_items(folder, items))], "duplicate item id '[/x]'")


@case("terminal", "exit 2: an escape character in YAML is shown escaped")
def escape_in_yaml(folder: Path) -> None:
    refused_batch(folder, PANEL + "name: evil\x1b[2J\nitems: []\n", "not valid YAML")


@case("terminal", "verdict table: markup ids and criteria shown as written")
def markup_in_verdict_table(folder: Path) -> None:
    metrics = ConsensusMetrics(
        final_score=4.0,
        cross_model_std=0.0,
        consensus_level=Level.HIGH,
        confidence=Level.HIGH,
        flag_for_review=False,
    )
    evaluation = JudgeEvaluation(samples=[4.0], aggregated_score=4.0, within_model_std=0.0)
    verdicts = [
        Verdict(
            item_id=item,
            criterion_id="tone",
            llm_evaluations={"[/j]": evaluation},
            consensus_metrics=metrics,
            passed=True,
            threshold=3.5,
        )
        for item in ("[/]", "[bold]q[/bold]", "a\x1b[2Jb")  # as an older store might hold
    ]
    table, _ = verdict_table(verdicts, ["[/j]"], safe_text("[red]batch[/] — verdicts"))
    out = StringIO()
    Console(file=out, width=200, force_terminal=True).print(table)
    shown = out.getvalue()
    assert "[bold]q[/bold]" in shown and "[red]batch[/]" in shown and "a\\x1b[2Jb" in shown
    assert "\x1b[2J" not in shown


# --- placeholders ------------------------------------------------------------------------------


def judge_batch(folder: Path, judge: str) -> Path:
    return write(
        folder,
        "batch.yaml",
        f"judges: [{judge}]\ndimensions: [relevance]\nitems: [{{id: a, output: x}}]\n",
    )


@case("placeholders", "stored as written: the value is in no stored field")
def placeholder_stored_as_written(folder: Path) -> None:
    os.environ["JURY_CORPUS_SECRET"] = "sk-corpus-secret-0123456789"
    # The egress policy lets the variable go to that host (and to no other).
    os.environ["JURY_KEY_HOSTS"] = '{"JURY_CORPUS_SECRET": ["host"]}'
    try:
        judge = "{model: openai/x, api_base: 'https://u:${JURY_CORPUS_SECRET}@host/v1'}"
        stored = load_batch(judge_batch(folder, judge)).config.model_dump_json()
    finally:
        del os.environ["JURY_CORPUS_SECRET"], os.environ["JURY_KEY_HOSTS"]
    assert "${JURY_CORPUS_SECRET}" in stored and "sk-corpus-secret" not in stored


@case("placeholders", "exit 2: a variable that is unset, with no default")
def placeholder_unset(folder: Path) -> None:
    judge = "{model: openai/x, api_base: '${JURY_CORPUS_NEVER_SET_9}'}"
    refused(["submit", str(judge_batch(folder, judge))], "JURY_CORPUS_NEVER_SET_9 is not set")


@case("placeholders", "exit 2: a malformed placeholder")
def placeholder_malformed(folder: Path) -> None:
    judge = "{model: openai/x, api_base: 'http://${1BAD}/v1'}"
    refused(["submit", str(judge_batch(folder, judge))], "judges[0]", "must read ${NAME}")


@case("placeholders", "exit 2: an expanded api_base that is no URL, its value not echoed")
def placeholder_bad_url(folder: Path) -> None:
    judge = "{model: openai/x, api_base: '${JURY_CORPUS_URL}'}"
    env = {"JURY_CORPUS_URL": "secret-value-not-a-url"}
    batch = str(judge_batch(folder, judge))
    refused(["submit", batch], "judges[0]", "http(s) URL", "placeholders expanded", env=env)
    assert "secret-value-not-a-url" not in submit(["submit", batch], env)[1]


@case("placeholders", "exit 2: a placeholder model needs a name")
def placeholder_model_without_name(folder: Path) -> None:
    judge = "{model: 'openai/${JURY_CORPUS_MODEL}'}"
    refused(["submit", str(judge_batch(folder, judge))], "give the judge a `name`")
