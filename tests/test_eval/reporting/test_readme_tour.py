"""The README's tour is what the code prints: both examples rerun and compared with the committed text."""

from __future__ import annotations

import pytest

from memofs_eval._env import REPO
from memofs_eval.reporting import readme_tour
from memofs_eval.reporting.readme_tour import CLI, LIBRARY, commands, fences, fresh, mask, settle as _settle
from memofs_eval.reporting.readme_blocks import between


@pytest.mark.slow  # runs the README's commands in fresh interpreters
def test_readme_tour_matches_a_fresh_run() -> None:
    committed = (REPO / "README.md").read_text(encoding="utf-8")
    assert _settle(fresh(committed)) == _settle(committed), "README tour drifted: run `python -m memofs_eval.reporting.readme_tour`"


def test_tour_blocks_are_runnable_as_documented() -> None:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    lib = fences(text, between(text, *LIBRARY, "README.md"))
    assert [f.lang for f in lib] == ["python", "text"] and "Recaller" in lib[0].body
    cli = fences(text, between(text, *CLI, "README.md"))
    cmds = commands(cli[0].body)
    assert cmds[1] == "memofs init" and any(c.startswith("memofs recall") for c in cmds)
    assert "Traceback" not in cli[0].body and "(exit " not in cli[0].body


def test_mask_keeps_order_and_hides_only_what_cannot_repeat() -> None:
    a = "1. mem_0123456789abcdef x\n2. mem_fedcba9876543210 y\n(expand=\"AT-abc\")"
    b = "1. mem_1111111111111111 x\n2. mem_2222222222222222 y\n(expand=\"AT-xyz\")"
    assert mask(a) == mask(b) == '1. mem_#1 x\n2. mem_#2 y\n(expand="<cursor>")'
    twice = "mem_aaaaaaaaaaaaaaaa then mem_bbbbbbbbbbbbbbbb then mem_aaaaaaaaaaaaaaaa"
    other = "mem_aaaaaaaaaaaaaaaa then mem_bbbbbbbbbbbbbbbb then mem_bbbbbbbbbbbbbbbb"
    assert mask(twice) != mask(other)
    assert mask("score 0.2455") != mask("score 0.2456")
    assert _settle("recency=0.999999, final=0.3111") == _settle("recency=1.0, final=0.3111")
    assert _settle("recency=0.999998") == "recency=1.0" and _settle("recency=0.99998") == "recency=0.99998"


def test_the_writer_leaves_a_tour_that_differs_only_in_ids_untouched(tmp_path, monkeypatch) -> None:
    """Regenerating must not churn the README: a fresh run whose only differences are ids,
    cursors or a seconds-old recency leaves the file's bytes as they were; any other
    difference (a score) rewrites it."""
    readme = tmp_path / "README.md"
    committed = "1. mem_0123456789abcdef 0.2455 recency=1.0\n"
    readme.write_text(committed, encoding="utf-8")
    monkeypatch.setattr(readme_tour, "fresh", lambda text, where: "1. mem_ffffffffffffffff 0.2455 recency=0.999998\n")
    assert readme_tour.main(["--readme", str(readme)]) == 0
    assert readme.read_text(encoding="utf-8") == committed
    moved = "1. mem_ffffffffffffffff 0.2456 recency=1.0\n"
    monkeypatch.setattr(readme_tour, "fresh", lambda text, where: moved)
    assert readme_tour.main(["--readme", str(readme)]) == 0
    assert readme.read_text(encoding="utf-8") == moved
