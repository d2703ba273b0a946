"""Writing one benchmark's section: printed, and saved as its own markdown report."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def emit(section: Any, out: Path) -> str:
    """``# <title>`` plus the section's markdown, printed and written to ``out``; returned."""
    text = f"# {section.title}\n\n{section.markdown}\n"
    print(text)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    return text
