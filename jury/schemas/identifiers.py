"""One rule for every name a user gives jury: item ids, criterion, judge and batch names, and
`--batch-id`. Pure functions.

An identifier must be printable, in Unicode NFC form, free of invisible and direction-changing
characters, and without spaces at either end: two ids that look the same on a screen must be
the same id, and no id may reorder or hide the text around it where it is shown.
"""

from __future__ import annotations

import html
import re
import unicodedata

# Characters that `str.isprintable()` accepts but that show nothing (fillers, blank
# patterns, joiners and variation selectors). Control, format (invisible and bidi controls
# such as U+200B, U+202E, U+2066), separator, private-use and unassigned characters are
# already non-printable.
_INVISIBLE_PRINTABLE = frozenset(
    [
        *(0x034F, 0x115F, 0x1160, 0x17B4, 0x17B5, 0x2800, 0x3164, 0xFFA0),
        *range(0xFE00, 0xFE10),
        *range(0xE0100, 0xE01F0),
    ]
)
# A batch id names Redis keys, a report's file name and a shell argument: plain ASCII only.
BATCH_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")


def is_hidden(char: str) -> bool:
    """True for a character a terminal would not show as itself: controls, format and bidi
    characters, separators other than the plain space, and invisible fillers."""
    return not char.isprintable() or ord(char) in _INVISIBLE_PRINTABLE


def escaped(char: str) -> str:
    """A hidden character written out as its escape (`\\x1b`, `\\u202e`, `\\U000e0041`)."""
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def shown_escaped(text: str) -> str:
    """The text with every hidden character escaped: how an identifier is quoted in errors."""
    return "".join(escaped(c) if is_hidden(c) else c for c in text)


def html_text(value: object) -> str:
    """Untrusted text for an HTML page: every hidden character written out as its escape, as on
    the terminal (line breaks kept: the page wraps them), then HTML-escaped, quotes included, so
    it is safe both as an element's text and as an attribute's value."""
    text = "" if value is None else str(value)
    lines = text.replace("\r\n", "\n").split("\n")
    return html.escape("\n".join(shown_escaped(line) for line in lines))


def identifier_problem(text: str, what: str) -> str | None:
    """Why `text` cannot be a `what` (item id, criterion name, …), or None if it can."""
    if not text:
        return f"{what} is empty"
    hidden = sorted({escaped(c) for c in text if is_hidden(c)})
    if hidden:
        return (
            f"{what} '{shown_escaped(text)}' holds invisible, control or direction-changing "
            f"characters ({', '.join(hidden)}); two such names could look alike or reorder "
            "the text around them"
        )
    if text != text.strip():
        return f"{what} '{text}' starts or ends with a space"
    if not unicodedata.is_normalized("NFC", text):
        return (
            f"{what} '{text}' is not in Unicode NFC form (it holds decomposed accents): "
            "normalise it, e.g. unicodedata.normalize('NFC', text) in Python"
        )
    return None


def checked_identifier(text: str, what: str) -> str:
    """`text` if it is a good `what`; ValueError (a validation error) saying why not."""
    problem = identifier_problem(text, what)
    if problem:
        raise ValueError(problem)
    return text


def batch_id_problem(batch_id: str) -> str | None:
    """Why `batch_id` cannot name a batch, or None if it can."""
    if BATCH_ID.fullmatch(batch_id):
        return None
    return (
        f"batch id '{shown_escaped(batch_id)[:120]}' may hold only ASCII letters, digits, "
        "'_', '.' and '-', start with a letter or digit, and be at most 100 characters"
    )
