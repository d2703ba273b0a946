"""The library's front door (``from memofs import ...``) and the ablation recipe the README gives."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import fields

from memofs.ranking.config import RecallConfig


def test_front_door_names_the_deep_classes_and_loads_lazily() -> None:
    code = (
        "import sys, memofs\n"
        "assert 'memofs.store.project' not in sys.modules and 'memofs.ranking.recall' not in sys.modules\n"
        "from memofs import Recaller, Memory, Store, RecallConfig\n"
        "from memofs.ranking.recall import Recaller as R\n"
        "from memofs.files.records import Memory as M\n"
        "from memofs.store.project import Store as S\n"
        "assert (Recaller, Memory, Store) == (R, M, S)\n"
        "try:\n    memofs.Nope\nexcept AttributeError as e:\n    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "module 'memofs' has no attribute 'Nope'"


def test_every_use_field_is_a_toggle_that_switches_only_itself() -> None:
    """README "Adding an ablation": a ``use_<name>`` field is the whole recipe for toggle ``<name>``."""
    from memofs_eval.inputs.spec import TOGGLES

    use_fields = {f.name for f in fields(RecallConfig) if f.name.startswith("use_")}
    assert set(TOGGLES.values()) == use_fields and all(TOGGLES[n] == f"use_{n}" for n in TOGGLES)
    base = RecallConfig()
    for name, field in TOGGLES.items():
        off = base.replace(**{field: False})
        changed = {f.name for f in fields(RecallConfig) if getattr(off, f.name) != getattr(base, f.name)}
        assert changed == {field}, name
