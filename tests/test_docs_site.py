"""The documentation site (``make docs``): the guides and an API reference from the
docstrings build with ``mkdocs build --strict``, and a broken link fails the build."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def _build(config: Path, site: Path) -> subprocess.CompletedProcess:
    # not --quiet: it hides the warnings from --strict, which would then pass them
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict",
                           "-f", str(config), "-d", str(site)],
                          capture_output=True, text=True, timeout=600)


def test_the_site_builds_strictly_with_guides_and_an_api_reference(tmp_path):
    proc = _build(ROOT / "mkdocs.yml", tmp_path / "site")
    assert proc.returncode == 0, proc.stderr
    site = tmp_path / "site"
    index = (site / "index.html").read_text()
    assert 'href="docs/assumptions.html"' in index  # README's link, as on GitHub
    assert (site / "docs" / "reproduction" / "primary-curves.png").is_file()
    page = (site / "api" / "telapa.overrides.html").read_text()
    assert "parse_sets" in page and "ConfigError" in page  # rendered from the docstrings
    every = {p.stem for p in (site / "api").glob("telapa*.html")}
    assert {"telapa.continual.runner", "telapa.qd.archive", "telapa.cli.run"} <= every


def _mini_site(tmp_path: Path, readme: str) -> Path:
    """A copy of the site's set-up with one guide, ``readme``, and no package."""
    (tmp_path / "docs").mkdir(parents=True)
    shutil.copy(ROOT / "docs" / "mkdocs_hooks.py", tmp_path / "docs")
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    config["nav"] = ["README.md", "guide.md"]
    (tmp_path / "mkdocs.yml").write_text(yaml.safe_dump(config))
    (tmp_path / "README.md").write_text(readme)
    (tmp_path / "guide.md").write_text("# Guide\n\n## Install\n\n## A -> B (`x.py`)\n\n"
                                       "Also [more](more.md).\n")
    (tmp_path / "more.md").write_text("# More\n")  # linked, not in the nav: added to it
    return tmp_path / "mkdocs.yml"


def test_a_broken_link_or_anchor_fails_the_build(tmp_path):
    good = _mini_site(tmp_path / "good", "# T\n\nSee [the guide](guide.md#install), "
                                         "[as GitHub spells anchors](guide.md#a---b-xpy) "
                                         "and [its folder](docs/).\n")
    proc = _build(good, tmp_path / "good-site")
    assert proc.returncode == 0, proc.stderr
    missing = _mini_site(tmp_path / "missing", "# T\n\nSee [the guide](docs/nope.md).\n")
    proc = _build(missing, tmp_path / "missing-site")
    assert proc.returncode != 0 and "docs/nope.md" in proc.stderr
    anchor = _mini_site(tmp_path / "anchor", "# T\n\nSee [the guide](guide.md#nope).\n")
    proc = _build(anchor, tmp_path / "anchor-site")
    assert proc.returncode != 0 and "#nope" in proc.stderr
    folder = _mini_site(tmp_path / "folder", "# T\n\nSee [the results](results/table1/).\n")
    proc = _build(folder, tmp_path / "folder-site")
    assert proc.returncode != 0 and "'results/table1/', which does not exist" in proc.stderr
