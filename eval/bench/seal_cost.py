"""What sealing the index caches (issue 36 item 7) adds to a start, against the unsealed load
in the same run:

    python -m memofs_eval.bench.seal_cost [--n 100000] [--dim 384] [--rounds 3] [--baseline REV]

A store of ``n`` memories (the benchmark corpus) with ``dim``-d vectors (seeded) in
``embeddings.jsonl`` gets its sidecars written once by this checkout. Then the later start
(:func:`memofs.store.project.rehydrate`: memories, terms and vectors from their sidecars) is
timed in fresh processes, alternating between this checkout (seal verified, every column,
vector matrices included, digested) and ``REV`` (default: the commit before the seal,
``git archive``-d into a temporary folder), which reads its sidecars without either check
(each side starts from its own copy of the same store: their column digests differ). Each process times one start after its imports; the figure is the median over rounds.
Prints a small table and the ratio; writes nothing into the repository.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from memofs_eval.bench.corpus import corpus
from memofs_eval.bench.store import write_store
from memofs_eval.reporting.markdown import table

REPO = Path(__file__).resolve().parents[2]
BASELINE = "f9e6fe9"  # the last commit before the seal (issue 36 item 7)

_CHILD = r"""
import json, sys, time
from memofs.store.project import Store, rehydrate

class Fixed:  # the vectors are all stored: nothing is encoded
    name, dim = "bench-fixed", int(sys.argv[2])
    def encode(self, texts):
        raise AssertionError(f"asked to encode {len(texts)} texts")

store = Store.open(sys.argv[1])
t = time.perf_counter()
state = rehydrate(store, embedder=Fixed())
dt = time.perf_counter() - t
print(json.dumps({"seconds": dt, "loaded": state.loaded_vectors, "n": len(state.memories)}))
"""


def start(code: Path, root: Path, dim: int) -> dict:
    """One later start in a fresh process importing ``memofs`` from ``code``."""
    env = {"PYTHONPATH": str(code), "MEMOFS_EMBEDDER": "none", "HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"}
    import os

    env["HOME"] = os.environ.get("HOME", "/root")
    if "MEMOFS_CACHE_DIR" in os.environ:
        env["MEMOFS_CACHE_DIR"] = os.environ["MEMOFS_CACHE_DIR"]
    out = subprocess.run([sys.executable, "-c", _CHILD, str(root), str(dim)], cwd=code, env=env,
                         capture_output=True, text=True, timeout=600)
    if out.returncode:
        raise RuntimeError(out.stderr.strip().splitlines()[-1] if out.stderr.strip() else f"exit {out.returncode}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--baseline", default=BASELINE)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        old = Path(tmp) / "baseline"
        old.mkdir()
        archive = subprocess.run(["git", "-C", str(REPO), "archive", args.baseline, "memofs"], capture_output=True, check=True)
        subprocess.run(["tar", "-x", "-C", str(old)], input=archive.stdout, check=True)
        base = Path(tmp) / "store"
        base.mkdir()
        texts = corpus(args.n, seed=0)
        vectors = np.random.default_rng(0).standard_normal((args.n, args.dim)).astype(np.float32)
        write_store(base, texts, vectors, "bench-fixed", 0)
        del vectors
        # one copy of the same store per side: each writes and reads its own sidecars (their
        # column digests differ), so neither rebuilds what the other wrote
        sides = {"unsealed (baseline)": (old, Path(tmp) / "store-baseline"), "sealed (this checkout)": (REPO, base)}
        shutil.copytree(base, sides["unsealed (baseline)"][1])
        first = {label: start(code, root, args.dim) for label, (code, root) in sides.items()}  # writes the sidecars
        times: dict[str, list[float]] = {label: [] for label in sides}
        for _ in range(args.rounds):
            for label, (code, root) in sides.items():
                got = start(code, root, args.dim)
                assert got["loaded"] == args.n == got["n"], got  # every vector adopted from the sidecar
                times[label].append(got["seconds"])
        med = {k: statistics.median(v) for k, v in times.items()}
        firsts = ", ".join(f"{k} {v['seconds']:.1f} s" for k, v in first.items())
        print(f"later start of {args.n:,} memories with {args.dim}-d vectors (first starts: {firsts}), "
              f"median of {args.rounds} fresh processes each, alternating; baseline {args.baseline}")
        print(table(("load", "median s", "runs s"), [(k, f"{med[k]:.3f}", ", ".join(f"{x:.3f}" for x in v)) for k, v in times.items()]))
        print(f"ratio sealed / unsealed: {med['sealed (this checkout)'] / med['unsealed (baseline)']:.2f}")


if __name__ == "__main__":
    main()
