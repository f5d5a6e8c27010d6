"""The documents a newcomer reads hold together: every relative link and anchor leads
somewhere, every section cited by name (``docs/assumptions.md, "Activation"``) exists,
and the contents lists of the guides that have one (docs/assumptions.md, docs/design.md,
...) list every section."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", ROOT / "BENCHMARKS.md", *sorted((ROOT / "docs").glob("*.md"))]
CITING = [*DOCS, *sorted((ROOT / "src").rglob("*.py")), *sorted((ROOT / "src").rglob("*.yaml")),
          *sorted((ROOT / "benchmarks").glob("*.*")), *sorted((ROOT / "experiments").glob("*.*")),
          *sorted(p for p in (ROOT / "tests").rglob("*.py") if p != Path(__file__).resolve())]
CITED = {**{f"docs/{p.name}": p for p in sorted((ROOT / "docs").glob("*.md"))},
         "BENCHMARKS.md": ROOT / "BENCHMARKS.md"}
PAGES = "|".join(re.escape(name.removeprefix("docs/")) for name in CITED if name != "BENCHMARKS.md")
WITH_CONTENTS = [ROOT / "docs" / name for name in (
    "assumptions.md", "design.md", "minigrid-ports.md", "performance.md", "reliability.md",
    "running.md")]


def headings(text: str) -> list[tuple[int, str]]:
    """(level, title) of every Markdown heading outside code blocks."""
    found, fenced = [], False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (m := re.match(r"^(#{1,6}) (.+?)\s*$", line)):
            found.append((len(m.group(1)), m.group(2)))
    return found


def slug(title: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", title.strip().lower()).replace(" ", "-")


def anchors(text: str) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for _, title in headings(text):
        s = slug(title)
        out.add(f"{s}-{seen[s]}" if s in seen else s)
        seen[s] = seen.get(s, 0) + 1
    return out


def test_slug_matches_github():
    assert slug("MuJoCo (`benchmarks/mujoco.py`)") == "mujoco-benchmarksmujocopy"
    assert slug("Competence SR~ and R*") == "competence-sr-and-r"
    assert anchors("# A\n## A\n```\n# not a heading\n```\n") == {"a", "a-1"}


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_and_anchors_resolve(doc):
    text = doc.read_text()
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target):
            continue  # http(s), mailto: not checked offline
        path, _, anchor = target.partition("#")
        file = (doc.parent / path).resolve() if path else doc
        if not file.exists():
            broken.append(f"{target} (no file {file.relative_to(ROOT)})")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file.read_text()):
            broken.append(f"{target} (no heading with anchor #{anchor})")
    assert not broken, f"{doc.name}: " + "; ".join(broken)


def citations(text: str) -> list[tuple[str, str]]:
    """(document, section) for every ``DOC, "Section"`` / ``DOC ("Section", "Sub")``
    citation, across line breaks and comment markers."""
    flat = re.sub(r"\s*\n\s*(?:#+ |# ?|\* )?\s*", " ", text)
    found = []
    for m in re.finditer(rf"(?:docs/)?({PAGES})|(BENCHMARKS\.md)", flat):
        names = re.match(r"`?,? \(?((?:\"[^\"\n]{1,80}\"(?:, | and )?)+)", flat[m.end():])
        if names:
            doc = f"docs/{m.group(1)}" if m.group(1) else m.group(2)
            found += [(doc, name) for name in re.findall(r"\"([^\"]+)\"", names.group(1))]
    return found


def test_citations_are_found():
    text = 'see docs/assumptions.md, "PPO and\n# networks", "Activation"; BENCHMARKS.md "Archive"'
    assert citations(text) == [("docs/assumptions.md", "PPO and networks"),
                               ("docs/assumptions.md", "Activation"),
                               ("BENCHMARKS.md", "Archive")]


def test_every_cited_section_exists():
    titles = {doc: [t for _, t in headings(path.read_text())] for doc, path in CITED.items()}
    missing = []
    for path in CITING:
        for doc, name in citations(path.read_text()):
            # a citation names a heading or its start ("Archive" for "Archive (`...`)")
            if not any(re.match(re.escape(name) + r"(\W|$)", t) for t in titles[doc]):
                missing.append(f"{path.relative_to(ROOT)}: {doc}, {name!r}")
    assert not missing, "sections cited but not found:\n" + "\n".join(missing)


@pytest.mark.parametrize("doc", WITH_CONTENTS, ids=lambda p: p.name)
def test_contents_list_every_section_in_order(doc):
    text = doc.read_text()
    listed = re.findall(r"^ *- \[(.+)\]\(#([^)]+)\)$",
                        text.split("## Contents", 1)[1].split("\n## ", 1)[0], re.MULTILINE)
    sections = [(t, slug(t)) for level, t in headings(text) if level in (2, 3)
                and t != "Contents"]
    assert listed == sections
    assert not [t for _, t in headings(text) if re.search(r"\bissue \d+", t)], \
        "headings carry no issue numbers"


def _markdown_files() -> list[Path]:
    """Every Markdown file of the repository outside environments, caches and builds."""
    skip = {".venv", ".git", "site", "node_modules", ".pytest_cache", "runs", "out"}
    return sorted(p for p in ROOT.rglob("*.md")
                  if not skip & set(p.relative_to(ROOT).parts[:-1]))


def test_no_document_cites_an_issue_number_or_a_session():
    """Documents are written for their readers: what holds and why, not which tracker
    issue or working session changed it (history lives in git)."""
    pattern = re.compile(r"\bissues? #?\d+|\bthis session\b", re.IGNORECASE)
    files = _markdown_files()
    assert {"README.md", "BENCHMARKS.md", "docs/design.md", "experiments/README.md"} <= {
        str(p.relative_to(ROOT)) for p in files}
    found = [f"{path.relative_to(ROOT)}:{n}: {line.strip()[:80]}" for path in files
             for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if pattern.search(line)]
    assert found == []
