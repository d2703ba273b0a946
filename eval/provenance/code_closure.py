"""The project code a computation depends on: its import closure and a digest per source.

``modules`` maps every module of the three packages (``memofs``, ``memofs_datasets``,
``memofs_eval``) to its file. ``imports`` lists the project modules one file imports, at any
depth (a function-level import still ties two modules together); ``from pkg import name``
counts as an import of ``pkg.name`` when that is a module, else of ``pkg``. ``closure`` follows
them from entry modules, with every enclosing package's ``__init__`` (importing ``a.b.c`` runs
``a`` and ``a.b`` first).

``digest`` is what a file contributes to a report's code hash: for Python, SHA-256 of
``ast.dump`` of the parsed module with its docstrings removed and no line numbers, so an edit to
a comment, a docstring or the layout changes nothing; for a TOML spec, SHA-256 of its parsed
value as canonical JSON (its comments do not count either); for anything else, its bytes.
"""

from __future__ import annotations

import ast
import hashlib
import io
import json
import tomllib
from collections.abc import Iterable
from pathlib import Path

# installed package name -> folder in the repository
PACKAGES: dict[str, str] = {"memofs": "memofs", "memofs_datasets": "datasets", "memofs_eval": "eval"}


def modules(repo: Path) -> dict[str, Path]:
    """Every project module by dotted name (packages by their ``__init__``)."""
    out: dict[str, Path] = {}
    for name, folder in PACKAGES.items():
        root = repo / folder
        for path in sorted(root.rglob("*.py")):
            if "__pycache__" in path.parts:
                continue
            rel = path.relative_to(root).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            out[".".join([name, *parts])] = path
    return out


def _text(raw: bytes) -> str:
    """A source's bytes as ``path.read_text(encoding="utf-8")`` reads them (newlines translated)."""
    return io.TextIOWrapper(io.BytesIO(raw), encoding="utf-8").read()


#: SHA-256 of a file's bytes -> its import statements, as (module or None for ``import``, level,
#: names): closures are followed again and again in one process; unchanged bytes are not parsed again
_IMPORT_STATEMENTS: dict[bytes, tuple[tuple[str | None, int, tuple[str, ...]], ...]] = {}


def _import_statements(path: Path) -> tuple[tuple[str | None, int, tuple[str, ...]], ...]:
    raw = path.read_bytes()
    key = hashlib.sha256(raw).digest()
    got = _IMPORT_STATEMENTS.get(key)
    if got is None:
        got = _IMPORT_STATEMENTS[key] = tuple(
            (None, 0, tuple(a.name for a in node.names)) if isinstance(node, ast.Import)
            else (node.module or "", node.level, tuple(a.name for a in node.names))
            for node in ast.walk(ast.parse(_text(raw), str(path))) if isinstance(node, (ast.Import, ast.ImportFrom)))
    return got


def imports(name: str, path: Path, known: Iterable[str]) -> set[str]:
    """Project modules imported anywhere in ``path`` (module ``name``)."""
    known = known if isinstance(known, (set, frozenset, dict)) else set(known)
    is_pkg = path.name == "__init__.py"
    out: set[str] = set()
    for module, level, names in _import_statements(path):
        if module is None:  # import a.b
            targets = list(names)
        else:  # from .module import names
            base = module
            if level:
                anchor = name.split(".") if is_pkg else name.split(".")[:-1]
                anchor = anchor[: len(anchor) - (level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            targets = [f"{base}.{a}" if f"{base}.{a}" in known else base for a in names]
        for t in targets:
            while t and t not in known:  # `import memofs.x.y` where y is a name: the module above
                t = t.rpartition(".")[0]
            if t and t != name:
                out.add(t)
    return out


def _with_parents(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[: i + 1]) for i in range(len(parts))]


def closure(entries: Iterable[str], repo: Path) -> dict[str, Path]:
    """The entry modules and every project module they import, transitively."""
    known = modules(repo)
    todo = [p for e in entries for p in _with_parents(e)]
    seen: dict[str, Path] = {}
    while todo:
        name = todo.pop()
        if name in seen or name not in known:
            continue
        seen[name] = known[name]
        for dep in imports(name, known[name], known):
            todo.extend(_with_parents(dep))
    return dict(sorted(seen.items()))


def _strip_docstrings(tree: ast.AST) -> ast.AST:
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                node.body = body[1:] or [ast.Pass()]
    return tree


#: (suffix, SHA-256 of a file's bytes) -> its digest: the same sources are digested again and again
#: in one process (every signal-cache lookup hashes the extraction code, every report its closure);
#: unchanged bytes are not parsed again, and a changed file is a new key
_DIGESTS: dict[tuple[str, bytes], str] = {}


def digest(path: Path) -> str:
    """A file's contribution to a code hash (module docstring: comments never count)."""
    raw = path.read_bytes()
    if path.suffix not in (".py", ".toml"):
        return hashlib.sha256(raw).hexdigest()[:16]
    key = (path.suffix, hashlib.sha256(raw).digest())
    got = _DIGESTS.get(key)
    if got is None:
        text = _text(raw)
        if path.suffix == ".py":
            data = ast.dump(_strip_docstrings(ast.parse(text, str(path))), annotate_fields=True, include_attributes=False)
        else:
            data = json.dumps(tomllib.loads(text), sort_keys=True)
        got = _DIGESTS[key] = hashlib.sha256(data.encode()).hexdigest()[:16]
    return got


def combined(files: dict[str, str]) -> str:
    """One hash over ``{relative path: digest}``, in path order."""
    h = hashlib.sha256()
    for rel in sorted(files):
        h.update(rel.encode() + b"\0" + files[rel].encode() + b"\0")
    return h.hexdigest()[:16]
