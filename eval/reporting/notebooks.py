"""Execute the notebooks under ``notebooks/`` headless (``make notebooks``, CI).

    python -m memofs_eval.reporting.notebooks [--only 01 03] [--timeout 300] [--out reports/notebooks]
                                    [--spec SPEC] [--dataset NAME] [--report DIR] [--figures DIR] [--systems DIR]

Each notebook runs top to bottom in a fresh ``python3`` kernel of the current interpreter
(nbclient), with the notebook folder as working directory and a per-notebook timeout
(all cells together).
Executed copies go to ``--out`` (the committed notebooks stay output-free); the figures
go where :mod:`memofs_eval.reporting.notebook_api` says (``reports/figures`` by default).
Exit codes: 0 every notebook ran; 1 a cell raised or a notebook timed out; 2 bad usage.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import memofs_eval._env  # noqa: F401  (offline, cache and Agg variables, inherited by kernels)
from memofs_eval._env import REPO
from memofs_eval.reporting.notebook_api import DATASET_ENV, FIGURES_ENV, REPORT_ENV, SPEC_ENV, SYSTEMS_ENV, figures_dir

NOTEBOOKS = REPO / "notebooks"
OUT = REPO / "reports" / "notebooks"
KERNEL = "python3"
DEFAULT_TIMEOUT_S = 420  # the notebooks aim at 3 minutes on 2 cores; slack for a busy CI machine


@dataclass
class Outcome:
    """One notebook's execution: ``status`` is ok | error | timeout."""

    name: str
    status: str
    seconds: float
    cells: int
    message: str = ""
    figures: tuple[str, ...] = ()


def select(folder: Path, only: list[str] | None) -> list[Path]:
    """Notebooks in ``folder`` by name order; ``only`` keeps those whose name starts with
    (or equals, without ``.ipynb``) one of the given prefixes."""
    found = sorted(folder.glob("*.ipynb"))
    if not only:
        return found
    return [p for p in found if any(p.name.startswith(o) or p.stem == o for o in only)]


def kernel_manager():
    """``None`` when the ``python3`` kernel spec launches this interpreter (jupyter_client
    maps a bare ``python``/``python3`` argv to ``sys.executable``); otherwise an in-memory
    kernel manager for ipykernel on ``sys.executable``, so nothing is installed or registered."""
    from jupyter_client.kernelspec import KernelSpec, KernelSpecManager, NoSuchKernel

    try:
        argv0 = KernelSpecManager().get_kernel_spec(KERNEL).argv[0]
    except NoSuchKernel:
        argv0 = ""
    this = {"python", "python3", f"python{sys.version_info[0]}.{sys.version_info[1]}", sys.executable}
    if argv0 in this:
        return None
    from ipykernel.kernelspec import RESOURCES, get_kernel_dict
    from jupyter_client.manager import KernelManager

    class _ThisInterpreter(KernelSpecManager):
        def get_kernel_spec(self, kernel_name: str) -> KernelSpec:
            return KernelSpec(resource_dir=RESOURCES, **get_kernel_dict())

    return KernelManager(kernel_name=KERNEL, kernel_spec_manager=_ThisInterpreter())


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _error_text(exc: BaseException) -> str:
    """The last lines of a cell error (nbclient puts the traceback in the message), without
    the terminal colour codes IPython adds."""
    lines = [ln for ln in _ANSI.sub("", str(exc)).splitlines() if ln.strip()]
    return "\n".join(lines[-8:])


def execute(path: Path, out_dir: Path, timeout: int) -> Outcome:
    """Run one notebook; write the executed copy to ``out_dir`` whatever happens."""
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

    nb = nbformat.read(path, as_version=4)
    before = {p.name: p.stat().st_mtime_ns for p in figures_dir().glob("*.png")} if figures_dir().is_dir() else {}
    t0 = time.perf_counter()
    deadline = t0 + timeout

    def cell_budget(_cell) -> int:
        """nbclient's timeout is per cell: each cell gets what is left of the notebook's."""
        return max(1, int(deadline - time.perf_counter()))

    client = NotebookClient(nb, timeout=timeout, timeout_func=cell_budget, kernel_name=KERNEL, km=kernel_manager(),
                            resources={"metadata": {"path": str(path.parent)}})
    status, message = "ok", ""
    try:
        client.execute()
    except CellTimeoutError as exc:
        status, message = "timeout", f"the notebook ran past {timeout} s: {_error_text(exc)}"
    except (CellExecutionError, DeadKernelError) as exc:
        status, message = "error", _error_text(exc)
    seconds = time.perf_counter() - t0
    out_dir.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, out_dir / path.name)
    figs = figures_dir()
    written = tuple(sorted(p.name for p in figs.glob("*.png") if before.get(p.name) != p.stat().st_mtime_ns)) if figs.is_dir() else ()
    cells = sum(1 for c in nb.cells if c.cell_type == "code")
    return Outcome(path.name, status, round(seconds, 1), cells, message, written)


def summary(outcomes: list[Outcome]) -> str:
    lines = [f"{'notebook':<32} {'status':<8} {'seconds':>8} {'cells':>6} figures"]
    for o in outcomes:
        lines.append(f"{o.name:<32} {o.status:<8} {o.seconds:>8.1f} {o.cells:>6} {len(o.figures)}")
        if o.message:
            lines += ["    " + ln for ln in o.message.splitlines()]
    bad = [o.name for o in outcomes if o.status != "ok"]
    lines.append(f"{len(outcomes) - len(bad)}/{len(outcomes)} notebooks ran" + (f"; FAILED: {', '.join(bad)}" if bad else ""))
    return "\n".join(lines)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m memofs_eval.reporting.notebooks", description="execute notebooks/*.ipynb headless")
    p.add_argument("--only", nargs="+", help="name prefixes to run (e.g. 01 05_locomo)")
    p.add_argument("--timeout", type=int, default=DEFAULT_TIMEOUT_S, help="seconds per notebook (all its cells together) before it fails")
    p.add_argument("--notebooks", default=str(NOTEBOOKS), help="folder of notebooks")
    p.add_argument("--out", default=str(OUT), help="folder for the executed copies")
    p.add_argument("--spec", help=f"spec for the notebooks ({SPEC_ENV})")
    p.add_argument("--dataset", help=f"dataset name inside the spec ({DATASET_ENV})")
    p.add_argument("--report", help=f"report folder to read ({REPORT_ENV}; default reports/latest)")
    p.add_argument("--figures", help=f"figure folder ({FIGURES_ENV}; default reports/figures)")
    p.add_argument("--systems", help=f"systems study report folder ({SYSTEMS_ENV}; default reports/systems)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.timeout < 1:
        print("--timeout must be >= 1 second", file=sys.stderr)
        return 2
    # the kernels inherit this process's environment: that is how parameters reach them
    for var, value in ((SPEC_ENV, args.spec), (DATASET_ENV, args.dataset), (REPORT_ENV, args.report), (FIGURES_ENV, args.figures),
                       (SYSTEMS_ENV, args.systems)):
        if value:
            os.environ[var] = str(Path(value).resolve()) if var != DATASET_ENV else value
    folder = Path(args.notebooks)
    paths = select(folder, args.only)
    if not paths:
        print(f"{folder}: no notebook matches {args.only or '*.ipynb'}", file=sys.stderr)
        return 2
    outcomes = []
    for p in paths:
        print(f"running {p.name} ...", flush=True)
        outcomes.append(execute(p, Path(args.out), args.timeout))
    print(summary(outcomes))
    return 0 if all(o.status == "ok" for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
