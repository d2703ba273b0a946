"""A systems spec (TOML) and the adapter registry.

```toml
harness = "../default.toml"      # the harness spec whose datasets, k, metrics, headline, seed
                                 # and [stats] the systems are measured under
reference = "memofs-reference"   # the system every other one is paired against
timeout_s = 60                   # per call (ingest: per 100 memories)
isolate = true                   # each system in its own process (crash isolation, peak RSS)
report = "locomo"                # the report's folder under reports/systems/ (default: that folder)
systems_from = "systems.toml"    # instead of [[systems]]: another spec's systems (less `exclude`,
exclude = ["harness-default-runfile"]   # with `[scopes]` = { name = n } samples per system)
headline = ["ndcg@10"]           # replaces the harness spec's headline (the report's columns)
stats_metrics = ["ndcg@10"]      # replaces the harness spec's [stats] metrics (the paired tests)

[[systems]]
name = "memofs-reference"
adapter = "memofs"               # see ADAPTERS
options = { profile = "reference" }
scopes = 5                       # optional: a seeded sample of 5 scopes per dataset (the harness
                                 # spec's seed), for a system too slow for every scope; its rows
                                 # are marked and it is paired on the queries both sides ran
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
TOP_KEYS = ("harness", "datasets", "reference", "timeout_s", "isolate", "report", "headline", "stats_metrics",
            "systems", "systems_from", "exclude", "scopes")
SYSTEM_KEYS = ("name", "adapter", "options", "note", "scopes")


@dataclass(frozen=True)
class SystemSpec:
    name: str
    adapter: str
    options: dict = field(default_factory=dict, compare=False, hash=False)
    base: Path = Path(".")
    note: str = ""  # one line for the report: what the system is, how it was configured  # the spec's folder: relative option paths resolve against it
    scopes: int | None = None  # a seeded sample of this many scopes per dataset; None: every scope

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
    report: str = ""  # the report's folder under reports/systems/ ("" = that folder)
    systems_from: Path | None = None  # the spec whose [[systems]] these are (an input of the report)


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
    harness = _override_measures(path, raw, harness)
    wanted = raw.get("datasets")
    if wanted is not None:
        have = {d.name: d for d in harness.datasets}
        if not isinstance(wanted, list) or not all(isinstance(n, str) and n in have for n in wanted):
            raise SpecError(path, None, "datasets", f"expected a list of the harness spec's datasets ({', '.join(have)})")
        harness = dataclasses.replace(harness, datasets=tuple(have[n] for n in wanted))
    systems = _systems_of(path, text, raw)
    if not systems:
        raise SpecError(path, None, "exclude", "leaves no system to run")
    reference = raw.get("reference", systems[0].name)
    if reference not in {s.name for s in systems}:
        raise SpecError(path, None, "reference", f"{reference!r} is not one of the systems")
    timeout = raw.get("timeout_s", 60.0)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
        raise SpecError(path, None, "timeout_s", f"expected a positive number, got {timeout!r}")
    isolate = raw.get("isolate", True)
    if not isinstance(isolate, bool):
        raise SpecError(path, None, "isolate", f"expected true or false, got {isolate!r}")
    report = raw.get("report", "")
    if not isinstance(report, str) or not re.fullmatch(r"[a-z0-9-]*", report):
        raise SpecError(path, None, "report", f"expected a folder name (a-z, 0-9, -), got {report!r}")
    src = resolve_path(raw["systems_from"], path.parent) if "systems_from" in raw else None
    return SystemsSpec(path, harness, tuple(systems), reference, float(timeout), isolate, report, src)


def _systems_of(path: Path, text: str, raw: dict[str, Any]) -> list[SystemSpec]:
    """The spec's ``[[systems]]``, or those of ``systems_from`` (another systems spec, errors
    naming its lines) less ``exclude``, with ``[scopes]`` samples set per system name."""
    if "systems_from" in raw:
        if "systems" in raw:
            raise SpecError(path, None, "systems_from", "give [[systems]] or systems_from, not both")
        if not isinstance(raw["systems_from"], str):
            raise SpecError(path, None, "systems_from", "expected the path of a systems spec (a string)")
        src = resolve_path(raw["systems_from"], path.parent)
        try:
            src_text = src.read_text(encoding="utf-8")
        except OSError:
            raise SpecError(path, None, "systems_from", f"{src} does not exist") from None
        systems = _parse_systems(src, src_text, tomllib.loads(src_text).get("systems"))
    else:
        systems = _parse_systems(path, text, raw.get("systems"))
    names = {s.name for s in systems}
    exclude = raw.get("exclude", [])
    if not isinstance(exclude, list) or not all(isinstance(n, str) and n in names for n in exclude):
        raise SpecError(path, None, "exclude", f"expected a list of the systems' names ({', '.join(sorted(names))})")
    scopes = raw.get("scopes", {})
    if not isinstance(scopes, dict):
        raise SpecError(path, None, "scopes", "expected a table: system name = number of scopes")
    for name, n in scopes.items():
        if name not in names:
            raise SpecError(path, None, f"scopes.{name}", f"not one of the systems ({', '.join(sorted(names))})")
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise SpecError(path, None, f"scopes.{name}", f"expected a positive whole number of scopes, got {n!r}")
    return [dataclasses.replace(s, scopes=scopes.get(s.name, s.scopes)) for s in systems if s.name not in exclude]


def _parse_systems(path: Path, text: str, entries: Any) -> list[SystemSpec]:
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
        scopes = e.get("scopes")
        if scopes is not None and (isinstance(scopes, bool) or not isinstance(scopes, int) or scopes < 1):
            raise err("scopes", f"expected a positive whole number of scopes, got {scopes!r}")
        systems.append(SystemSpec(e["name"], e["adapter"], dict(e.get("options", {})), path.parent, e.get("note", ""),
                                  scopes))
    return systems


def _override_measures(path: Path, raw: dict[str, Any], harness: Spec) -> Spec:
    """``headline`` / ``stats_metrics`` of the systems spec in place of the harness spec's
    (each must be among the harness spec's metrics, so every figure is one it computes)."""
    known = set(harness.metrics) | set(harness.headline) | set(harness.stats.metrics)
    for key in ("headline", "stats_metrics"):
        value = raw.get(key)
        if value is None:
            continue
        if not isinstance(value, list) or not value or not all(isinstance(m, str) and m in known for m in value):
            raise SpecError(path, None, key, f"expected a non-empty list of the harness spec's metrics, got {value!r}")
    if raw.get("headline") is not None:
        harness = dataclasses.replace(harness, headline=tuple(raw["headline"]))
    if raw.get("stats_metrics") is not None:
        harness = dataclasses.replace(harness, stats=dataclasses.replace(harness.stats, metrics=tuple(raw["stats_metrics"])))
    return harness
