"""The ``memofs`` command line (typer).

Human output by default, ``--json`` for machines. Exit codes (memofs/store/STORE.md):

* 0: success; 1: an error the user can fix (bad input, a refused write, a damaged
  store, a file that cannot be read), printed as one line ``memofs: error: <message>``
  on stderr (``doctor`` also exits 1 when it finds problems);
* 2: a usage error (unknown option, missing argument; click's message);
* 3: an internal error of memofs itself, one line
  ``memofs: internal error: <type>: <message> (run memofs doctor)``; never a traceback;
* 130: interrupted (Ctrl-C), ``memofs: interrupted``.
 ``--root``
(default: the current directory) selects the project. ``MEMOFS_EMBEDDER=none`` gives
lexical-only recall; otherwise the zero-key tiers of :mod:`memofs.signals.embedders.select`.
``remember`` does not load the model unless ``MEMOFS_EMBED_ON_WRITE=1``: the next
``recall``/``context`` embeds new memories once and persists their vectors.
Each command is one process answering once, so it runs numpy's loops, not numba's
(:mod:`memofs.signals.kernels`: the compiled kernels' load costs more than they save on one
query); ``memofs mcp`` serves many queries and runs the compiled ones. ``MEMOFS_KERNELS``
(``numba``/``numpy``) overrides both.
The wall clock is used here and only here; the library takes injected clocks. ``recall``,
``context`` and ``mcp`` take ``--as-of ISO-8601`` instead (a fixed "now" for evaluation).
"""

from __future__ import annotations

import signal

import json
import logging
import os
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn, Optional

import typer

from memofs.files.records import MEMORY_KINDS
from memofs.files.secrets import shown
from memofs.ranking.profiles import PROFILE_NAMES
from memofs.signals import kernels
from memofs.text.lexicon import TASK_TYPES

app = typer.Typer(
    name="memofs",
    help="MemoFS: project memory with hybrid recall (BM25 + fuzzy + vectors) and budgeted briefings.",
    epilog=(
        "Examples:\n\n"
        "  memofs init\n\n"
        "  memofs remember \"Use D1 for tenant metadata\" --kind decision --confidence 0.9 --anchor src/db.py\n\n"
        "  memofs recall --query \"database driver\" -k 5 --explain\n\n"
        "  memofs context --query \"login failure\" --task-type debug --budget 4096\n\n"
        "  memofs generate agent claude --project-name \"My API\""
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
generate_app = typer.Typer(help="Generate agent files.", no_args_is_help=True)
agent_app = typer.Typer(help="Generate agent instructions and MCP client configuration.", no_args_is_help=True)
generate_app.add_typer(agent_app, name="agent")
app.add_typer(generate_app, name="generate")
embedder_app = typer.Typer(help="The local MiniLM's ONNX model file (the default embedder's torch-free path).",
                           no_args_is_help=True)
app.add_typer(embedder_app, name="embedder")


@dataclass
class Ctx:
    root: Path
    json: bool = False  # -j/--json before the subcommand (upstream's global flag)


EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_INTERNAL = 3
EXIT_INTERRUPTED = 130
_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"", "0", "false", "no", "off"})


class CliError(Exception):
    """An error to report in one line with exit code 1."""


def _fail(message: str, code: int = EXIT_ERROR) -> NoReturn:
    typer.echo(f"memofs: error: {message}", err=True)
    raise typer.Exit(code)


def _user_errors() -> tuple[type[BaseException], ...]:
    """What a user can cause: bad input, a damaged store, files that cannot be read or
    written, a held lock. Anything else raised by memofs is an internal error."""
    from memofs.signals.embeddings_file import EmbeddingsFileError
    from memofs.files.records import InvalidInputError
    from memofs.files.safe_json import JSONFileError
    from memofs.ranking.learned import ModelFileError
    from memofs.store.project import StoreError

    return (CliError, InvalidInputError, StoreError, JSONFileError, EmbeddingsFileError, ModelFileError, OSError,
            TimeoutError)


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def _describe(exc: BaseException) -> str:
    """One line: a user-caused error's message, or ``internal error: <type>: <message>``."""
    if isinstance(exc, _user_errors()):
        return _one_line(exc)
    return f"internal error: {type(exc).__name__}: {_one_line(exc)}"


