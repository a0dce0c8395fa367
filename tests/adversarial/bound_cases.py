"""Hostile input, second part: sizes that would cost minutes or gigabytes, files that are not
what they claim (other encodings, system files reached by climbing paths, symbolic links),
values whose errors could flood or restyle the terminal, and `jury init` aimed at links.

Every refused case ends with exit 2 and one paragraph, nothing enqueued and nothing recorded.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.adversarial.cases import (
    PANEL,
    accepted,
    batch_with_items,
    case,
    refused,
    submit,
    write,
)

# A path from any case folder up to the root: `{CLIMB}etc/passwd` is /etc/passwd.
CLIMB = "../" * 40
ONE_ITEM = "items: [{id: a, output: x}]\n"


def one_problem(args: list[str], *needles: str, env: dict[str, str] | None = None) -> str:
    """Refused with exactly one problem under the error's first line."""
    refused(args, *needles, env=env)
    output = submit(args, env)[1]
    assert len(output.strip().splitlines()) <= 2, output[:600]
    return output


# --- bounds: what a batch may ask for --------------------------------------------------------


@case("bounds", "exit 2: a 1 MB dimension description (cap 20,000 characters)")
def huge_description(folder: Path) -> None:
    tone = {"name": "tone", "description": "Be kind. " * 120_000}
    spec = {
        "judges": ["openai/gpt-4o-mini"],
        "dimensions": [tone],
        "items": [{"id": "a", "output": "x"}],
    }
    path = write(folder, "b.json", json.dumps(spec))
    output = one_problem(["submit", str(path)], "dimensions[0].description", "20000 characters")
    assert len(output) < 2000


@case("bounds", "exit 2: an item's own criterion of 1 MB")
def huge_item_criterion(folder: Path) -> None:
    item = {"id": "a", "output": "x", "custom_criteria": {"c": {"description": "y" * 1_000_000}}}
    write(folder, "items.jsonl", json.dumps(item) + "\n")
    one_problem(["submit", str(batch_with_items(folder, "items.jsonl"))], "line 1", "description")


@case("bounds", "exit 2: a prompt template of 500,000 characters")
def huge_prompt_template(folder: Path) -> None:
    text = PANEL + f"prompt_template: '{'{output} ' * 70_000}'\n" + ONE_ITEM
    one_problem(["submit", str(write(folder, "b.yaml", text))], "prompt_template", "100000")


@case("bounds", "exit 2: a candidate's system prompt beyond its cap")
def huge_candidate_system(folder: Path) -> None:
    candidate = {"name": "c", "model": "openai/gpt-4o-mini", "system": "s" * 200_000}
    spec = {
        "judges": ["openai/gpt-4o-mini"],
        "dimensions": ["relevance"],
        "candidates": [candidate],
        "items": [{"id": "a", "input": "q"}],
    }
    refused(["submit", str(write(folder, "b.json", json.dumps(spec)))], "system", "100000")


@case("bounds", "exit 2: an HTTP candidate's url of 50,000 characters and 1,000 headers")
def huge_candidate_request(folder: Path) -> None:
    headers = {f"X-{n}": "v" for n in range(1000)}
    for candidate, needle in [
        ({"name": "u", "url": "http://h/" + "p" * 50_000}, "url"),
        ({"name": "h", "url": "http://h/", "headers": headers}, "headers"),
    ]:
        spec = {
            "judges": ["openai/gpt-4o-mini"],
            "dimensions": ["relevance"],
            "candidates": [candidate],
            "items": [{"id": "a", "input": "q"}],
        }
        refused(["submit", str(write(folder, "b.json", json.dumps(spec)))], needle)


@case("bounds", "exit 2 in seconds: a 100,000-judge panel with n: 100", max_mib=256)
def huge_panel(folder: Path) -> None:
    judges = [{"model": "openai/gpt-4o-mini", "name": f"j{i}", "n": 100} for i in range(100_000)]
    spec = {"judges": judges, "dimensions": ["relevance"], "items": [{"id": "a", "output": "x"}]}
    path = write(folder, "b.json", json.dumps(spec))
    one_problem(["submit", str(path), "--dry-run"], "100,000 entries", "JURY_MAX_JUDGES")


@case("bounds", "exit 2: panel × n × items over 10^8 samples stops reading the items")
def samples_over_the_cap(folder: Path) -> None:
    judges = [{"model": "openai/gpt-4o-mini", "name": f"j{i}", "n": 100} for i in range(1000)]
    items = [{"id": f"q{n}", "output": "x"} for n in range(5000)]
    spec = {"judges": judges, "dimensions": ["relevance"], "items": items}
    one_problem(
        ["submit", str(write(folder, "b.json", json.dumps(spec))), "--dry-run"],
        "items[1000]",
        "over 100,000,000 judge samples",
        "JURY_MAX_BATCH_SAMPLES",
    )


