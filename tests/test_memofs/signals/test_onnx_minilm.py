"""The torch-free MiniLM (issue 38) against independent truth: sentence-transformers' own
vectors on every bundled text, its tokenizer's truncation, the recorded SHA-256 of the
exported file recomputed here, and the modules a real CLI / MCP process imported."""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path

import anyio
import numpy as np
import pytest

from memofs.signals.embedders import EmbedderError, select_embedder
from memofs.signals.embedders import onnx_minilm
from memofs.signals.embedders.local import DEFAULT_NAME, LocalEmbedder, default_model_path
from memofs.signals.embedders.onnx_minilm import CACHE_ENV, ModelFile, OnnxMiniLMEmbedder, file_sha256

HEAVY = ("torch", "sentence_transformers", "transformers", "httpx")
"""Never imported by a CLI recall with MiniLM; the MCP server imports httpx (the SDK's), not the rest."""
MEMOFS = str(Path(sys.executable).with_name("memofs"))
# runs the CLI and writes the heavy modules it imported to $PROBE_OUT at exit or SIGTERM
# (the MCP client ends the server with a signal)
PROBE = (
    "import atexit, json, os, signal, sys\n"
    "def probe(*_):\n"
    "    mods = sorted(m for m in sys.modules if m.split('.')[0] in %r)\n"
    "    open(os.environ['PROBE_OUT'], 'w').write(json.dumps(mods))\n"
    "atexit.register(probe)\n"
    "signal.signal(signal.SIGTERM, lambda *a: (probe(), os._exit(0)))\n"
    "sys.argv = ['memofs', *sys.argv[1:]]\n"
    "from memofs.surfaces.cli import main\n"
    "main()\n"
) % (HEAVY,)


@pytest.fixture(scope="session")
def model_cache() -> Path:
    """The tests' temporary model cache (conftest: never the user's), exported once."""
    cache = Path(os.environ[CACHE_ENV])
    ModelFile.for_source(default_model_path(), {CACHE_ENV: str(cache)}).ensure()
    return cache


@pytest.fixture(scope="session")
def onnx(model_cache) -> OnnxMiniLMEmbedder:
    return OnnxMiniLMEmbedder(env={CACHE_ENV: str(model_cache)})


def _copy_cache(model_cache: Path, dest: Path) -> ModelFile:
    for f in model_cache.iterdir():
        if f.suffix in (".onnx", ".json", ".data"):
            shutil.copy2(f, dest / f.name)
    return ModelFile.for_source(default_model_path(), {CACHE_ENV: str(dest)})


def _bundled_texts() -> list[str]:
    from memofs_datasets.format import bundled_datasets, load_dataset

    texts: list[str] = []
    for path in bundled_datasets().values():
        ds = load_dataset(path)
        texts += [m.text for m in ds.memories] + [q.text for q in ds.queries]
    return texts


@pytest.mark.slow
def test_vectors_equal_sentence_transformers_on_every_bundled_text(onnx):
    """Every memory and query text of datasets/*/, plus two texts longer than 256 word pieces
    (truncation) and padded batches of mixed lengths: cosine >= 0.99999 with the
    sentence-transformers path, the same name and width."""
    texts = _bundled_texts()
    assert len(texts) >= 900
    texts += ["tenant metadata " * 400, "  padded and stripped  ", "Café Zürich " * 200]
    st = LocalEmbedder()
    a, b = onnx.encode(texts), st.encode(texts)
    assert a.shape == b.shape == (len(texts), 384) and a.dtype == np.float32
    assert onnx.name == st.name == DEFAULT_NAME and onnx.dim == st.dim
    cos = np.einsum("ij,ij->i", a.astype(np.float64), b.astype(np.float64))
    assert cos.min() >= 0.99999, (cos.min(), texts[int(cos.argmin())][:80])
    np.testing.assert_allclose(np.linalg.norm(a, axis=1), 1.0, atol=1e-5)


