"""A call followed through the project's files (issue 35): the files it passes through, in
order, and how often control comes back to a file it had left."""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class CallPath:
    files: tuple[str, ...]  # the file executing, each change of file once (calls and returns)

    @property
    def returns(self) -> int:
        """Entries into a file control had already been in."""
        return len(self.files) - len(set(self.files))

    @property
    def entered(self) -> Counter:
        return Counter(self.files)


def follow(fn: Callable[..., Any], *args: Any, packages: tuple[str, ...] = ("memofs",), **kwargs: Any) -> tuple[Any, CallPath]:
    """Run ``fn`` under a profile hook; frames outside ``packages`` (numpy, the standard
    library) are transparent."""
    roots = tuple(str(REPO / p) + "/" for p in packages)
    seq: list[str] = []
    stack: list[str | None] = []

    def own(filename: str) -> str | None:
        return str(Path(filename).relative_to(REPO)) if filename.startswith(roots) else None

    def note(f: str | None) -> None:
        if f is not None and (not seq or seq[-1] != f):
            seq.append(f)

    def hook(frame, event, arg):  # noqa: ANN001 - sys.setprofile's signature
        if event == "call":
            stack.append(own(frame.f_code.co_filename))
            note(stack[-1])
        elif event == "return" and stack:
            stack.pop()
            note(next((s for s in reversed(stack) if s is not None), None))

    sys.setprofile(hook)
    try:
        out = fn(*args, **kwargs)
    finally:
        sys.setprofile(None)
    return out, CallPath(tuple(seq))
