"""Imports go one way: down the stages inside each package, and harness -> datasets -> pipeline.

Every import in every module counts, function-level ones included (a late import still ties
two modules together). ``from pkg import name`` counts as an import of ``pkg.name`` when that
is a module, else of ``pkg``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from memofs_eval.provenance.code_closure import imports  # the same import graph provenance follows
from support import REPO_ROOT

ROOT = REPO_ROOT
PACKAGES = {"memofs": ROOT / "memofs", "memofs_eval": ROOT / "eval", "memofs_datasets": ROOT / "datasets"}
# each package's stages, bottom first: a module may import its own stage and the ones before it.
# memofs and the harness stage by folder; datasets (a flat package beside its data folders) by module.
STAGES: dict[str, tuple[str, ...]] = {
    "memofs": ("text", "files", "signals", "graph", "ranking", "store", "surfaces"),
    "memofs_datasets": ("dataset", "validation", "loader", "writer", "format", "protocols", "texts", "shared", "beir", "locomo",
                        "longmemeval", "trec"),
    "memofs_eval": ("provenance", "execution", "inputs", "runs", "scoring", "experiments", "reporting", "studies",
                    "bench"),
}
# top-level modules outside the stages: each package itself and its entry points (they may import
# any stage); the ``memofs`` package root and ``memofs_eval._env`` (process set-up), which import
# nothing of the project, sit below all
ENTRY_POINTS = {"memofs", "memofs.__main__", "memofs_datasets", "memofs_eval", "memofs_eval.cli",
                "memofs_eval.regenerate"}
BELOW_ALL = {"memofs", "memofs_eval._env"}
# data folders of datasets/ (a bundled project tree with its own Python files), not modules
DATA_FOLDERS = ("memofs_datasets.agent-memory", "memofs_datasets.tiny")
# packages, bottom first: the harness may use datasets and the pipeline, never the reverse
PACKAGE_ORDER = ("memofs", "memofs_datasets", "memofs_eval")


def modules(packages: dict[str, Path]) -> dict[str, Path]:
    out = {}
    for name, folder in packages.items():
        for path in folder.rglob("*.py"):
            rel = path.relative_to(folder).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            module = ".".join([name, *parts])
            if not module.startswith(DATA_FOLDERS):
                out[module] = path
    return out



def graph(packages: dict[str, Path]) -> dict[str, set[str]]:
    mods = modules(packages)
    return {m: imports(m, p, set(mods)) for m, p in mods.items()}


def stage(module: str) -> int | None:
    parts = module.split(".")
    stages = STAGES.get(parts[0], ())
    if len(parts) < 2 or parts[1] not in stages:
        return None
    return stages.index(parts[1])


def _allowed_within(src: str, dst: str) -> bool:
    """An import inside one package: down (or across) its stages, or one of the fixed exceptions."""
    if src in ENTRY_POINTS or dst in BELOW_ALL:
        return True
    si, sj = stage(src), stage(dst)
    return si is not None and sj is not None and sj <= si


def upward(g: dict[str, set[str]]) -> list[str]:
    bad = []
    for src, dsts in sorted(g.items()):
        for dst in sorted(dsts):
            top_src, top_dst = src.split(".")[0], dst.split(".")[0]
            pi, pj = PACKAGE_ORDER.index(top_src), PACKAGE_ORDER.index(top_dst)
            if pj > pi:
                bad.append(f"{src} -> {dst} (package {top_dst} is above {top_src})")
            elif pi == pj and not _allowed_within(src, dst):
                stages = STAGES[top_src]
                si, sj = stage(src), stage(dst)
                bad.append(f"{src} -> {dst} (stage {stages[sj] if sj is not None else '?'} is above "
                           f"{stages[si] if si is not None else 'the top level'})")
    return bad


def cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected component with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(g.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(g):
        if v not in index:
            visit(v)
    return out


def test_every_module_lives_in_a_stage() -> None:
    loose = [m for m in modules(PACKAGES) if m not in ENTRY_POINTS | BELOW_ALL and stage(m) is None]
    assert loose == []


def test_below_all_modules_import_nothing_of_the_project() -> None:
    g = graph(PACKAGES)
    assert {m: sorted(g[m]) for m in BELOW_ALL if g[m]} == {}


def test_imports_go_down_the_pipeline() -> None:
    assert upward(graph(PACKAGES)) == []


def test_no_import_cycles() -> None:
    assert cycles(graph(PACKAGES)) == []


def _write(root: Path, files: dict[str, str]) -> dict[str, Path]:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return {"memofs": root / "memofs"}


@pytest.mark.parametrize("late", [False, True])
def test_the_checks_catch_an_upward_import_and_a_cycle(tmp_path: Path, late: bool) -> None:
    """The checker itself fails on what it must catch, top-level and late imports alike."""
    indent = "def f():\n    " if late else ""
    pk = _write(tmp_path, {
        "memofs/__init__.py": "",
        "memofs/text/__init__.py": "",
        "memofs/text/tokenize.py": f"{indent}from memofs.ranking import fusion\n",
        "memofs/ranking/__init__.py": "",
        "memofs/ranking/fusion.py": "from memofs.text.tokenize import x\n",
        "memofs/ranking/pools.py": "from memofs.ranking import fusion\n",
    })
    g = graph(pk)
    assert g["memofs.ranking.pools"] == {"memofs.ranking.fusion"}
    assert g["memofs.ranking.fusion"] == {"memofs.text.tokenize"}
    assert upward(g) == ["memofs.text.tokenize -> memofs.ranking.fusion (stage ranking is above text)"]
    assert cycles(g) == [["memofs.ranking.fusion", "memofs.text.tokenize"]]


def test_no_test_file_imports_another() -> None:
    """Shared helpers live in tests/support.py; a test importing another test file works only
    when pytest happened to import that file first."""
    def imported(n: ast.AST) -> list[str]:
        if isinstance(n, ast.ImportFrom):
            return [n.module] if n.module and n.level == 0 else []
        return [a.name for a in n.names] if isinstance(n, ast.Import) else []

    bad = [f"{p.relative_to(ROOT)}: {name}" for p in sorted((ROOT / "tests").rglob("*.py"))
           for n in ast.walk(ast.parse(p.read_text(encoding="utf-8"))) for name in imported(n)
           if name.split(".")[0].startswith(("test_", "tests"))]
    assert bad == []
