"""MkDocs hook: pages listed under `extra.optional_nav` join the nav only when their file
exists, so pages other work adds later (trust.md, batch-api.md, …) appear without editing the
nav, and a missing one does not fail `mkdocs build --strict`."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def on_config(config: Any) -> Any:
    docs = Path(config["docs_dir"])
    optional = config["extra"].get("optional_nav") or []
    nav = config["nav"]
    for entry in optional:
        section, title, page = entry["section"], entry["title"], entry["page"]
        if not (docs / page).is_file():
            continue
        for item in nav:
            if isinstance(item, dict) and section in item:
                item[section].append({title: page})
                break
        else:
            nav.append({section: [{title: page}]})
    return config
