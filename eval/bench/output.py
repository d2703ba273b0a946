"""Writing one benchmark's section: printed, and saved as its own markdown report."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from memofs_eval.provenance.stamp import markdown_line


def emit(section: Any, out: Path, entry: str) -> str:
    """``# <title>`` plus the section's markdown and the provenance of ``entry`` (the
    benchmark's module: its commit and the hash of its code), printed and written to
    ``out``; returned."""
    text = f"# {section.title}\n\n{section.markdown}\n\n{markdown_line((entry,))}\n"
    print(text)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    return text
