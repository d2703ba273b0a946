"""The README's quick tour, executed: its output blocks are what the code prints.

    python -m memofs_eval.reporting.readme_tour [--readme README.md] [--check]

Two blocks of the README are runnable:

* ``<!-- tour-library:start/end -->``: the first ``python`` fence is run in a fresh
  interpreter; the ``text`` fence after it is its standard output.
* ``<!-- tour-cli:start/end -->``: a ``text`` fence of ``$ command`` lines, each followed by
  what it printed. The commands run one by one through ``bash`` in an empty directory with
  ``MEMOFS_EMBEDDER=none`` (lexical-only) and the project's ``memofs`` on ``PATH``.

Without ``--check`` the output blocks are rewritten, unless the fresh run differs from them
only in what is masked or settled (so regenerating never churns the README). With ``--check`` nothing is written
and the exit status says whether the committed README matches a fresh run. Only what
cannot repeat is masked in the comparison: memory ids (they hash the write instant; each
distinct id becomes ``mem_#n`` in order of appearance, so a swapped order still differs),
expansion cursors (HMAC under a fresh key) and the temporary directory's path.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from memofs_eval._env import REPO
from memofs_eval.reporting.readme_blocks import between

LIBRARY = ("<!-- tour-library:start -->", "<!-- tour-library:end -->")
CLI = ("<!-- tour-cli:start -->", "<!-- tour-cli:end -->")
SHOWN_ROOT = "/tmp/tour"
FENCE = re.compile(r"```(\w*)\n(.*?)```", re.S)
_ID = re.compile(r"\bmem_[0-9a-f]{16}\b")
_CURSOR = re.compile(r'expand="[^"]+"')


@dataclass(frozen=True)
class Fence:
    lang: str
    body: str
    start: int  # offsets of the body in the whole text
    end: int


def fences(text: str, span: tuple[int, int]) -> list[Fence]:
    a, b = span
    return [Fence(m.group(1), m.group(2), a + m.start(2), a + m.end(2)) for m in FENCE.finditer(text[a:b])]


def _block(text: str, markers: tuple[str, str], where: str) -> list[Fence]:
    span = between(text, *markers, where)
    assert span is not None
    return fences(text, span)


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", MEMOFS_EMBEDDER="none", TOKENIZERS_PARALLELISM="false")
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    return env


def run_library(code: str) -> str:
    """Standard output of ``code`` in a fresh interpreter (it raises on a non-zero exit)."""
    env = _env()
    env.pop("MEMOFS_EMBEDDER")  # the library example chooses its embedder itself
    with tempfile.TemporaryDirectory() as d:
        res = subprocess.run([sys.executable, "-c", code], cwd=d, env=env, capture_output=True, text=True, timeout=600)
    if res.returncode != 0:
        raise RuntimeError(f"README library example failed (exit {res.returncode}):\n{res.stderr}")
    return res.stdout


def commands(session: str) -> list[str]:
    return [line[2:] for line in session.splitlines() if line.startswith("$ ")]


def run_cli(cmds: list[str]) -> str:
    """The session text: each ``$ command`` followed by its standard output and error."""
    out: list[str] = []
    with tempfile.TemporaryDirectory() as d:
        root = os.path.realpath(d)
        for cmd in cmds:
            res = subprocess.run(["bash", "-c", cmd], cwd=root, env=_env(), capture_output=True, text=True, timeout=600)
            out.append(f"$ {cmd}\n")
            shown = (res.stdout + res.stderr).replace(root, SHOWN_ROOT)
            out.append(shown if not shown or shown.endswith("\n") else shown + "\n")
            if res.returncode != 0:
                out.append(f"(exit {res.returncode})\n")
    return "".join(out)


def mask(text: str) -> str:
    """``text`` with what cannot repeat between runs replaced by stable placeholders."""
    seen: dict[str, str] = {}
    text = _ID.sub(lambda m: seen.setdefault(m.group(0), f"mem_#{len(seen) + 1}"), text)
    return _CURSOR.sub('expand="<cursor>"', text)


# The CLI stamps memories with the wall clock and the tour's commands run seconds apart on a
# loaded machine, so a memory's recency prints 1.0 or 0.99999x (half-life 30 days: 0.9999995
# is 1.9 s). Only that clock-dependent last digit is settled; every score still compares.
_SECONDS_OLD = re.compile(r"recency=0\.99999\d\b")


def settle(text: str) -> str:
    """:func:`mask`, and a recency a few seconds old read as 1.0: what two runs share."""
    return _SECONDS_OLD.sub("recency=1.0", mask(text))


def fresh(readme: str, where: str = "README.md") -> str:
    """``readme`` with both output blocks replaced by a fresh run's output."""
    lib = _block(readme, LIBRARY, where)
    code = next((f for f in lib if f.lang == "python"), None)
    out = next((f for f in lib if code is not None and f.lang == "text" and f.start > code.end), None)
    if code is None or out is None:
        raise ValueError(f"{where}: the tour-library block needs a python fence followed by a text fence")
    cli = next((f for f in _block(readme, CLI, where) if f.lang == "text"), None)
    if cli is None or not commands(cli.body):
        raise ValueError(f"{where}: the tour-cli block needs a text fence of `$ command` lines")
    edits = sorted([(out, run_library(code.body)), (cli, run_cli(commands(cli.body)))], key=lambda e: -e[0].start)
    for fence, body in edits:  # back to front, so earlier offsets stay valid
        readme = readme[:fence.start] + body + readme[fence.end:]
    return readme


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--readme", type=Path, default=REPO / "README.md")
    ap.add_argument("--check", action="store_true", help="compare only; exit 1 when the README differs from a fresh run")
    a = ap.parse_args(argv)
    text = a.readme.read_text(encoding="utf-8")
    new = fresh(text, str(a.readme))
    if a.check:
        same = settle(new) == settle(text)
        print(f"{a.readme}: the tour {'matches' if same else 'differs from'} a fresh run")
        return 0 if same else 1
    if settle(new) != settle(text):  # else only ids, cursors or seconds differ: the tour stays as it is
        a.readme.write_text(new, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