def _guard(fn: Any) -> Any:
    """The CLI's one error boundary: user-caused errors become ``memofs: error: ...``
    (exit 1), anything else ``memofs: internal error: ...`` (exit 3), never a traceback.

    Ctrl-C: outside this boundary (imports, argument parsing, exit) the console script's
    ``memofs.quit_on_interrupt`` answers it; inside, the command's own handling does."""
    from memofs import quit_on_interrupt  # installed by the package's first lines (console script only)

    handed = signal.getsignal(signal.SIGINT) is quit_on_interrupt
    if handed:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        return fn()
    except typer.Exit:
        raise
    except KeyboardInterrupt:
        typer.echo("memofs: interrupted", err=True)
        raise typer.Exit(EXIT_INTERRUPTED) from None
    except Exception as exc:
        if isinstance(exc, _user_errors()):
            _fail(_one_line(exc))
        logging.getLogger("memofs.cli").info("internal error", exc_info=True)  # the traceback with --verbose
        typer.echo(f"memofs: {_describe(exc)} (run memofs doctor)", err=True)
        raise typer.Exit(EXIT_INTERNAL) from None
    finally:
        if handed:
            signal.signal(signal.SIGINT, quit_on_interrupt)


def env_flag(name: str) -> bool:
    """A boolean environment variable, parsed strictly: 1/true/yes/on or 0/false/no/off
    (or unset/empty); any other value is refused rather than guessed."""
    raw = os.environ.get(name, "")
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise CliError(f"{name}={shown(raw)} is not a boolean; use 1/true/yes/on or 0/false/no/off")


def _read_stdin() -> str:
    data = sys.stdin.buffer.read() if hasattr(sys.stdin, "buffer") else sys.stdin.read().encode("utf-8")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CliError(f"stdin is not valid UTF-8 (byte {exc.start})") from None


def _emit(data: Any) -> None:
    typer.echo(json.dumps(data, indent=2, ensure_ascii=False, default=str))


AS_OF_HELP = ("Rank as if now were this ISO-8601 time with a timezone (e.g. 2026-03-01T00:00:00Z), not the "
              "wall clock: for evaluation; writes are stamped with it too.")
"""``--as-of`` of recall, context and mcp (issue 46, item 5: the product path measured as it is used)."""


def _clock(as_of: Optional[str]) -> Any:
    """The store's clock: the wall clock, or ``--as-of`` fixed (one line on a naive time or garbage)."""
    from memofs.files.timestamps import parse_iso
    from memofs.store.project import fixed_clock, wall_clock

    if as_of is None:
        return wall_clock
    try:
        return fixed_clock(parse_iso(as_of))
    except ValueError:
        raise CliError(f"--as-of must be an ISO-8601 time with a timezone (e.g. 2026-03-01T00:00:00Z); "
                       f"got {shown(as_of)}") from None


def _store(ctx: typer.Context, as_of: Optional[str] = None):
    """The project's store with the clock every surface ranks and stamps by (``--as-of`` or the wall clock)."""
    from memofs.store.project import Store

    return Store.open(ctx.obj.root, clock=_clock(as_of))


_DISABLED = frozenset({"none", "off", "0", "false", "disabled"})  # = memofs.signals.embedders.select.DISABLED


def _embedder(load: bool = True, background: bool = False) -> Any:
    if os.environ.get("MEMOFS_EMBEDDER", "").strip().lower() in _DISABLED:
        return None  # lexical-only; skip importing the embedder stack (fast CLI writes)
    from memofs.signals.embedders.select import select_embedder

    return select_embedder(os.environ, prewarm=load, background=background)


def _live(ctx: typer.Context, as_of: Optional[str] = None):
    from memofs.store.project import LiveStore

    # the model loads on a thread while the store is read: a recall's start is both (issue 38)
    return LiveStore(_store(ctx, as_of), embedder=_embedder(background=True))


def _embed_query_then_release(live: Any, state: Any, query: str, task: Optional[str]) -> None:
    """Embed the text recall will embed for ``query`` now, then let the model go: a CLI
    recall embeds nothing else, so the weights leave the process before recall builds its
    lexical index (issue 38: the peak RSS). The LiveStore's embedder keeps the vector for
    recall's own encode; if recall asks for another text, the model is simply loaded again."""
    inner = getattr(live.embedder, "inner", None)
    if inner is None or not hasattr(inner, "release") or not (state.loaded_vectors or state.embedded):
        return  # no vectors to compare with (an empty store): recall embeds nothing either
    text = state.recaller.query_text(query, task)[0].text
    try:
        if text.strip():
            live.embedder.encode([text])
    except Exception:  # noqa: BLE001 - a model that failed to load: recall's own encode meets it
        return  # and recalls lexical-only with one warning (its embedder never raises)
    inner.release()


def _json_option(option: str, raw: str) -> Any:
    """The JSON value of ``option``, read as the store reads its files (depth limit, an
    integer over the digit limit refused); a one-line error naming the option, never echoing
    the value (it may hold a secret)."""
    from memofs.files.safe_json import JSONFileError, parse

    try:
        return parse(raw, option)
    except JSONFileError as exc:
        raise CliError(f"{option}: {exc.reason}") from None


