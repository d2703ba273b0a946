"""Task profiles and the domain lexicon for query rewriting (upstream-facts.md section 7).

Pure data plus two lookups. The write-up lists the lexicon triggers only by example
("auth", "db", ... "config"); the full 19-entry table, the four task prepends and their
expansion terms are taken verbatim from upstream because they are data.
"""

from __future__ import annotations

from dataclasses import dataclass

TASK_TYPES: tuple[str, ...] = ("coding", "debug", "refactor", "docs", "general")
"""Valid task types, in upstream order. ``general`` is the default and adds nothing."""


@dataclass(frozen=True)
class TaskProfile:
    """What a task type adds to a query: a phrase put in front and expansion terms after."""

    prepend: str
    expansions: tuple[str, ...]


TASK_PROFILES: dict[str, TaskProfile] = {
    "coding": TaskProfile(
        "Constraints, patterns, and recent decisions",
        ("constraint", "rule", "convention", "pattern", "standard", "style", "guideline"),
    ),
    "debug": TaskProfile(
        "Recent errors and bug-fix context",
        ("error", "bug", "fix", "exception", "crash", "failure", "stack trace", "debug", "issue"),
    ),
    "refactor": TaskProfile(
        "Architecture decisions and dependency graph",
        (
            "architecture", "refactor", "structure", "design", "pattern",
            "dependency", "coupling", "interface", "module",
        ),
    ),
    "docs": TaskProfile(
        "Public API contracts and documentation decisions",
        ("api", "documentation", "docs", "interface", "contract", "type", "schema", "readme"),
    ),
    "general": TaskProfile("", ()),
}

DOMAIN_LEXICON: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("auth", ("authentication", "jwt", "oauth", "login")),
    ("authentication", ("auth", "jwt", "oauth", "login")),
    ("login", ("authentication", "auth")),
    ("db", ("database", "postgres", "sqlite", "turso")),
    ("database", ("db", "postgres", "sqlite")),
    ("deps", ("dependency", "dependencies", "package")),
    ("dependency", ("dependencies", "deps", "package")),
    ("ci", ("continuous integration", "github actions")),
    ("cd", ("continuous deployment", "deploy")),
    ("deploy", ("deployment", "ci", "release")),
    ("deployment", ("deploy", "release")),
    ("test", ("testing", "vitest", "jest", "spec")),
    ("tests", ("testing", "vitest", "spec")),
    ("fmt", ("format", "formatting", "biome", "prettier")),
    ("format", ("formatting", "biome", "prettier")),
    ("formatting", ("format", "biome")),
    ("pkg", ("package", "pnpm", "npm")),
    ("package", ("pkg", "pnpm", "npm")),
    ("config", ("configuration",)),
)
"""(trigger, expansions) pairs in upstream order; a token must equal a trigger exactly."""


def task_profile(task_type: str) -> TaskProfile:
    """The profile of ``task_type``; ValueError naming the valid types otherwise."""
    try:
        return TASK_PROFILES[task_type]
    except (KeyError, TypeError):
        raise ValueError(
            f"task_type must be one of: {', '.join(TASK_TYPES)} (got {task_type!r})"
        ) from None


def lexicon_expansions(token: str) -> tuple[str, ...]:
    """Expansions of the first lexicon entry whose trigger equals ``token``; () if none.

    Not recursive: the expansions of an expansion are not looked up.
    """
    for trigger, expansions in DOMAIN_LEXICON:
        if token == trigger:
            return expansions
    return ()
