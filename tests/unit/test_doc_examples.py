"""The shell examples runner's reading of a page (tests/doc_examples.py): which lines are
commands, which run in the background, what exit code they owe, and how ports and
placeholders are filled. Running them is tests/integration/test_examples.py's."""

from __future__ import annotations

import pytest

from tests.doc_examples import (
    Line,
    doc_ports,
    exports,
    fill,
    page_lines,
    parse_line,
    printed_batch_id,
    with_ports,
)

PAGE = """# A page

```sh
pip install .                  # not marked: never run
```

<!-- example: runs -->
```sh
jury init my-eval              # a comment
# a comment alone

export JURY_EGRESS_ALLOW=127.0.0.1:8011
jury simulate --port 8011 &    # in the background
jury submit bad.yaml           # exits 2 on a bad file
```

<!-- example: runs -->
```python
print("not shell")
```

<!-- example: runs -->
```sh
jury show <batch-id> <item-id>
```
"""


def test_only_the_marked_shell_blocks_give_commands_with_their_place() -> None:
    lines = page_lines("page.md", PAGE)
    assert [(line.block, line.number, line.command) for line in lines] == [
        (1, 1, "jury init my-eval"),
        (1, 4, "export JURY_EGRESS_ALLOW=127.0.0.1:8011"),
        (1, 5, "jury simulate --port 8011"),
        (1, 6, "jury submit bad.yaml"),
        (2, 1, "jury show <batch-id> <item-id>"),
    ]
    assert [line.background for line in lines] == [False, False, True, False, False]
    assert [line.exit_code for line in lines] == [0, 0, 0, 2, 0]
    assert lines[2].where() == "page.md, block 1, line 5: `jury simulate --port 8011`"


def test_a_shell_and_is_not_a_background_line() -> None:
    line = parse_line("p", 1, 1, "jury list && jury status x")
    assert line == Line("p", 1, 1, "jury list && jury status x")


def test_a_port_the_page_listens_on_is_replaced_everywhere_and_nothing_else() -> None:
    lines = page_lines("page.md", PAGE)
    assert doc_ports(lines) == {8011}
    ports = {8011: 40123}
    assert with_ports("export JURY_EGRESS_ALLOW=127.0.0.1:8011", ports).endswith(":40123")
    assert with_ports("jury simulate --port 8011", ports) == "jury simulate --port 40123"
    assert with_ports("jury x --n 80110 --v 1.8011", ports) == "jury x --n 80110 --v 1.8011"


def test_placeholders_are_filled_and_an_unknown_one_fails() -> None:
    values = {"batch-id": "20261128-1", "item-id": "q1"}
    assert fill("jury show <batch-id> <item-id>", values) == "jury show 20261128-1 q1"
    with pytest.raises(KeyError, match="run-id"):
        fill("jury show <run-id>", values)


def test_exports_and_the_printed_batch_id() -> None:
    assert exports("export A=1 B='two words'") == {"A": "1", "B": "two words"}
    assert exports("jury list") is None
    said = "batch 2026-x: 2 items\nprogress\n2026-x\n"
    assert printed_batch_id("jury submit b.yaml --wait", said) == "2026-x"
    assert printed_batch_id("jury submit b.yaml --dry-run", said) is None
    assert printed_batch_id("jury status 2026-x", said) is None
