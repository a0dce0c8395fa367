"""Untrusted text on the terminal: one function for everything that comes from a batch file,
an item or a provider (ids, names, error messages, reasoning).

Rich reads `[bold]…[/]` in plain strings as markup: an item id `[/x]` would crash a table, and
`[link=…]` would plant a link. An escape sequence (`\\x1b[2J`, `\\x1b]0;title\\x07`) would
clear the screen or retitle the window, and a right-to-left override would reorder what
follows it. So such text is always printed as a `Text` (never parsed as markup), with every
control, invisible or direction-changing character written out as its escape.
"""

from __future__ import annotations

from rich.text import Text

from jury.schemas.identifiers import shown_escaped


def safe_text(value: object, style: str = "", *, multiline: bool = False) -> Text:
    """`value` as text to print: no markup read, hidden characters made visible (`\\x1b`,
    `\\u202e`). With `multiline`, line breaks stay line breaks (an error's own paragraph);
    otherwise they too are shown as `\\n`, so one value stays on one line."""
    text = "" if value is None else str(value)
    if multiline:
        shown = "\n".join(shown_escaped(line) for line in text.split("\n"))
    else:
        shown = shown_escaped(text)
    return Text(shown, style=style)
