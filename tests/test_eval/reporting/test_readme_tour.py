"""The README's tour is what the code prints: both examples rerun and compared with the committed text."""

from __future__ import annotations

import pytest

from memofs_eval._env import REPO
from memofs_eval.reporting.readme_tour import CLI, LIBRARY, commands, fences, fresh, mask
from memofs_eval.reporting.readme_blocks import between
import re

# The CLI stamps memories with the wall clock and the tour's commands run seconds apart on a
# loaded machine, so a memory's recency prints 1.0 or 0.99999x (half-life 30 days: 0.9999995
# is 1.9 s). Only that clock-dependent last digit is settled; every score still compares.
_SECONDS_OLD = re.compile(r"recency=0\.99999\d\b")


def _settle(text: str) -> str:
    return _SECONDS_OLD.sub("recency=1.0", mask(text))


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