@case("bounds", "exit 2, then exit 0: JURY_MAX_BATCH_SAMPLES raises the cap")
def samples_cap_raised(folder: Path) -> None:
    text = "judges: [{model: openai/gpt-4o-mini, n: 5}]\ndimensions: [relevance, quality]\n"
    items = "".join(json.dumps({"id": f"q{n}", "output": "x"}) + "\n" for n in range(10))
    write(folder, "items.jsonl", items)
    path = write(folder, "b.yaml", text + "items: items.jsonl\n")
    args = ["submit", str(path), "--dry-run"]
    one_problem(args, "line 10", "over 90 judge samples", env={"JURY_MAX_BATCH_SAMPLES": "90"})
    accepted(args, "10 items", env={"JURY_MAX_BATCH_SAMPLES": "100"})


@case("bounds", "exit 2: items that bring 1,250 criteria of their own")
def criteria_from_items(folder: Path) -> None:
    lines = []
    for n in range(25):
        own = {f"c{n}_{k}": {"description": "d"} for k in range(50)}
        lines.append(json.dumps({"id": f"q{n}", "output": "x", "custom_criteria": own}))
    write(folder, "items.jsonl", "\n".join(lines) + "\n")
    one_problem(
        ["submit", str(batch_with_items(folder, "items.jsonl"))], "criteria", "JURY_MAX_DIMENSIONS"
    )


@case("bounds", "exit 2: 2,000 dimensions in the batch file")
def too_many_dimensions(folder: Path) -> None:
    dims = [{"name": f"d{n}", "description": "x"} for n in range(2000)]
    spec = {"judges": ["openai/gpt-4o-mini"], "dimensions": dims, "items": []}
    one_problem(["submit", str(write(folder, "b.json", json.dumps(spec)))], "2,000 entries")


@case("bounds", "exit 2: a CSV header of 100,000 columns names at most 12")
def csv_header_flood(folder: Path) -> None:
    header = ",".join(f"col{n}" for n in range(100_000))
    write(folder, "items.csv", header + "\n" + ",".join("x" * 100_000) + "\n")
    output = one_problem(["submit", str(batch_with_items(folder, "items.csv"))], "and 99,988 more")
    assert len(output) < 2000


@case("bounds", "exit 2: a 100,000-character field name is quoted as an excerpt")
def long_value_excerpt(folder: Path) -> None:
    spec = {
        "judges": ["openai/gpt-4o-mini"],
        "dimensions": ["relevance"],
        "items": {"path": "a.csv", "fields": {"k" * 100_000: "output"}},
    }
    path = write(folder, "b.json", json.dumps(spec))
    output = one_problem(["submit", str(path)], "is not an item field")
    assert len(output) < 1500


# --- files: not what they claim, or not where they seem --------------------------------------


@case("bounds", "exit 2, one paragraph: /etc/passwd reached by ../ as JSON Lines")
def climbing_to_a_system_file(folder: Path) -> None:
    output = one_problem(
        ["submit", str(batch_with_items(folder, f"{CLIMB}etc/passwd"))],
        "this is not JSONL",
        "line 1",
    )
    assert "root:" not in output


@case("bounds", "exit 2: /etc/passwd read as CSV never has its first line echoed")
def climbing_to_a_system_file_as_csv(folder: Path) -> None:
    batch = batch_with_items(folder, f"{{path: {CLIMB}etc/passwd, format: csv}}")
    output = one_problem(["submit", str(batch)], "not a header of column names")
    assert "root" not in output and "/bin/" not in output


@case("bounds", "exit 2: a symbolic link to /dev/zero as the items file", max_s=10)
def link_to_dev_zero(folder: Path) -> None:
    (folder / "items.jsonl").symlink_to("/dev/zero")
    one_problem(["submit", str(batch_with_items(folder, "items.jsonl"))], "not a regular file")


@case("bounds", "exit 2: a loop of symbolic links as the batch file")
def link_loop(folder: Path) -> None:
    (folder / "a.yaml").symlink_to(folder / "b.yaml")
    (folder / "b.yaml").symlink_to(folder / "a.yaml")
    one_problem(["submit", str(folder / "a.yaml")], "cannot read")


@case("bounds", "exit 2, one paragraph: a UTF-16 items file is named UTF-16")
def utf16_items(folder: Path) -> None:
    lines = "".join(json.dumps({"id": f"q{n}", "output": "x"}) + "\n" for n in range(30))
    write(folder, "items.jsonl", lines.encode("utf-16"))
    one_problem(["submit", str(batch_with_items(folder, "items.jsonl"))], "UTF-16", "iconv")


@case("bounds", "exit 2, one paragraph: UTF-16 without a byte-order mark")
def utf16_without_mark(folder: Path) -> None:
    lines = "".join(json.dumps({"id": f"q{n}", "output": "x"}) + "\n" for n in range(30))
    write(folder, "items.jsonl", lines.encode("utf-16-le"))
    one_problem(["submit", str(batch_with_items(folder, "items.jsonl"))], "UTF-16", "every other")