def _import_hint(store: Any, ids: Iterable[str]) -> list[str]:
    """One warning when an upstream notes.md holds notes ``memofs import`` has not brought in
    (``ids``: the memories the store holds)."""
    from memofs.store.upstream import NOTES_FILE, pending_notes

    pending = pending_notes(store, set(ids))
    return [f"{store.paths.rel(store.paths.dir / NOTES_FILE)} holds {pending} upstream MemoFS note(s) "
            "not imported; run `memofs import`"] if pending else []


def _check_query(query: str) -> None:
    """The MCP server's bound on a query (:data:`memofs.store.project.MAX_QUERY_CHARS`)."""
    from memofs.store.project import MAX_QUERY_CHARS

    if len(query) > MAX_QUERY_CHARS:
        raise CliError(f"--query has {len(query)} characters; the limit is {MAX_QUERY_CHARS}")


def _task(task_type: Optional[str]) -> Optional[str]:
    if task_type is not None and task_type not in TASK_TYPES:
        raise CliError(f"--task-type must be one of {', '.join(TASK_TYPES)}; got {shown(task_type)}")
    return task_type


@app.callback()
def _main(
    ctx: typer.Context,
    root: Path = typer.Option(Path("."), "--root", "-r", help="Project root (default: current directory)."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Log warnings and info to stderr."),
    as_json: bool = typer.Option(False, "--json", "-j", help="Machine-readable output for every command (as each command's --json)."),
) -> None:
    logging.basicConfig(level=logging.INFO if verbose else logging.ERROR, format="memofs: %(levelname)s: %(message)s")
    ctx.obj = Ctx(root=root.expanduser(), json=as_json)


@app.command(epilog="Example:  memofs init --project-id my-api")
def init(
    ctx: typer.Context,
    force: bool = typer.Option(False, "--force", "-f", help="Rewrite core.md, manifest.json, config.json with defaults."),
    project_id: str = typer.Option("default", "--project-id", "-p", help="Project id recorded in the manifest."),
    profile: Optional[str] = typer.Option(None, "--profile", help=f"Recall profile written to config.json: one of {', '.join(PROFILE_NAMES)} (default: reference)."),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
) -> None:
    """Create the .memofs/ store in the project root (existing memories are kept)."""
    as_json = as_json or ctx.obj.json

    def run() -> None:
        from memofs.store.project import Store, wall_clock

        if profile is not None and profile not in PROFILE_NAMES:
            raise CliError(f"--profile must be one of {', '.join(PROFILE_NAMES)}; got {shown(profile)}")
        store = Store.init(ctx.obj.root, project_id=project_id, force=force, clock=wall_clock, profile=profile)
        if as_json:
            _emit({"root": str(store.root), "store": str(store.paths.dir)})
        else:
            typer.echo(f"Initialized MemoFS store in {store.paths.dir}")

    _guard(run)


@app.command(epilog=(
    "Examples:\n\n"
    "  memofs remember \"API uses Postgres 16\" --kind decision --confidence 0.9 --tag db\n\n"
    "  memofs remember \"Retry logic lives here\" --kind reference --anchor src/retry.py\n\n"
    "  echo \"long text\" | memofs remember -"
))
def remember(
    ctx: typer.Context,
    text: str = typer.Argument(..., help="The memory text ('-' reads stdin)."),
    kind: str = typer.Option("note", "--kind", "-k", help=f"One of: {', '.join(MEMORY_KINDS)}."),
    confidence: Optional[float] = typer.Option(None, "--confidence", "-c", help="Confidence in [0, 1]."),
    anchor: list[str] = typer.Option([], "--anchor", "-a", help="File (relative to the root) the memory is about; repeatable."),
    tag: list[str] = typer.Option([], "--tag", "-t", help="Tag; repeatable."),
    supersedes: list[str] = typer.Option([], "--supersedes", help="Id of a memory this one replaces; repeatable."),
    title: Optional[str] = typer.Option(None, "--title", help="Title (upstream's; at most 512 characters)."),
    source: Optional[str] = typer.Option(None, "--source", help="Where the memory came from (at most 512 characters)."),
    source_ref: list[str] = typer.Option([], "--source-ref", help='Source reference as a JSON object with "sourceType" (and path, url, ...); repeatable.'),
    metadata: Optional[str] = typer.Option(None, "--metadata", "--metadata-json", help="Your own metadata, a JSON object."),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
) -> None:
    """Store a memory (secrets are refused; anchors are hashed now)."""
    as_json = as_json or ctx.obj.json

    def run() -> None:
        refs = [_json_option("--source-ref", raw) for raw in source_ref]
        meta = _json_option("--metadata", metadata) if metadata is not None else None
        body = _read_stdin() if text == "-" else text
        if kind not in MEMORY_KINDS:
            raise CliError(f"--kind must be one of {', '.join(MEMORY_KINDS)}; got {shown(kind)}")
        store = _store(ctx)
        # the model load costs seconds per command, so by default the CLI leaves embedding
        # to the next recall (which embeds what is missing and persists it)
        embedder = _embedder() if env_flag("MEMOFS_EMBED_ON_WRITE") else None
        m = store.remember(body, kind=kind, confidence=confidence, tags=tag, anchors=anchor,
                           supersedes=supersedes, actor=os.environ.get("USER") or None, embedder=embedder,
                           title=title, source=source, source_refs=refs or None, metadata=meta)
        if as_json:
            from memofs.store.project import memory_to_json

            _emit(memory_to_json(m))
        else:
            typer.echo(f"Remembered {m.id} ({m.kind})")

    _guard(run)


@app.command(epilog=(
    "Examples:\n\n"
    "  memofs recall --query \"database driver\"\n\n"
    "  memofs recall -q \"login failure\" --task-type debug -k 3 --explain --json"
))
def recall(
    ctx: typer.Context,
    query: str = typer.Option(..., "--query", "-q", help="What to look for."),
    k: int = typer.Option(10, "-k", "--limit", min=1, max=100, help="How many results."),
    task_type: Optional[str] = typer.Option(None, "--task-type", help=f"One of: {', '.join(TASK_TYPES)}."),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
    explain: bool = typer.Option(False, "--explain", help="Show every signal, weight and penalty."),
    as_of: Optional[str] = typer.Option(None, "--as-of", metavar="ISO-8601", help=AS_OF_HELP),
) -> None:
    """Hybrid recall over the project's memories."""
    as_json = as_json or ctx.obj.json

    def run() -> None:
        from memofs.store.briefing import result_dict

        task = _task(task_type)
        if not query.strip():
            raise CliError("--query must not be empty")
        _check_query(query)
        live = _live(ctx, as_of)
        state = live.state()
        _embed_query_then_release(live, state, query, task)
        results = state.recaller.recall(query, k, task_type=task, now=live.store.clock(), explain=True)
        rows = [result_dict(r, explain) for r in results]
        warnings = [*state.warnings, *_import_hint(live.store, state.memories.ids)]
        if as_json:
            _emit({"query": query, "results": rows, "warnings": warnings})
            return
        for w in warnings:
            typer.echo(f"warning: {w}", err=True)
        if not rows:
            typer.echo("No memories matched.")
        for i, (r, row) in enumerate(zip(results, rows, strict=True), start=1):
            kind = row.get("kind", "graph")
            typer.echo(f"{i}. [{kind}] {r.score:.4f}  {r.id}")
            typer.echo(f"   {' '.join(r.text.split())}")
            if row["stale"]:
                reason = next(p["reason"] for p in r.explain["penalties"] if p["name"] == "stale_anchor")
                typer.echo(f"   STALE: {reason}")
            if explain and r.explain:
                e = r.explain
                sig = ", ".join(f"{n}={v}" for n, v in e["signals"].items() if v is not None)
                typer.echo(f"   signals: {sig}")
                w = e["weights"]
                typer.echo(f"   weights: vec={w['w_vec']} lex={w['w_lex']} ({w['dynamic']})")
                c = e["components"]
                typer.echo(f"   base={c['base']} composite={c['composite']} penalty={c['penalty_factor']} final={c['final']}")
                for p in e["penalties"]:
                    typer.echo(f"   penalty {p['name']} x{p['factor']}: {p['reason']}")

    _guard(run)


@app.command(epilog=(
    "Examples:\n\n"
    "  memofs context --query \"database decisions\" --task-type refactor\n\n"
    "  memofs context --query \"auth\" --budget 2048 --json\n\n"
    "  memofs context --expand <cursor> --section recall"
))
def context(
    ctx: typer.Context,
    query: Optional[str] = typer.Option(None, "--query", "-q", help="The task or question."),
    task_type: Optional[str] = typer.Option(None, "--task-type", help=f"One of: {', '.join(TASK_TYPES)}."),
    budget: Optional[int] = typer.Option(None, "--budget", help="Byte budget (1024..8192 compact, default 8192; expand default 64000)."),
    section: Optional[str] = typer.Option(None, "--section", help="Section to expand: entities, recall, recent, notes."),
    expand: Optional[str] = typer.Option(None, "--expand", help="Expansion cursor from a briefing footer."),
    max_chars: Optional[int] = typer.Option(None, "--max-chars", help="Upstream's flag: --budget with --detail full (unless --detail is given)."),
    detail: Optional[str] = typer.Option(None, "--detail", help="compact (default: <= 8192 bytes, cursors) or full (every result, default 64000 bytes)."),
    include_core: bool = typer.Option(True, "--include-core/--no-include-core", help="Core Memory section."),
    include_notes: Optional[bool] = typer.Option(None, "--include-notes/--no-include-notes", help="Notes Memory (compact: shown unless --no-include-notes; full: only with --include-notes)."),
    include_recent: bool = typer.Option(True, "--include-recent/--no-include-recent", help="Recent Memory Events section."),
    include_graph: bool = typer.Option(True, "--include-graph/--no-include-graph", help="Entities section."),
    mark_session_start: bool = typer.Option(False, "--mark-session-start", help="Record a memory.indexed event {hook: session-start}; the query defaults to 'current task' (upstream's session-start hook)."),
    as_of: Optional[str] = typer.Option(None, "--as-of", metavar="ISO-8601", help=AS_OF_HELP),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
) -> None:
    """A budgeted context briefing, or one section expanded from a cursor."""
    as_json = as_json or ctx.obj.json

    def run() -> None:
        from memofs.store.briefing import DETAILS, EXPAND_BUDGET, ContextOptions, briefing_for, expand_context
        from memofs.store.cursor import SECTIONS, FileContextCache

        if section is not None and section not in SECTIONS:
            raise CliError(f"--section must be one of {', '.join(SECTIONS)}; got {shown(section)}")
        if budget is not None and max_chars is not None and budget != max_chars:
            raise CliError("--budget and --max-chars are the same setting; give one")
        size = budget if budget is not None else max_chars
        if detail is not None and detail not in DETAILS:
            raise CliError(f"--detail must be one of {', '.join(DETAILS)}; got {shown(detail)}")
        # upstream's `context` is always the full briefing; --max-chars is its flag
        options = ContextOptions(detail=detail or ("full" if max_chars is not None else "compact"),
                                 include_core=include_core, include_notes=include_notes,
                                 include_recent=include_recent, include_graph=include_graph)
        store = _store(ctx, as_of)
        q = query if query is not None or not mark_session_start else "current task"
        if mark_session_start:
            store.record_event("memory.indexed", "Session started.", {"hook": "session-start"})
        if expand is not None:
            cache = FileContextCache(store.paths.tmp, clock=time.time, lock=store.lock())
            b = expand_context(cache, expand, section, EXPAND_BUDGET if size is None else size)
        else:
            query_ = q
            if not query_ or not query_.strip():
                raise CliError("--query is required (or --expand CURSOR)")
            _check_query(query_)
            from memofs.store.project import LiveStore

            live = LiveStore(store, embedder=_embedder(background=True))
            cache = FileContextCache(store.paths.tmp, clock=time.time, lock=store.lock())
            b = briefing_for(live, cache, query=query_, now=store.clock(), task_type=_task(task_type),
                             max_bytes=size, options=options)
        b.warnings = [*cache.warnings, *b.warnings]  # a damaged cache was discarded
        if as_json:
            _emit(b.to_dict())
            return
        for w in b.warnings:
            typer.echo(f"warning: {w}", err=True)
        typer.echo(b.text)

    _guard(run)


@app.command("import", epilog=(
    "Examples:\n\n"
    "  memofs import --dry-run\n\n"
    "  memofs import --json"
))
def import_(
    ctx: typer.Context,
    dry_run: bool = typer.Option(False, "--dry-run", "-n", help="Say what would be imported; write nothing."),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
) -> None:
    """Make an upstream (TypeScript) MemoFS store in the project root a memofs store:
    notes.md memories and matching embedding lines are imported, upstream's config keys
    moved aside; graph files are read as they are. Every upstream file it or a later write
    touches is first copied under .memofs/upstream/. A second import does nothing."""
    as_json = as_json or ctx.obj.json

    def run() -> None:
        from memofs.store.upstream import apply_import, plan_import

        store = _store(ctx)
        plan = plan_import(store)
        if not dry_run and plan.changes:
            apply_import(store, plan)
        if as_json:
            _emit({"dry_run": dry_run, **plan.to_dict()})
            return
        verb = "would import" if dry_run else "imported"
        typer.echo(f"{verb} {len(plan.memories)} memories from .memofs/memory/notes.md "
                   f"({plan.already} already imported)")
        typer.echo(f"embeddings: {len(plan.embeddings)} upstream vectors reused, "
                   f"{len(plan.embeddings_not_reused)} left for the next recall to embed")
        for line in plan.embeddings_not_reused:
            typer.echo(f"  not reused: {line}")
        typer.echo(f"config.json: {'upstream embedder keys moved to recall.upstream' if plan.config else 'unchanged'}; "
                   f"manifest.json: {'memofs paths added' if plan.manifest else 'unchanged'}")
        typer.echo(f"graph: {plan.graph[0]} nodes, {plan.graph[1]} edges (read as they are)")
        for w in plan.warnings:
            typer.echo(f"warning: {w}", err=True)
        if not plan.changes:
            typer.echo("nothing to do" if not dry_run else "nothing would change")

    _guard(run)


def _health(ctx: typer.Context, load_embedder: bool) -> dict[str, Any]:
    """Store health facts and problems (``status`` and ``doctor``). Every check runs even
    when an earlier one fails: each failure is one line in ``problems``. ``doctor``
    (``load_embedder``) also checks the derived data a crash can leave incomplete."""
    from memofs.signals.anchors import AnchorChecker
    from memofs.signals.embeddings_file import EmbeddingsFile, text_sha256
    from memofs.signals.embedders.select import DISABLED
    from memofs.store.project import read_jsonl

    store = _store(ctx)
    p = store.paths
    problems: list[str] = []
    warnings: list[str] = []
    info: dict[str, Any] = {"root": str(store.root), "store": str(p.dir)}

    def check(step: Any, default: Any = None) -> Any:
        try:
            return step()
        except Exception as exc:  # doctor reports every problem, it does not stop at one
            problems.append(_describe(exc))
            return default

    for f in (p.manifest, p.config, p.core, p.memories, p.events, p.graph / "nodes.jsonl", p.graph / "edges.jsonl"):
        if not f.exists():
            problems.append(f"missing {p.rel(f)} (run `memofs init` to recreate it)")
    problems.extend(store.manifest_problems())
    cfg_notes = check(store.recall_config_notes)
    warnings.extend(cfg_notes[1] if cfg_notes else [])
    info["profile"] = cfg_notes[0].profile if cfg_notes else "reference"  # the active recall profile
    if load_embedder:  # before the load below, which rebuilds an unsealed memories sidecar
        from memofs.store.health import unsealed_caches

        problems.extend(check(lambda: unsealed_caches(store), []))
    report = check(store.load)
    memories = report.memories if report is not None else []
    warnings.extend(report.warnings if report is not None else [])
    warnings.extend(_import_hint(store, (m.id for m in memories)))
    events = check(lambda: read_jsonl(p.events))
    if events is not None:
        warnings.extend(events[1])
        info["events"] = len(events[0])
    graph = check(store.load_graph)
    if graph is not None:
        info["graph"] = {"nodes": len(graph.nodes), "edges": len(graph.edges)}
    info["memories"] = len(memories)
    kinds: dict[str, int] = {}
    for m in memories:
        kinds[m.kind] = kinds.get(m.kind, 0) + 1
    info["kinds"] = kinds
    info["core_bytes"] = check(lambda: len(store.read_core().encode("utf-8")), 0)
    checker = AnchorChecker(store.root)
    stale = []
    for m in memories:
        d = checker.drift(m.anchors) if m.anchors else None
        if d is not None:
            stale.append({"id": m.id, "path": d.path, "change": d.change, "reason": str(d)})
    info["stale_anchors"] = stale
    choice = os.environ.get("MEMOFS_EMBEDDER", "").strip().lower()
    if choice in DISABLED:
        info["embedder"] = {"tier": "lexical-only", "reason": f"MEMOFS_EMBEDDER={choice}", "name": None}
    elif load_embedder:
        emb = check(lambda: _embedder(load=True))
        if emb is None:
            info["embedder"] = {"tier": "lexical-only", "reason": "no embedder could be loaded (tier 2 fallback)", "name": None}
            warnings.append("vector recall unavailable: running lexical-only")
        else:
            info["embedder"] = {"tier": "vector", "reason": "loaded", "name": emb.name, "dim": emb.dim}
    else:
        emb = check(lambda: _embedder(load=False))
        info["embedder"] = (
            {"tier": "lexical-only", "reason": "disabled by environment", "name": None} if emb is None
            else {"tier": "vector", "reason": "selected (not loaded; run doctor to load it)", "name": emb.name}
        )

    def embeddings() -> None:
        rows, skipped = EmbeddingsFile(p.embeddings).read_all()
        by_id = {obj["id"]: obj for _, obj in rows}
        name = info["embedder"].get("name")
        fresh = sum(1 for m in memories if m.id in by_id and by_id[m.id]["text_sha256"] == text_sha256(m.text)
                    and (name is None or by_id[m.id]["embedder"] == name))
        info["embeddings"] = {"lines": len(rows), "current": fresh, "to_embed": len(memories) - fresh if name else 0}
        warnings.extend(f"{p.embeddings}:{s.line}: {s.reason}" for s in skipped)

    check(embeddings)
    fix = "run `memofs doctor --fix` to rebuild it from memories.jsonl"
    for f in check(store.orphan_temp_files, []):
        problems.append(f"orphan temp file {p.rel(f)} ({f.stat().st_size} bytes; a writer died before its rename); "
                        "run `memofs doctor --fix` to remove it")
    if load_embedder:  # doctor runs what the commands run (memofs.store.health, shared with memofs://health)
        from memofs.store.health import command_problems

        # a failure status already reported (a malformed memories line) is not repeated as recall's
        problems.extend(p_ for p_ in check(lambda: command_problems(store), []) if not any(p_.endswith(q) for q in problems))
    if load_embedder and report is not None:
        no_event, no_facts = check(lambda: store.missing_derived(memories), ([], []))
        if no_event:
            problems.append(f"{len(no_event)} memories have no memory.created event (first: {no_event[0].id}); {fix}")
        if no_facts:
            problems.append(f"{len(no_facts)} memories have graph facts missing (first: {no_facts[0].id}); {fix}")
    info["warnings"] = warnings
    info["problems"] = problems
    info["healthy"] = not problems
    return info


def _print_health(info: dict[str, Any]) -> None:
    typer.echo(f"store:      {info['store']}")
    typer.echo(f"memories:   {info['memories']} " + (f"({', '.join(f'{k} {v}' for k, v in sorted(info['kinds'].items()))})" if info["kinds"] else ""))
    if "events" in info:
        typer.echo(f"events:     {info['events']}")
    if "graph" in info:
        typer.echo(f"graph:      {info['graph']['nodes']} nodes, {info['graph']['edges']} edges")
    e = info["embedder"]
    typer.echo(f"embedder:   {e['tier']}" + (f" ({e['name']})" if e.get("name") else "") + f" - {e['reason']}")
    if "embeddings" in info:
        em = info["embeddings"]
        typer.echo(f"embeddings: {em['lines']} lines, {em['current']} current, {em['to_embed']} to embed")
    typer.echo(f"profile:    {info.get('profile', 'reference')}")
    typer.echo(f"core.md:    {info['core_bytes']} bytes")
    typer.echo(f"stale anchors: {len(info['stale_anchors'])}")
    for s in info["stale_anchors"]:
        typer.echo(f"  {s['id']}: {s['path']} {s['change']}")
    for w in info["warnings"]:
        typer.echo(f"warning: {w}")
    for pr in info["problems"]:
        typer.echo(f"problem: {pr}")
    typer.echo("healthy" if info["healthy"] else "UNHEALTHY")


@app.command(epilog="Examples:\n\n  memofs status --json\n\n  memofs status --hook")
def status(
    ctx: typer.Context,
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
    hook: bool = typer.Option(False, "--hook", help="For agent hooks (upstream's flag): one summary line, problems on stderr, exit 0 even when unhealthy so a hook never blocks the agent."),
) -> None:
    """Store health, embedder tier in use, stale anchors (does not load the model); lists
    every problem found and exits 1 when there is one (0 with --hook)."""
    as_json = as_json or ctx.obj.json

    def run() -> None:
        info = _health(ctx, load_embedder=False)
        if hook:
            for pr in info["problems"]:
                typer.echo(f"memofs: problem: {pr}", err=True)
            if as_json:
                _emit(info)
            else:
                typer.echo(f"memofs: {info['memories']} memories, {len(info['stale_anchors'])} stale anchors, "
                           + ("healthy" if info["healthy"] else f"{len(info['problems'])} problems (run memofs doctor)"))
            return
        _emit(info) if as_json else _print_health(info)
        if not info["healthy"]:
            raise typer.Exit(EXIT_ERROR)

    _guard(run)


@app.command(epilog="Examples:\n\n  memofs doctor || echo 'store needs attention'\n\n  memofs doctor --fix")
def doctor(
    ctx: typer.Context,
    fix: bool = typer.Option(False, "--fix", help="First rebuild derived data (events, graph facts) from memories.jsonl, remove orphan temp files and damaged caches."),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
) -> None:
    """Like status, but loads the embedder to verify the tier and checks derived data
    (events, graph facts, orphan temp files); exits 1 when unhealthy."""
    as_json = as_json or ctx.obj.json

    def run() -> None:
        fixed = []
        if fix:
            from memofs.store.health import repair_caches

            store = _store(ctx)
            fixed = repair_caches(store) + store.repair()
        info = _health(ctx, load_embedder=True)
        info["fixed"] = fixed
        if not as_json:
            for line in fixed:
                typer.echo(f"fixed: {line}")
        _emit(info) if as_json else _print_health(info)
        if not info["healthy"]:
            raise typer.Exit(EXIT_ERROR)

    _guard(run)


def _generate_agent(target: str) -> None:
    """Register ``memofs generate agent TARGET`` for one agent (each with its own --help)."""
    from memofs.surfaces.agent_files import TARGETS

    t = TARGETS[target]
    files = ", ".join(f for f in (t.rules, t.config, t.hooks) if f)

    @agent_app.command(target, epilog=f"Example:  memofs generate agent {target} --project-name \"My API\"",
                       help=f"Write {target}'s agent instructions, MCP client configuration and hooks ({files}).")
    def command(
        ctx: typer.Context,
        project_name: str = typer.Option(..., "--project-name", help="Project name used in the instructions."),
        force: bool = typer.Option(False, "--force", "-f", help="Replace an existing memofs block / server entry / hook."),
        no_mcp: bool = typer.Option(False, "--no-mcp", help="Do not write the MCP client configuration."),
        no_hooks: bool = typer.Option(False, "--no-hooks", help="Do not write hooks."),
        as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
    ) -> None:
        as_json = as_json or ctx.obj.json

        def run() -> None:
            from memofs.surfaces.agent_files import generate

            root = ctx.obj.root.resolve()
            if not root.is_dir():
                raise CliError(f"project root {root} is not a directory")
            try:
                written = generate(root, target, project_name, force=force, mcp=not no_mcp, hooks=not no_hooks)
            except ValueError as exc:
                raise CliError(str(exc)) from None
            if as_json:
                _emit([{"path": str(w.path), "action": w.action} for w in written])
            else:
                for w in written:
                    typer.echo(f"{w.action}: {w.path}")

        _guard(run)


for _target in ("claude", "codex", "gemini", "copilot", "cursor", "opencode"):
    _generate_agent(_target)


@app.command(epilog="Example (client config):  {\"command\": \"memofs\", \"args\": [\"--root\", \".\", \"mcp\"]}")
def mcp(
    ctx: typer.Context,
    read_only: bool = typer.Option(False, "--read-only", help="Refuse writes: memofs.remember and memofs.consolidate with apply (also MEMOFS_MCP_READ_ONLY=1/true/yes/on; other values than these and 0/false/no/off refuse to start)."),
    http: str = typer.Option(None, "--http", metavar="HOST:PORT", help="Serve Streamable HTTP at http://HOST:PORT/mcp instead of stdio."),
    as_of: Optional[str] = typer.Option(None, "--as-of", metavar="ISO-8601", help=AS_OF_HELP),
) -> None:
    """Serve the MCP tools (memofs.recall, memofs.context, memofs.remember, memofs.consolidate),
    resources and prompts over stdio, or over Streamable HTTP with --http."""

    def run() -> None:
        from memofs.surfaces.mcp_server import parse_http, serve

        if http is not None:
            try:
                parse_http(http)
            except ValueError as exc:
                raise CliError(str(exc)) from None
        ro = env_flag("MEMOFS_MCP_READ_ONLY") or read_only
        kernels.prefer("numba")  # a long-lived server: the compiled kernels pay for their load
        serve(_store(ctx, as_of), cache_clock=time.time, embedder=_embedder(), read_only=ro, http=http)

    _guard(run)


def _onnx_model_file() -> Any:
    from memofs.signals.embedders.onnx_minilm import ModelFile
    from memofs.signals.embedders.local import default_model_path

    return ModelFile.for_source(default_model_path())


@embedder_app.command("build", epilog="Example:  MEMOFS_MODEL_CACHE=/opt/memofs-models memofs embedder build")
def embedder_build(force: bool = typer.Option(False, "--force", help="Export again even when a valid file exists.")) -> None:
    """Export the bundled MiniLM weights to the ONNX file recall uses (needs torch and onnx,
    no network); the file goes to $MEMOFS_MODEL_CACHE or the user cache, never a store."""
    from memofs.signals.embedders.base import EmbedderError

    def run() -> None:
        try:
            mf = _onnx_model_file()
            mf.ensure(force=force)
            mf.verify()
        except EmbedderError as exc:
            raise CliError(str(exc)) from None
        typer.echo(str(mf.path))

    _guard(run)


@embedder_app.command("check", epilog="Example:  memofs embedder check")
def embedder_check() -> None:
    """Verify the ONNX model file against the SHA-256 recorded beside it (exit 1 if missing or corrupt)."""
    from memofs.signals.embedders.base import EmbedderError

    def run() -> None:
        try:
            mf = _onnx_model_file()
            mf.verify()
        except EmbedderError as exc:
            raise CliError(str(exc)) from None
        typer.echo(f"ok {mf.path}")

    _guard(run)


def _argv_problem(argv: list[str]) -> str | None:
    """Python decodes undecodable argv bytes to lone surrogates; name the argument."""
    for i, arg in enumerate(argv, start=1):
        try:
            arg.encode("utf-8")
        except UnicodeEncodeError:
            shown = arg.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
            return f"argument {i} ({shown!r}) is not valid UTF-8"
    return None


def main() -> None:
    problem = _argv_problem(sys.argv[1:])
    kernels.prefer("numpy")  # one query per process (``memofs mcp`` switches back)
    try:
        kernels.backend()
    except ValueError as exc:
        problem = problem or str(exc)
    if problem:
        typer.echo(f"memofs: error: {problem}", err=True)
        sys.exit(EXIT_ERROR)
    app(prog_name="memofs")


if __name__ == "__main__":
    main()