def test_truncation_is_sentence_transformers_max_seq_length(onnx):
    """256 word pieces, as sentence-transformers reads it from sentence_bert_config.json
    (the package's tokenizer.json itself says 128)."""
    st = LocalEmbedder().load()
    onnx.load()
    long_text = "tenant metadata lives in D1 " * 100
    ours = onnx._tokenizer.encode(long_text)
    theirs = st.tokenize([long_text])["input_ids"][0].tolist()
    assert st.max_seq_length == onnx.max_seq_length == 256
    assert ours.ids == theirs and len(ours.ids) == 256


def test_record_digest_is_the_files_sha256(model_cache):
    mf = ModelFile.for_source(default_model_path(), {CACHE_ENV: str(model_cache)})
    rec = json.loads(mf.record.read_text())
    assert rec["sha256"] == file_sha256(mf.path) and rec["size"] == mf.path.stat().st_size
    assert rec["data_sha256"] == file_sha256(mf.data) and rec["data_size"] == mf.data.stat().st_size
    assert mf.data.stat().st_size > 80e6 > 1e6 > mf.path.stat().st_size  # the weights live in the mapped file
    assert mf.state(full=True) == "ok"
    assert not [p for p in model_cache.iterdir() if p.name.endswith(".tmp")]


@pytest.mark.parametrize("damage", ["flip", "truncate", "flip-data", "truncate-data", "delete-data"])
def test_corrupt_file_gives_one_line_naming_file_and_rebuild(model_cache, tmp_path, damage):
    mf = _copy_cache(model_cache, tmp_path)
    bad = mf.data if damage.endswith("-data") else mf.path
    raw = bytearray(bad.read_bytes())
    if damage.startswith("flip"):
        raw[len(raw) // 2] ^= 0xFF  # same size, one byte changed (of the weights, in the data file)
    else:
        raw = raw[: len(raw) // 3]
    if damage == "delete-data":
        bad.unlink()
    else:
        bad.write_bytes(bytes(raw))
    assert mf.state() == "corrupt"
    emb = OnnxMiniLMEmbedder(env={CACHE_ENV: str(tmp_path)})
    with pytest.raises(EmbedderError) as err:
        emb.load()
    msg = str(err.value)
    assert "\n" not in msg and str(bad) in msg and "memofs embedder build --force" in msg
    if damage != "delete-data":
        assert bad.read_bytes() == bytes(raw)  # not silently replaced


def test_interrupted_export_leaves_nothing(model_cache, tmp_path, monkeypatch):
    """The exporter dies after writing part of its file: no model, no record, no temp file."""
    import torch

    def dies(model, args, f, **kw):
        Path(f).write_bytes(b"partial onnx")
        raise KeyboardInterrupt  # as Ctrl-C would

    monkeypatch.setattr(torch.onnx, "export", dies)
    mf = ModelFile.for_source(default_model_path(), {CACHE_ENV: str(tmp_path)})
    with pytest.raises(KeyboardInterrupt):
        mf.ensure()
    assert sorted(p.name for p in tmp_path.iterdir()) == [mf.path.name + ".lock"]
    assert mf.state() == "missing"


@pytest.mark.slow
def test_two_processes_starting_at_once_export_once(tmp_path):
    code = (
        "import sys\n"
        "from memofs.signals.embedders import onnx_minilm as m\n"
        "from memofs.signals.embedders.local import default_model_path\n"
        "real = m.export_onnx\n"
        "def counted(*a):\n"
        "    print('EXPORTED', flush=True)\n"
        "    real(*a)\n"
        "m.export_onnx = counted\n"
        "m.ModelFile.for_source(default_model_path(), {'MEMOFS_MODEL_CACHE': sys.argv[1]}).ensure()\n"
        "print('READY')\n"
    )
    procs = [subprocess.Popen([sys.executable, "-c", code, str(tmp_path)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1][-500:] for o in outs]
    assert sum(o[0].count("EXPORTED") for o in outs) == 1 and all("READY" in o[0] for o in outs)
    mf = ModelFile.for_source(default_model_path(), {CACHE_ENV: str(tmp_path)})
    assert mf.state(full=True) == "ok"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([mf.path.name, mf.data.name, mf.record.name, mf.path.name + ".lock"])


def test_selection_default_is_onnx_and_env_chooses_the_torch_path(model_cache):
    env = {CACHE_ENV: str(model_cache)}
    assert isinstance(select_embedder(env, prewarm=False), OnnxMiniLMEmbedder)
    assert isinstance(select_embedder({**env, "MEMOFS_EMBEDDER": "sentence-transformers"}, prewarm=False), LocalEmbedder)
    other = select_embedder({**env, "MEMOFS_EMBEDDING_MODEL": str(default_model_path())}, prewarm=False)
    assert isinstance(other, LocalEmbedder)


def test_without_torch_and_no_model_file_one_line_then_lexical_only(tmp_path):
    """An install without torch and without a model file: an error line naming the file and
    how to build it, then (sentence-transformers unusable too) lexical-only."""
    code = (
        "import sys, logging\n"
        "sys.modules['torch'] = None\n"
        "logging.basicConfig(level=logging.WARNING, format='%(levelname)s %(message)s')\n"
        "from memofs.signals.embedders import select_embedder\n"
        f"print('RESULT', select_embedder({{'MEMOFS_MODEL_CACHE': {str(tmp_path)!r}}}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert "RESULT None" in out.stdout, out.stderr
    first = out.stderr.splitlines()[0]
    assert first.startswith("ERROR") and str(tmp_path) in first and "memofs embedder build" in first
    assert "Traceback" not in out.stderr
    assert not [p for p in tmp_path.iterdir() if p.suffix in (".onnx", ".tmp", ".json")]


def _env(model_cache: Path, probe: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMOFS_")}
    return {**env, "HF_HUB_OFFLINE": "1", CACHE_ENV: str(model_cache), "PROBE_OUT": str(probe), **extra}


def _cli(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, env=env, timeout=300)


def _small_store(tmp_path: Path, model_cache: Path, texts: tuple[str, ...]) -> tuple[Path, Path, dict[str, str]]:
    """A store made by the CLI (init + remember, both probed); its root, the probe file, the env."""
    store = tmp_path / "store"
    store.mkdir()
    probe = tmp_path / "probe.json"
    env = _env(model_cache, probe)
    assert _cli(["--root", str(store), "init"], env).returncode == 0
    for text in texts:
        res = _cli(["--root", str(store), "remember", text, "--kind", "decision"], env)
        assert res.returncode == 0, res.stderr
    return store, probe, env


def test_cli_recall_with_minilm_imports_no_torch(model_cache, tmp_path):
    store, probe, env = _small_store(tmp_path, model_cache, (
        "Use D1 for tenant metadata", "PgBouncer caps PostgreSQL connections", "Deploys happen on Tuesdays"))
    res = _cli(["--json", "--root", str(store), "recall", "-q", "database driver for tenant metadata", "--explain"], env)
    assert res.returncode == 0, res.stderr
    assert json.loads(probe.read_text()) == []  # nor the providers' HTTP client (issue 38: ~65 ms a process)
    out = json.loads(res.stdout)
    assert out["results"][0]["explain"]["weights"]["w_vec"] > 0  # the vector signal took part
    emb_file = store / ".memofs" / "indexes" / "embeddings.jsonl"
    lines = [json.loads(line) for line in emb_file.read_text().splitlines() if line.strip()]
    assert len(lines) == 3 and {r["embedder"] for r in lines} == {DEFAULT_NAME}


def test_mcp_first_answer_with_minilm_imports_no_torch(model_cache, tmp_path):
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    store, probe, env = _small_store(tmp_path, model_cache, ("Use D1 for tenant metadata",))

    async def first_answer() -> dict:
        params = StdioServerParameters(command=sys.executable, args=["-c", PROBE, "--root", str(store), "mcp"], env=env)
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as s:
                await s.initialize()
                res = await s.call_tool("memofs.recall", {"query": "tenant database", "limit": 1, "explain": True})
                return res.structured_content

    answer = anyio.run(first_answer)
    assert answer["items"][0]["explain"]["weights"]["w_vec"] > 0, answer
    assert [m for m in json.loads(probe.read_text()) if not m.startswith("httpx")] == []


def test_tier_warning_is_logged_once_when_onnxruntime_is_missing(model_cache, caplog, monkeypatch):
    """onnxruntime not importable: one warning, then the sentence-transformers path (same name)."""
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    monkeypatch.setattr(onnx_minilm, "_SESSIONS", {})
    caplog.set_level(logging.WARNING, logger="memofs.embedders")
    emb = select_embedder({CACHE_ENV: str(model_cache)})
    assert isinstance(emb, LocalEmbedder) and emb.name == DEFAULT_NAME
    assert sum(r.levelno == logging.WARNING for r in caplog.records) == 1


def test_harness_device_auto_is_cuda_only_when_torch_sees_one(monkeypatch):
    """eval's MiniLM stays the sentence-transformers embedder (same name: no committed
    figure moves) and embeds on ``auto``: cuda when torch.cuda.is_available(), else cpu."""
    import torch

    from memofs.signals.embedders.local import resolve_device
    from memofs_eval.runs.embed import DEVICE, embed_device, make_embedder

    emb = make_embedder("minilm")
    assert isinstance(emb, LocalEmbedder) and emb.name == DEFAULT_NAME and emb.device == DEVICE == "auto"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert resolve_device("auto") == embed_device() == "cuda"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_device("auto") == embed_device() == "cpu"
    assert resolve_device("cpu") == "cpu"
    monkeypatch.setitem(sys.modules, "torch", None)  # no torch at all: the CPU
    assert resolve_device("auto") == "cpu"


def test_copied_file_is_checked_by_digest_once(model_cache, tmp_path):
    """A file copied into a cache (new mtime) is hashed once against its record, which then
    notes the new mtime; a damaged copy is refused however it got there."""
    src = ModelFile.for_source(default_model_path(), {CACHE_ENV: str(model_cache)})
    shutil.copy(src.path, tmp_path / src.path.name)  # mtime of the copy, not the original's
    shutil.copy(src.data, tmp_path / src.data.name)
    shutil.copy(src.record, tmp_path / src.record.name)
    mf = ModelFile.for_source(default_model_path(), {CACHE_ENV: str(tmp_path)})
    assert json.loads(mf.record.read_text())["mtime_ns"] != mf.path.stat().st_mtime_ns
    assert mf.state() == "ok"
    rec = json.loads(mf.record.read_text())
    assert rec["mtime_ns"] == mf.path.stat().st_mtime_ns and rec["sha256"] == file_sha256(mf.path)
    assert rec["data_mtime_ns"] == mf.data.stat().st_mtime_ns and rec["data_sha256"] == file_sha256(mf.data)


@pytest.mark.slow  # a CLI process that falls back to torch's MiniLM
def test_cli_recall_with_a_corrupt_model_file_says_so_in_one_line(model_cache, tmp_path):
    """Without --verbose the CLI shows errors only: the damaged file's line is one of them,
    and recall still answers (through sentence-transformers: same vectors)."""
    cache = tmp_path / "cache"
    cache.mkdir()
    mf = _copy_cache(model_cache, cache)
    raw = bytearray(mf.data.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    mf.data.write_bytes(bytes(raw))
    store, _, env = _small_store(tmp_path, cache, ("Use D1 for tenant metadata",))
    res = _cli(["--root", str(store), "recall", "-q", "tenant database"], env)
    assert res.returncode == 0 and "Use D1 for tenant metadata" in res.stdout
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and str(mf.data) in lines[0] and "memofs embedder build --force" in lines[0], res.stderr


def test_a_background_load_gives_the_vectors_of_a_load_in_the_caller(model_cache, monkeypatch):
    """``load_soon`` (what a CLI recall asks for) only moves the load to a thread: the same
    session and tokenizer settings, so the same vectors, bit for bit."""
    texts = ["database driver for tenant metadata", "Deploys run on Fridays", "é" * 300]
    monkeypatch.setattr(onnx_minilm, "_SESSIONS", {})
    background = select_embedder({CACHE_ENV: str(model_cache)}, prewarm=True, background=True)
    assert isinstance(background, OnnxMiniLMEmbedder) and background._loader is not None
    got = background.encode(texts)
    assert background._loader is None
    monkeypatch.setattr(onnx_minilm, "_SESSIONS", {})
    direct = OnnxMiniLMEmbedder(env={CACHE_ENV: str(model_cache)})
    direct.load()
    assert np.array_equal(got, direct.encode(texts))


def test_a_failed_background_load_fails_the_first_encode_then_recall_is_lexical(model_cache, monkeypatch, caplog):
    """A load that fails on the thread raises in the caller's thread at the first encode
    (never lost, never raised twice); the Recaller's SafeEmbedder turns it into one warning
    and lexical-only, and the next call tries the load again."""
    from memofs.signals.embedders.select import SafeEmbedder

    calls = []

    def broken(path):
        calls.append(path)
        raise EmbedderError(f"the MiniLM model file {path} cannot be loaded (test)")

    monkeypatch.setattr(onnx_minilm, "_session", broken)
    caplog.set_level(logging.WARNING, logger="memofs.embedders")
    emb = select_embedder({CACHE_ENV: str(model_cache)}, prewarm=True, background=True)
    assert isinstance(emb, OnnxMiniLMEmbedder)
    safe = SafeEmbedder(emb)
    assert safe.encode(["tenant database"]) is None
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "cannot be loaded (test)" in warnings[0]
    assert len(calls) == 1
    with pytest.raises(EmbedderError):  # retried in the caller's thread, and failing again
        emb.load()
    assert len(calls) == 2


def test_background_is_not_used_when_the_model_file_is_damaged(model_cache, tmp_path, monkeypatch, caplog):
    """Only a model file in place loads on a thread: a damaged one is named in one error
    line by the selection itself, which then tries the torch path, as without ``background``."""
    from memofs.signals.embedders import select

    mf = _copy_cache(model_cache, tmp_path)
    raw = bytearray(mf.path.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    mf.path.write_bytes(bytes(raw))
    assert mf.state() == "corrupt"
    monkeypatch.setattr(select, "_torch_local", lambda model, prewarm: "the torch path")
    monkeypatch.setattr(OnnxMiniLMEmbedder, "load_soon", lambda self: pytest.fail("loaded on a thread"))
    caplog.set_level(logging.WARNING, logger="memofs.embedders")
    assert select_embedder({CACHE_ENV: str(tmp_path)}, prewarm=True, background=True) == "the torch path"
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(errors) == 1 and str(mf.path) in errors[0] and "memofs embedder build --force" in errors[0]


def test_release_lets_the_session_go_and_a_later_encode_loads_it_again(model_cache, monkeypatch):
    monkeypatch.setattr(onnx_minilm, "_SESSIONS", {})
    emb = OnnxMiniLMEmbedder(env={CACHE_ENV: str(model_cache)})
    before = emb.encode(["tenant database"])
    assert str(emb.model_file().path) in onnx_minilm._SESSIONS
    emb.release()
    assert onnx_minilm._SESSIONS == {} and emb._session is None and emb._tokenizer is None
    assert np.array_equal(emb.encode(["tenant database"]), before)
    emb.load_soon()
    emb.release()  # waits for the load in flight, then lets it go
    assert onnx_minilm._SESSIONS == {} and emb._loader is None


def test_a_cli_recall_embeds_its_query_once_then_releases_the_model(model_cache, tmp_path, monkeypatch):
    """The CLI recall embeds the text recall will embed (the rewritten query) before recall
    runs and lets the model go; recall's own encode is then answered from that vector: one
    session for the process, and the same results as a recall that kept the model."""
    from typer.testing import CliRunner

    from memofs.store.project import LiveStore, Store, wall_clock
    from memofs.surfaces.cli import app

    store = tmp_path / "store"
    store.mkdir()
    s = Store.init(store, clock=wall_clock)
    for text in ("Use D1 for tenant metadata", "PgBouncer caps PostgreSQL connections", "Deploys happen on Tuesdays"):
        s.remember(text)
    env = {CACHE_ENV: str(model_cache)}
    monkeypatch.setenv(CACHE_ENV, str(model_cache))
    monkeypatch.delenv("MEMOFS_EMBEDDER", raising=False)
    loads, real = [], onnx_minilm._session
    monkeypatch.setattr(onnx_minilm, "_SESSIONS", {})
    monkeypatch.setattr(onnx_minilm, "_session", lambda path: loads.append(path) or real(path))
    query = "which database driver for the tenant metadata, debugging"
    res = CliRunner().invoke(app, ["--root", str(store), "recall", "-q", query, "--task-type", "debug", "--json"])
    assert res.exit_code == 0, res.output
    assert len(loads) == 1 and onnx_minilm._SESSIONS == {}  # loaded once, released before recall
    got = [(r["id"], r["score"]) for r in json.loads(res.stdout)["results"]]
    # the reference: the same recall in a LiveStore whose model stays loaded throughout
    live = LiveStore(Store.open(store, clock=wall_clock), embedder=OnnxMiniLMEmbedder(env=env))
    want = live.state().recaller.recall(query, 10, task_type="debug", now=live.store.clock())
    # the two recalls run a moment apart on the wall clock: a score may round to the
    # neighbouring 4th decimal, never more
    assert [i for i, _ in got] == [r.id for r in want] and got
    assert all(abs(x - r.score) <= 1.0001e-4 for (_, x), r in zip(got, want))


def test_a_cli_recall_on_an_empty_store_embeds_nothing(model_cache, tmp_path, monkeypatch):
    """No memory has a vector, so recall compares the query with nothing: the CLI does not
    embed it either (the model's weights would be read for nothing)."""
    from typer.testing import CliRunner

    from memofs.store.project import Store, wall_clock
    from memofs.surfaces.cli import app

    (tmp_path / "store").mkdir()
    Store.init(tmp_path / "store", clock=wall_clock)
    monkeypatch.setenv(CACHE_ENV, str(model_cache))
    monkeypatch.delenv("MEMOFS_EMBEDDER", raising=False)
    encoded = []
    real = OnnxMiniLMEmbedder.encode
    monkeypatch.setattr(OnnxMiniLMEmbedder, "encode", lambda self, texts: encoded.append(list(texts)) or real(self, texts))
    res = CliRunner().invoke(app, ["--root", str(tmp_path / "store"), "recall", "-q", "tenant database", "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["results"] == [] and encoded == []


def test_a_cli_recall_whose_model_fails_to_load_answers_lexical_only(model_cache, tmp_path, monkeypatch, caplog):
    """The model loads on a thread and fails there: the recall still answers (lexical-only),
    exit 0, with one warning, never the loader's exception."""
    from typer.testing import CliRunner

    from memofs.store.project import Store, wall_clock
    from memofs.surfaces.cli import app

    store = tmp_path / "store"
    store.mkdir()
    s = Store.init(store, clock=wall_clock)
    for text in ("Use D1 for tenant metadata", "PgBouncer caps PostgreSQL connections"):
        s.remember(text)
    monkeypatch.setenv(CACHE_ENV, str(model_cache))
    monkeypatch.delenv("MEMOFS_EMBEDDER", raising=False)
    args = ["--root", str(store), "recall", "-q", "tenant database", "--json"]
    assert CliRunner().invoke(app, args).exit_code == 0  # a working model stores the vectors

    def broken(path):
        raise EmbedderError(f"the MiniLM model file {path} cannot be loaded (test)")

    monkeypatch.setattr(onnx_minilm, "_SESSIONS", {})
    monkeypatch.setattr(onnx_minilm, "_session", broken)
    caplog.set_level(logging.WARNING, logger="memofs.embedders")
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["results"][0]["text"] == "Use D1 for tenant metadata"
    warned = [r.getMessage() for r in caplog.records if "cannot be loaded (test)" in r.getMessage()]
    assert len(warned) == 1 and "lexical-only" in warned[0]
