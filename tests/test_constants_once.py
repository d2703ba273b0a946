"""Each constant once (issue 35): no collection constant is written out in two modules of
``memofs/`` or ``datasets/`` (``TASK_TYPES`` was in three, the kind-expiry days in two), and
no two modules define a public function of the same name unless listed below with the reason
(two unrelated ``fingerprint``s, SHA-256 and FNV-1a 64, were the trap).

The scan reads the source (``ast``): a module-level assignment whose value is a literal
tuple, list, set or dict of at least two items, or a call wrapping one
(``MappingProxyType({...})``, ``frozenset({...})``), is a constant; two constants are the same
when their values are equal after numbers are made floats and sets sorted, whatever their names.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from memofs_eval.provenance.code_closure import modules
from support import REPO_ROOT

ROOT = REPO_ROOT
SCANNED = ("memofs", "memofs_datasets")

# value (normalised repr) -> why a second copy is kept
ALLOWED_CONSTANTS: dict[str, str] = {
    repr(("'0'", "'disabled'", "'false'", "'none'", "'off'")):
        "MEMOFS_EMBEDDER's off-words: the CLI keeps its copy so that a lexical-only write never imports "
        "numpy through memofs.signals.embedders.select (fast CLI start)",
}
# public function name -> why several modules define one (may only shrink)
ALLOWED_FUNCTIONS: dict[str, str] = {
    "read_jsonl": "the store's JSONL reader and BEIR's corpus reader: issue 35's store split",
    "preview": "a secret-redacted preview (files/secrets.py) and a briefing preview (store/briefing.py)",
    "scan": "the secret scan (files/secrets.py) and the pool kernel's scan (ranking/pool_kernel.py)",
    "select": "pool selection and its numba kernel twin (equality-tested)",
}


def project_modules(root: Path = ROOT) -> dict[str, Path]:
    """The scanned packages' modules (a dataset's bundled source tree is data, not a module)."""
    return {name: path for name, path in modules(root).items()
            if name.split(".")[0] in SCANNED and all(p.isidentifier() for p in name.split("."))}


def _normalised(value: Any) -> str | None:
    if isinstance(value, dict) and len(value) >= 2:
        return repr(sorted((repr(k), float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else repr(v))
                           for k, v in value.items()))
    if isinstance(value, (set, frozenset)) and len(value) >= 2:
        return repr(tuple(sorted(map(repr, value))))
    if isinstance(value, (tuple, list)) and len(value) >= 2:
        return repr(tuple(value))
    return None


def constants(mods: dict[str, Path]) -> dict[str, list[str]]:
    """Normalised value -> ``module.NAME`` of every collection constant holding it."""
    out: dict[str, list[str]] = defaultdict(list)
    for name, path in sorted(mods.items()):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if not isinstance(node, (ast.Assign, ast.AnnAssign)) or node.value is None:
                continue
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            value = node.value
            if isinstance(value, ast.Call) and len(value.args) == 1:
                value = value.args[0]  # MappingProxyType({...}), frozenset({...})
            try:
                key = _normalised(ast.literal_eval(value))
            except (ValueError, TypeError, SyntaxError):
                continue
            if key is not None:
                out[key] += [f"{name}.{t.id}" for t in targets if isinstance(t, ast.Name)]
    return out


def public_functions(mods: dict[str, Path]) -> dict[str, list[str]]:
    """Function name -> the modules defining it at top level (names without a leading ``_``)."""
    out: dict[str, list[str]] = defaultdict(list)
    for name, path in sorted(mods.items()):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not node.name.startswith("_"):
                out[node.name].append(name)
    return out


def repeated_constants(mods: dict[str, Path]) -> list[str]:
    return [" = ".join(where) for key, where in sorted(constants(mods).items())
            if len(where) > 1 and key not in ALLOWED_CONSTANTS]


def repeated_functions(mods: dict[str, Path]) -> list[str]:
    return [f"{fn}: {', '.join(where)}" for fn, where in sorted(public_functions(mods).items())
            if len(where) > 1 and fn not in ALLOWED_FUNCTIONS]


def test_no_constant_is_written_out_twice() -> None:
    assert repeated_constants(project_modules()) == []


def test_no_two_modules_define_a_public_function_of_one_name() -> None:
    assert repeated_functions(project_modules()) == []


def test_the_allowances_are_still_needed() -> None:
    """An allowance whose duplicate is gone is removed, so the lists only shrink."""
    mods = project_modules()
    assert {k for k, v in constants(mods).items() if len(v) > 1} >= set(ALLOWED_CONSTANTS)
    funcs = public_functions(mods)
    assert [fn for fn in ALLOWED_FUNCTIONS if len(funcs.get(fn, ())) < 2] == []


def test_the_scan_finds_a_copy_under_another_name(tmp_path: Path) -> None:
    """The scan on a tiny tree: a mapping copied with ints for floats behind another name,
    a tuple copied verbatim and a second ``fingerprint`` are all found; a different tuple,
    a private helper and a one-item tuple are not."""
    (tmp_path / "a.py").write_text(
        "from types import MappingProxyType\n"
        "DAYS = MappingProxyType({'decision': 365.0, 'note': 30.0})\n"
        "TYPES: tuple[str, ...] = ('coding', 'debug')\n"
        "ONE = ('x',)\n"
        "def fingerprint(t): return t\n"
        "def _helper(): pass\n")
    (tmp_path / "b.py").write_text(
        "EXPIRY: dict[str, int] = {'note': 30, 'decision': 365}\n"
        "TYPES = ('coding', 'debug')\n"
        "OTHER = ('debug', 'coding')\n"
        "ONE = ('x',)\n"
        "def fingerprint(t): return t\n"
        "def _helper(): pass\n")
    mods = {"pkg.a": tmp_path / "a.py", "pkg.b": tmp_path / "b.py"}
    assert sorted(repeated_constants(mods)) == ["pkg.a.DAYS = pkg.b.EXPIRY", "pkg.a.TYPES = pkg.b.TYPES"]
    assert repeated_functions(mods) == ["fingerprint: pkg.a, pkg.b"]


@pytest.mark.parametrize("module", ["memofs.surfaces.cli", "memofs_datasets.format"])
def test_task_types_come_from_the_lexicon(module: str) -> None:
    import importlib

    from memofs.text.lexicon import TASK_TYPES

    assert importlib.import_module(module).TASK_TYPES is TASK_TYPES
