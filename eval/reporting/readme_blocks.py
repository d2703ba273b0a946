"""Regenerate the README's performance table from the last ``reports/performance.md``.

    python -m memofs_eval.reporting.readme_blocks [--perf reports/performance.md] [--readme README.md]

The table is the headline block that :mod:`memofs_eval.bench.all` writes between
``<!-- headline:start -->`` and ``<!-- headline:end -->``; it replaces whatever lies
between ``<!-- bench:start -->`` and ``<!-- bench:end -->`` in the README. Without those
markers the README is left alone and the table is printed. No figure is typed by hand.
"""

from __future__ import annotations

import argparse
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
README_START, README_END = "<!-- bench:start -->", "<!-- bench:end -->"
HEADLINE_START, HEADLINE_END = "<!-- headline:start -->", "<!-- headline:end -->"
RUN_PREFIX = "Run: "


class MarkerError(ValueError):
    """A marker pair that is missing, repeated or out of order; names file and line."""


def _line_of(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def between(text: str, start: str, end: str, where: str, required: bool = True) -> tuple[int, int] | None:
    """Character span strictly between the ``start`` and ``end`` markers (None when both are
    absent and not ``required``); a lone, repeated or reversed marker is an error."""
    s, e = text.find(start), text.find(end)
    if s < 0 and e < 0:
        if required:
            raise MarkerError(f"{where}: no {start} ... {end} block")
        return None
    for marker, pos in ((start, s), (end, e)):
        if pos < 0:
            other = end if marker == start else start
            raise MarkerError(f"{where}:{_line_of(text, text.find(other))}: {other} without {marker}")
        again = text.find(marker, pos + len(marker))
        if again >= 0:
            raise MarkerError(f"{where}:{_line_of(text, again)}: {marker} appears twice")
    if e < s:
        raise MarkerError(f"{where}:{_line_of(text, e)}: {end} comes before {start} (line {_line_of(text, s)})")
    return s + len(start), e


def readme_block(perf_text: str, perf_name: str = "reports/performance.md") -> str:
    """The generated README block: the headline table plus where it came from."""
    span = between(perf_text, HEADLINE_START, HEADLINE_END, perf_name)
    assert span is not None
    table = perf_text[span[0]:span[1]].strip()
    run = next((ln[len(RUN_PREFIX):].strip() for ln in perf_text.splitlines() if ln.startswith(RUN_PREFIX)), "unknown run")
    return (f"{table}\n\n*Generated from `{perf_name}` ({run}) by `python -m memofs_eval.reporting.readme_blocks`; "
            "regenerate with `make bench`, then that command. Full report, machine and plots: "
            f"`{perf_name}`.*")


def update(readme_text: str, block: str, where: str = "README.md") -> str | None:
    """README text with the bench block replaced; None when the README has no markers."""
    span = between(readme_text, README_START, README_END, where, required=False)
    if span is None:
        return None
    return readme_text[: span[0]] + "\n" + block + "\n" + readme_text[span[1]:]


def main(argv: list[str] | None = None) -> str:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--perf", type=Path, default=REPO / "reports" / "performance.md")
    ap.add_argument("--readme", type=Path, default=REPO / "README.md")
    a = ap.parse_args(argv)
    if not a.perf.is_file():
        raise SystemExit(f"{a.perf}: not found; run `make bench` first")
    block = readme_block(a.perf.read_text(encoding="utf-8"), _display(a.perf))
    text = a.readme.read_text(encoding="utf-8") if a.readme.is_file() else ""
    new = update(text, block, str(a.readme))
    if new is None:
        print(f"{a.readme}: no {README_START} / {README_END} markers; the table is:\n")
        print(block)
    elif new != text:
        a.readme.write_text(new, encoding="utf-8")
        print(f"{a.readme}: performance table updated")
    else:
        print(f"{a.readme}: performance table already current")
    return block


def _display(path: Path) -> str:
    try:
        return path.resolve().relative_to(REPO).as_posix()
    except ValueError:
        return str(path)


if __name__ == "__main__":
    main()
