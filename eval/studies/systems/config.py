"""A systems spec (TOML) and the adapter registry.

```toml
harness = "../default.toml"      # the harness spec whose datasets, k, metrics, headline, seed
                                 # and [stats] the systems are measured under
reference = "memofs-reference"   # the system every other one is paired against
timeout_s = 60                   # per call (ingest: per 100 memories)
isolate = true                   # each system in its own process (crash isolation, peak RSS)

[[systems]]
name = "memofs-reference"
adapter = "memofs"               # see ADAPTERS
options = { profile = "reference" }
```

A defect fails with one line naming the file, the line and the field
(:class:`~memofs_eval.inputs.spec.SpecError`, the harness spec's own error).
"""

from __future__ import annotations

import dataclasses
import importlib
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memofs_eval.inputs.spec import Spec, SpecError, load_spec, resolve_path
from memofs_eval.studies.systems.base import AdapterConfigError, System

# adapter name -> "module:Class" (imported only when used: optional dependencies)
ADAPTERS: dict[str, str] = {
    "memofs": "memofs_eval.studies.systems.memofs_library:MemofsLibrary",
    "memofs-cli": "memofs_eval.studies.systems.memofs_store:MemofsCli",
    "memofs-mcp": "memofs_eval.studies.systems.memofs_store:MemofsMcp",
    "mcp": "memofs_eval.studies.systems.mcp_client:McpSystem",
    "run-file": "memofs_eval.studies.systems.run_file:RunFile",
    "lancedb": "memofs_eval.studies.systems.lancedb_system:LanceDbSystem",
    "chroma": "memofs_eval.studies.systems.chroma_system:ChromaSystem",
    "mem0": "memofs_eval.studies.systems.mem0_system:Mem0System",
}
TOP_KEYS = ("harness", "datasets", "reference", "timeout_s", "isolate", "systems")
SYSTEM_KEYS = ("name", "adapter", "options", "note")


@dataclass(frozen=True)
class SystemSpec:
    name: str
    adapter: str
    options: dict = field(default_factory=dict, compare=False, hash=False)
    base: Path = Path(".")
    note: str = ""  # one line for the report: what the system is, how it was configured  # the spec's folder: relative option paths resolve against it

    def build(self) -> System:
        """The adapter instance; :class:`AdapterConfigError` (one line) for bad options."""
        return build(self)


@dataclass(frozen=True)
class SystemsSpec:
    path: Path
    harness: Spec
    systems: tuple[SystemSpec, ...]
    reference: str
    timeout_s: float = 60.0
    isolate: bool = True


def adapter_class(adapter: str) -> type[System]:
    module, _, cls = ADAPTERS[adapter].partition(":")
    return getattr(importlib.import_module(module), cls)


def check_options(system: str, options: dict[str, Any], fields: dict[str, tuple[type, ...]],
                  required: tuple[str, ...] = ()) -> None:
    """Unknown, missing or mistyped option -> :class:`AdapterConfigError` naming it."""
    for key, value in options.items():
        if key not in fields:
            raise AdapterConfigError(system, f"options.{key}", f"unknown option (allowed: {', '.join(fields) or 'none'})")
        if not isinstance(value, fields[key]) or (isinstance(value, bool) and bool not in fields[key]):
            want = " or ".join(t.__name__ for t in fields[key])
            raise AdapterConfigError(system, f"options.{key}", f"expected {want}, got {type(value).__name__} {value!r}")
    for key in required:
        if key not in options:
            raise AdapterConfigError(system, f"options.{key}", "required option is missing")


def build(spec: SystemSpec) -> System:
    if spec.adapter not in ADAPTERS:
        raise AdapterConfigError(spec.name, "adapter", f"unknown adapter {spec.adapter!r} (one of {', '.join(ADAPTERS)})")
    cls = adapter_class(spec.adapter)
    check_options(spec.name, spec.options, cls.OPTIONS, getattr(cls, "REQUIRED", ()))
    return cls(spec.name, base=spec.base, **spec.options)


