"""CLI and MCP processes with the default MiniLM (ONNX Runtime, no torch) against lexical-only.

    python -m memofs_eval.bench.processes [--quick] [--calls 3] [--sizes 0 100000]

Issue 38: every short process an agent starts (``memofs recall``, ``memofs remember``,
``memofs context --mark-session-start``, ``memofs mcp`` up to its first answer) timed as a
fresh process, wall time and peak RSS (``ru_maxrss`` of that child, read by a bare launcher), on an
empty store and on a store of N memories whose vectors are all stored (the recall
benchmark's vectors, written by :func:`memofs_eval.bench.store.write_store`). Each MiniLM
cell runs next to the same command with ``MEMOFS_EMBEDDER=none`` on the same store in the
same run, alternating, medians after one warm-up round (which also writes the sidecars
and the exported model file). Targets: recall on 100k <= 1.0 s and <= lexical + 0.35 s;
context and remember within 0.35 s of lexical; peak RSS of recall on 100k <= 1.5x lexical.
Plus the installed size of the environment the CLI needs, with ONNX Runtime against the
torch + sentence-transformers one.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

from memofs_eval.bench.corpus import corpus
from memofs_eval.bench.output import emit
from memofs_eval.bench.recall import REPORTS, Section, doc_vectors, embedding_cache, encode_cap, live_embedder
from memofs_eval.bench.store import START_QUERY, write_store
from memofs_eval.reporting.markdown import table

MEMOFS = [sys.executable, "-m", "memofs"]
COMMANDS: dict[str, list[str]] = {
    "recall": ["recall", "-q", START_QUERY, "--json"],
    "remember": ["remember", "bench note about the deploy window and the database backup"],
    "context --mark-session-start": ["context", "--mark-session-start"],
    "mcp first answer": ["mcp"],
}
EMBEDDERS: dict[str, dict[str, str]] = {"lexical": {"MEMOFS_EMBEDDER": "none"}, "MiniLM (ONNX)": {},
                                        "MiniLM (sentence-transformers)": {"MEMOFS_EMBEDDER": "sentence-transformers"}}
"""The peer (lexical-only), the default path, and the torch path it replaces (same vectors)."""


@dataclass(frozen=True)
class ProcessBenchConfig:
    sizes: tuple[int, ...] = (0, 100000)
    commands: tuple[str, ...] = tuple(COMMANDS)
    embedders: tuple[str, ...] = tuple(EMBEDDERS)  # the peer (lexical) always runs
    calls: int = 3  # timed processes per cell, after one warm-up round
    encode_cap: int = 6000
    noise: float = 0.025
    seed: int = 0


@dataclass
class Cell:
    command: str
    n: int
    embedder: str
    wall_s: list[float] = field(default_factory=list)
    rss_mb: list[float] = field(default_factory=list)
    cpu_s: list[float] = field(default_factory=list)  # user + system of the process: what the load does not inflate

    @property
    def wall(self) -> float:
        return statistics.median(self.wall_s)

    @property
    def rss(self) -> float:
        return statistics.median(self.rss_mb)

    @property
    def cpu(self) -> float:
        return statistics.median(self.cpu_s)


def _wait(proc: subprocess.Popen, timeout: float = 120.0) -> int:
    """Exit status of the launcher (killed after ``timeout``)."""
    deadline = time.monotonic() + timeout
    while True:
        pid, status = os.waitpid(proc.pid, os.WNOHANG)
        if pid:
            break
        if time.monotonic() > deadline:
            proc.kill()
            deadline = float("inf")
        time.sleep(0.01)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode


def _mcp_messages() -> bytes:
    from mcp.types import LATEST_PROTOCOL_VERSION

    msgs = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": LATEST_PROTOCOL_VERSION, "capabilities": {},
            "clientInfo": {"name": "bench", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
         "params": {"name": "memofs.recall", "arguments": {"query": START_QUERY, "limit": 10}}},
    ]
    return b"".join(json.dumps(m).encode() + b"\n" for m in msgs)


# Linux records a child's peak RSS from the memory of the process that forked it, so a
# parent as large as this benchmark would be every child's floor: a bare interpreter
# (-S -I, a few MB) forks and execs the command and writes the child's ru_maxrss (KiB) to a file.
_LAUNCH = (
    "import os, sys\n"
    "pid = os.fork()\n"
    "if pid == 0:\n"
    "    os.execv(sys.argv[2], sys.argv[2:])\n"
    "_, status, usage = os.wait4(pid, 0)\n"
    "open(sys.argv[1], 'w').write(f'{usage.ru_maxrss} {usage.ru_utime + usage.ru_stime}')\n"
    "sys.exit(os.waitstatus_to_exitcode(status))\n"
)


def run_once(command: str, root: Path, env: dict[str, str]) -> tuple[float, float, float]:
    """Wall seconds (for MCP: until the recall's answer arrives), peak RSS (MB) and CPU seconds
    (user + system, to its exit) of one process."""
    rss_file = root.parent / "maxrss"
    argv = [sys.executable, "-S", "-I", "-c", _LAUNCH, str(rss_file), *MEMOFS, "--root", str(root), *COMMANDS[command]]
    t = time.perf_counter()
    if command != "mcp first answer":
        with tempfile.TemporaryFile() as errf:
            proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=errf)
            out = proc.stdout.read()
            code = _wait(proc)
            wall = time.perf_counter() - t
            errf.seek(0)
            err = errf.read()
    else:
        proc = subprocess.Popen(argv, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        proc.stdin.write(_mcp_messages())
        proc.stdin.flush()
        out = b""
        for line in proc.stdout:
            if b'"id":2' in line.replace(b" ", b""):
                out = line
                break
        wall = time.perf_counter() - t
        proc.stdin.close()
        proc.stdout.read()
        code = _wait(proc)
        err = b"" if b'"result"' in out else b"no answer to tools/call"
        code = code if not err else 1
    if code != 0:
        tail = (err or out).decode("utf-8", "replace").strip().splitlines()[-1:] or ["?"]
        raise RuntimeError(f"`memofs {command}` on {root} failed (exit {code}): {tail[0]}")
    maxrss, cpu = rss_file.read_text().split()
    return wall, int(maxrss) / 1024, float(cpu)  # Linux: KiB


def build_stores(cfg: ProcessBenchConfig, tmp: Path) -> dict[int, Path]:
    from memofs.store import project as st
    from memofs_eval.bench.recall import NOW

    live, cache = live_embedder(), embedding_cache()
    roots = {}
    for n in cfg.sizes:
        root = tmp / f"store-{n}"
        root.mkdir()
        if n == 0:
            st.Store.init(root, now=NOW)
        else:
            texts = corpus(n, seed=cfg.seed + 7)
            vectors = doc_vectors(texts, encode_cap(cfg.encode_cap), cfg.noise, cfg.seed, cache, live)[0]
            write_store(root, texts, vectors, live.name, cfg.seed)
        roots[n] = root
    return roots


def bench(cfg: ProcessBenchConfig, roots: dict[int, Path]) -> list[Cell]:
    """Every cell, alternating, ``calls`` rounds after a warm-up. ``remember`` writes into
    its own copy of each store: the memories it adds would otherwise make the next MiniLM
    recall embed them and rewrite the vector sidecar, which is not what a recall costs."""
    base = {k: v for k, v in os.environ.items() if k not in ("MEMOFS_EMBEDDER", "MEMOFS_EMBED_ON_WRITE")}
    writable = {}
    for n, root in roots.items():
        writable[n] = root.parent / f"{root.name}-remember" / root.name
        shutil.copytree(root, writable[n])
    embedders = list(dict.fromkeys(["lexical", "MiniLM (ONNX)", *cfg.embedders]))  # the peer and the default always run
    cells = {(c, n, e): Cell(c, n, e) for c in cfg.commands for n in cfg.sizes for e in embedders}
    for i in range(cfg.calls + 1):  # round 0: warm-up (page cache, sidecars, model export)
        for (command, n, embedder), cell in cells.items():
            root = writable[n] if command == "remember" else roots[n]
            wall, rss, cpu = run_once(command, root, {**base, **EMBEDDERS[embedder]})
            if i:
                cell.wall_s.append(wall)
                cell.rss_mb.append(rss)
                cell.cpu_s.append(cpu)
    return list(cells.values())


def _closure(roots: list[str], skip: set[str]) -> dict[str, int]:
    """Installed bytes of each distribution reachable from ``roots`` through Requires-Dist
    (markers evaluated without extras), leaving out ``skip``."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    sizes: dict[str, int] = {}
    todo = [canonicalize_name(r) for r in roots]
    while todo:
        name = todo.pop()
        if name in sizes or name in skip:
            continue
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        sizes[name] = sum(f.size or 0 for f in dist.files or [])
        for spec in dist.requires or []:
            req = Requirement(spec)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(canonicalize_name(req.name))
    return sizes


def install_sizes() -> list[tuple[str, float, list[str]]]:
    """(what, MB, largest packages) for the CLI's runtime environment with ONNX Runtime and
    with torch + sentence-transformers (today's), from memofs's own core dependencies."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    core = [Requirement(r).name for r in metadata.requires("memofs") or [] if "extra ==" not in r]
    heavy = {"sentence-transformers", "torch", "transformers"}
    onnx_env = _closure([r for r in core if canonicalize_name(r) not in heavy | {"onnx"}], heavy)
    torch_env = _closure([r for r in core if canonicalize_name(r) not in {"onnxruntime", "onnx"}] + ["torch"], {"onnxruntime", "onnx"})
    out = []
    for what, env in (("CLI/MCP with MiniLM through ONNX Runtime (no torch, sentence-transformers, transformers)", onnx_env),
                      ("CLI/MCP with MiniLM through torch + sentence-transformers (no onnxruntime, onnx)", torch_env)):
        top = sorted(env.items(), key=lambda kv: -kv[1])[:5]
        out.append((what, sum(env.values()) / 1e6, [f"{k} {v / 1e6:.0f} MB" for k, v in top]))
    return out


def run(cfg: ProcessBenchConfig, quick: bool = False) -> Section:
    with tempfile.TemporaryDirectory() as tmp:
        roots = build_stores(cfg, Path(tmp))
        load_before = os.getloadavg()[0]
        cells = bench(cfg, roots)
        load_after = os.getloadavg()[0]
    by = {(c.command, c.n, c.embedder): c for c in cells}
    lines = ["(--quick smoke sizes, not a measurement)\n"] if quick else []
    lines += [
        f"Short processes as an agent starts them (`python -m memofs --root STORE ...`), wall time and peak RSS of each process, "
        f"median of {cfg.calls} after one warm-up round, cells alternating. MiniLM is the default local embedder "
        "(ONNX Runtime, `memofs.signals.embedders.onnx_minilm`, no torch in the process); the peer is the same command with "
        "`MEMOFS_EMBEDDER=none` on the same store in the same run; the last columns are the torch path it replaces "
        "(`MEMOFS_EMBEDDER=sentence-transformers`, same vectors). `mcp first answer`: `memofs mcp` started, initialized and "
        "answering one `memofs.recall` over stdio. `remember` does not embed (the next recall does). Targets (issue 38): "
        "recall on 100k <= 1.0 s and <= lexical + 0.35 s; context and remember within 0.35 s of lexical; recall's peak RSS "
        "on 100k <= 1.5x lexical. CPU s: user + system time of the process (wall time is inflated by other work on the "
        f"machine; 1-minute load average {load_before:.1f} before the timed rounds, {load_after:.1f} after, on "
        f"{os.cpu_count()} CPUs).", "",
    ]
    headline, rows = [], []
    for command in cfg.commands:
        for n in cfg.sizes:
            m, lx = by[(command, n, "MiniLM (ONNX)")], by[(command, n, "lexical")]
            st = by.get((command, n, "MiniLM (sentence-transformers)"))
            torch_cols = (f"{st.wall:.2f}", f"{st.rss:.0f}") if st else ("-", "-")  # left out with --embedders
            rows.append((command, f"{n:,}", f"{m.wall:.2f}", f"{lx.wall:.2f}", f"{m.wall - lx.wall:+.2f}", f"{m.cpu:.2f}",
                         f"{lx.cpu:.2f}", f"{m.rss:.0f}", f"{lx.rss:.0f}", f"{m.rss / lx.rss:.2f}x", *torch_cols))
            if n == max(cfg.sizes):
                headline.append((f"`memofs {command}` process on {n:,} memories with MiniLM (ONNX)", f"{m.wall:.2f} s, {m.rss:.0f} MB",
                                 f"{lx.wall:.2f} s, {lx.rss:.0f} MB (lexical-only)", f"{m.wall - lx.wall:+.2f} s, {m.rss / lx.rss:.2f}x RSS"))
    lines += [table(("command", "memories", "MiniLM s", "lexical s", "MiniLM - lexical s", "MiniLM CPU s", "lexical CPU s", "MiniLM MB",
                     "lexical MB", "RSS ratio", "sentence-transformers s", "sentence-transformers MB"), rows, "l" + "r" * 11),
              "", "Installed size of the runtime environment (memofs's core dependencies and theirs, from the installed "
              "distributions' file lists):", "",
              table(("environment", "MB", "largest"), [(what, f"{mb:,.0f}", ", ".join(top)) for what, mb, top in install_sizes()], "lrl")]
    return Section("CLI and MCP processes with MiniLM", "\n".join(lines), [], headline)


def quick_config() -> ProcessBenchConfig:
    return ProcessBenchConfig(sizes=(0, 300), calls=1, encode_cap=64)


def main(argv: list[str] | None = None) -> str:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="tiny sizes: a smoke run, not a measurement")
    ap.add_argument("--calls", type=int, default=None, help="timed processes per cell (default 3)")
    ap.add_argument("--sizes", type=int, nargs="+", default=None)
    ap.add_argument("--commands", nargs="+", choices=list(COMMANDS), default=None)
    ap.add_argument("--embedders", nargs="+", choices=[e for e in EMBEDDERS if e != "lexical"], default=None,
                    help="which to run beside lexical and MiniLM (ONNX), which always run (default: the torch path too, ~10 s a process)")
    ap.add_argument("--out", type=Path, default=REPORTS / "bench-processes.md")
    a = ap.parse_args(argv)
    cfg = quick_config() if a.quick else ProcessBenchConfig()
    cfg = ProcessBenchConfig(sizes=tuple(a.sizes or cfg.sizes), commands=tuple(a.commands or COMMANDS),
                             embedders=tuple(a.embedders or EMBEDDERS), calls=a.calls or cfg.calls, encode_cap=cfg.encode_cap)
    return emit(run(cfg, a.quick), a.out, "memofs_eval.bench.processes")


if __name__ == "__main__":
    main()