@case("bounds", "exit 2: a UTF-32 batch file is named UTF-32")
def utf32_batch(folder: Path) -> None:
    path = write(folder, "b.yaml", (PANEL + ONE_ITEM).encode("utf-32"))
    one_problem(["submit", str(path)], "UTF-32")


@case("bounds", "exit 2, one paragraph: a UTF-16 CSV")
def utf16_csv(folder: Path) -> None:
    write(folder, "items.csv", "id,output\na,x\nb,y\n".encode("utf-16"))
    one_problem(["submit", str(batch_with_items(folder, "items.csv"))], "UTF-16")


@case("bounds", "exit 2, one paragraph: binary data as items")
def binary_items(folder: Path) -> None:
    write(folder, "items.jsonl", bytes(range(256)) * 40)
    one_problem(["submit", str(batch_with_items(folder, "items.jsonl"))], "binary data")


@case("bounds", "exit 2, one paragraph: a Latin-1 text file as items names line 1")
def latin1_items(folder: Path) -> None:
    write(folder, "items.jsonl", "café crème\n".encode("latin-1") * 50)
    one_problem(
        ["submit", str(batch_with_items(folder, "items.jsonl"))], "not JSONL", "line 1", "UTF-8"
    )


@case("bounds", "exit 2, one paragraph: a Markdown file as items")
def prose_items(folder: Path) -> None:
    write(folder, "notes.jsonl", "# Notes\n\nSome prose.\n" * 100)
    one_problem(["submit", str(batch_with_items(folder, "notes.jsonl"))], "not JSONL", "line 1")


@case("bounds", "exit 2: NaN deep in an item names its field")
def nan_names_its_field(folder: Path) -> None:
    write(folder, "items.jsonl", '{"id": "a", "output": "x", "metadata": {"s": [1, NaN]}}\n')
    batch = batch_with_items(folder, "items.jsonl")
    one_problem(["submit", str(batch)], "line 1: metadata.s[1]: NaN is not a number")


@case("bounds", "exit 2: Infinity and 1e999 in a JSON batch name their fields")
def infinity_names_its_field(folder: Path) -> None:
    spec = '{"judges": [{"model": "openai/x", "weight": Infinity}], "dimensions": ["relevance"]}'
    one_problem(["submit", str(write(folder, "b.json", spec))], "judges[0].weight: Infinity")
    spec = '{"judges": ["openai/x"], "max_cost_usd": 1e999, "dimensions": ["relevance"]}'
    one_problem(["submit", str(write(folder, "c.json", spec))], "max_cost_usd: the number 1e999")


@case("bounds", "exit 2: markup in bad values is shown as written, everywhere")
def markup_values_as_written(folder: Path) -> None:
    for field, value, shown in [
        ("judges", '[{model: openai/x, temperature: "[/x]"}]', "'[/x]'"),
        ("mode", '"[bold]x[/bold]"', "'[bold]x[/bold]'"),
        ("dimensions", '["[/x]"]', "'[/x]'"),
        ("aggregation", '{across_models: "[link=http://e.invalid]y[/link]"}', "[link="),
    ]:
        base = {"judges": "[openai/x]", "dimensions": "[relevance]", field: value}
        text = "".join(f"{k}: {v}\n" for k, v in base.items()) + ONE_ITEM
        refused(["submit", str(write(folder, f"{field}.yaml", text))], shown)


# --- jury init -------------------------------------------------------------------------------


@case("bounds", "exit 2: jury init never writes through a dangling link")
def init_dangling_link(folder: Path) -> None:
    (folder / "out").mkdir()
    (folder / "out" / "batch.yaml").symlink_to(folder / "planted.yaml")
    code, output = submit(["init", str(folder / "out")])
    assert code == 2 and "is a symbolic link" in output, output
    assert not (folder / "planted.yaml").exists() and not (folder / "out" / "items.jsonl").exists()


@case("bounds", "exit 2: jury init --force never writes through a link to a file")
def init_link_with_force(folder: Path) -> None:
    (folder / "out").mkdir()
    target = write(folder, "precious.txt", "keep me\n")
    (folder / "out" / "items.jsonl").symlink_to(target)
    code, output = submit(["init", str(folder / "out"), "--force"])
    assert code == 2 and "is a symbolic link" in output, output
    assert target.read_text() == "keep me\n"


@case("bounds", "exit 2, then replaced only with --force: jury init never overwrites")
def init_never_overwrites(folder: Path) -> None:
    write(folder, "batch.yaml", "mine\n")
    code, output = submit(["init", str(folder)])
    assert code == 2 and "does not overwrite" in output
    assert (folder / "batch.yaml").read_text() == "mine\n"
    assert submit(["init", str(folder), "--force"])[0] == 0
    assert (folder / "batch.yaml").read_text().startswith("# A starter batch")
    assert sorted(p.name for p in folder.iterdir()) == ["batch.yaml", "items.jsonl"]
