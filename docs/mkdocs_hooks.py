"""MkDocs hooks (``mkdocs.yml``): the site is laid out like the repository.

The guides stay where they are (README.md, BENCHMARKS.md, docs/*.md, experiments/README.md)
and keep their repository paths in the site, so a relative link between them, or to a
file they show (a figure, a preset), resolves on GitHub and in the site alike; every
repository file a guide links to is copied along. A link to a folder of the repository
(``results/table1/``) is kept as it is (GitHub lists the folder); one to a folder that
does not exist is a warning, so ``--strict`` fails on it as on any broken link. The API
reference gets one generated page per module of ``src/telapa`` (``::: telapa.x.y``,
rendered by mkdocstrings), added to the navigation after the guides.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

from mkdocs.structure.files import File, Files

log = logging.getLogger("mkdocs.hooks.telapa")  # a warning here fails --strict
ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "telapa"
API = "api"
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")


def modules() -> list[str]:
    """Dotted names of telapa's modules (a package as its own name), sorted."""
    names = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        if parts[-1] == "__main__":
            continue
        names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return sorted(names)


def _nav_paths(nav) -> list[str]:
    out: list[str] = []
    for item in nav or []:
        value = next(iter(item.values())) if isinstance(item, dict) else item
        if isinstance(value, list):
            out.extend(_nav_paths(value))
        elif isinstance(value, str) and not value.startswith(("http:", "https:")):
            out.append(value)
    return out


def on_config(config):
    """Heading anchors as GitHub makes them (so ``README.md#some-heading`` works in both);
    every guide the navigation's guides link to, not listed there itself, appended to it;
    then the API reference."""
    from pymdownx.slugs import slugify

    config.mdx_configs.setdefault("toc", {})["slugify"] = slugify(case="lower")
    listed = _nav_paths(config.nav)
    queue, found = list(listed), []
    while queue:
        path = queue.pop(0)
        if not path.endswith(".md") or not (ROOT / path).is_file():
            continue
        for target in _linked(path):
            if target.endswith(".md") and target not in listed and target not in found:
                found.append(target)
                queue.append(target)
    config.nav = [*(config.nav or []), *found,
                  {"API reference": [f"{API}/{name}.md" for name in modules()]}]
    return config


def _linked(page: str) -> list[str]:
    """Repository paths of the files the guide ``page`` links to (that exist)."""
    out = []
    text = (ROOT / page).read_text()
    for target in LINK.findall(text):
        target = target.split("#", 1)[0]
        if not target or re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("/"):
            continue
        path = (ROOT / page).parent / target
        try:
            rel = path.resolve().relative_to(ROOT.resolve()) if not path.is_symlink() \
                else path.relative_to(ROOT)
        except ValueError:
            continue
        if (ROOT / page).parent.joinpath(target).is_file():
            out.append(Path(page).parent.joinpath(target).as_posix() if ".." not in target
                       else rel.as_posix())
    return out


def on_page_markdown(markdown: str, page, config, files):
    """Warns about links to folders that do not exist (mkdocs leaves folder links alone)."""
    where = (ROOT / page.file.src_uri).parent
    for target in LINK.findall(markdown):
        target = target.split("#", 1)[0]
        if not target or re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("/"):
            continue
        path = where / target
        folder = target.endswith("/") or not Path(target).suffix  # a file: mkdocs checks it
        if folder and not path.exists():
            log.warning("Doc file '%s' links to the folder '%s', which does not exist",
                        page.file.src_uri, target)
    return markdown


def on_files(files: Files, config) -> Files:
    """The guides and what they link to (from the repository), then the API pages."""
    out = Files([])
    seen: set[str] = set()
    queue = [p for p in _nav_paths(config.nav) if not p.startswith(f"{API}/")]
    while queue:
        path = queue.pop(0)
        if path in seen:
            continue
        seen.add(path)
        if not (ROOT / path).is_file():
            continue  # mkdocs names the missing page of the nav
        out.append(File(path, str(ROOT), config.site_dir, config.use_directory_urls))
        if path.endswith(".md"):
            queue.extend(_linked(path))
    for name in modules():
        out.append(File.generated(config, f"{API}/{name}.md",
                                  content=f"# `{name}`\n\n::: {name}\n"))
    for file in files:  # the theme's and plugins' own assets
        if not file.src_uri.endswith((".md", ".py")) and file.src_uri not in seen \
                and not (ROOT / "docs" / file.src_uri).exists():
            out.append(file)
    return out