def _systems_line(text: str, index: int, key: str) -> int | None:
    """Line of ``key =`` inside the ``index``-th ``[[systems]]`` table (1-based)."""
    seen, inside = -1, False
    for no, raw in enumerate(text.splitlines(), start=1):
        s = raw.strip()
        if s.startswith("["):
            inside = s == "[[systems]]"
            seen += inside
            continue
        if inside and seen == index and re.match(rf"^{re.escape(key)}\s*=", s):
            return no
    return None


def load_systems_spec(path: str | Path) -> SystemsSpec:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
        raw = tomllib.loads(text)
    except FileNotFoundError:
        raise SpecError(path, None, "file", "does not exist") from None
    except tomllib.TOMLDecodeError as exc:
        raise SpecError(path, None, "toml", str(exc)) from None
    for key in raw:
        if key not in TOP_KEYS:
            raise SpecError(path, None, key, f"unknown key (allowed: {', '.join(TOP_KEYS)})")
    if not isinstance(raw.get("harness"), str):
        raise SpecError(path, None, "harness", "expected the path of a harness spec (a string)")
    harness = load_spec(resolve_path(raw["harness"], path.parent))
    wanted = raw.get("datasets")
    if wanted is not None:
        have = {d.name: d for d in harness.datasets}
        if not isinstance(wanted, list) or not all(isinstance(n, str) and n in have for n in wanted):
            raise SpecError(path, None, "datasets", f"expected a list of the harness spec's datasets ({', '.join(have)})")
        harness = dataclasses.replace(harness, datasets=tuple(have[n] for n in wanted))
    entries = raw.get("systems")
    if not isinstance(entries, list) or not entries:
        raise SpecError(path, None, "systems", "expected at least one [[systems]] entry")
    systems: list[SystemSpec] = []
    for i, e in enumerate(entries):
        def err(key: str, message: str) -> SpecError:
            return SpecError(path, _systems_line(text, i, key.split(".")[0]), f"systems[{i}].{key}", message)

        for key in e:
            if key not in SYSTEM_KEYS:
                raise err(key, f"unknown key (allowed: {', '.join(SYSTEM_KEYS)})")
        if not isinstance(e.get("name"), str) or not e["name"]:
            raise err("name", "expected a non-empty string")
        if e.get("adapter") not in ADAPTERS:
            raise err("adapter", f"expected one of {', '.join(ADAPTERS)}, got {e.get('adapter')!r}")
        if not isinstance(e.get("options", {}), dict):
            raise err("options", "expected a table")
        if e["name"] in {s.name for s in systems}:
            raise err("name", f"{e['name']!r} is named twice")
        cls = adapter_class(e["adapter"])  # adapters import their optional packages only when used
        try:
            check_options(e["name"], e.get("options", {}), cls.OPTIONS, getattr(cls, "REQUIRED", ()))
        except AdapterConfigError as exc:
            raise err(exc.field, str(exc).split(": ", 2)[-1]) from None
        if not isinstance(e.get("note", ""), str):
            raise err("note", "expected a string")
        systems.append(SystemSpec(e["name"], e["adapter"], dict(e.get("options", {})), path.parent, e.get("note", "")))
    reference = raw.get("reference", systems[0].name)
    if reference not in {s.name for s in systems}:
        raise SpecError(path, None, "reference", f"{reference!r} is not one of the systems")
    timeout = raw.get("timeout_s", 60.0)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
        raise SpecError(path, None, "timeout_s", f"expected a positive number, got {timeout!r}")
    isolate = raw.get("isolate", True)
    if not isinstance(isolate, bool):
        raise SpecError(path, None, "isolate", f"expected true or false, got {isolate!r}")
    return SystemsSpec(path, harness, tuple(systems), reference, float(timeout), isolate)
