"""The code version a run records: a git commit, +dirty with changed tracked files."""

from __future__ import annotations

import hashlib
import subprocess

from telapa import __version__
from telapa.provenance import (
    UNRECORDED,
    code_version,
    extend_code,
    installed_version,
    source_hash,
)


def _git(repo, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True).stdout.strip()


def test_code_version_of_a_git_tree(tmp_path):
    repo = tmp_path / "repo"
    (repo / "pkg").mkdir(parents=True)
    _git(repo, "init", "-q")
    (repo / "pkg" / "mod.py").write_text("x = 1\n")
    _git(repo, "add", ".")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one")
    head = _git(repo, "rev-parse", "HEAD")
    assert code_version(repo / "pkg") == head
    (repo / "notes.txt").write_text("untracked files do not count")
    assert code_version(repo / "pkg") == head
    (repo / "pkg" / "mod.py").write_text("x = 2\n")
    assert code_version(repo / "pkg") == f"{head}+dirty"
    assert code_version(tmp_path) is None  # not a git work tree


def test_extend_code():
    assert extend_code(None, "a", resumed=False) == ["a"]
    assert extend_code(["a"], "a", resumed=True) == ["a"]
    assert extend_code(["a"], "b", resumed=True) == ["a", "b"]
    assert extend_code(["a", "b"], "a", resumed=True) == ["a", "b", "a"]
    assert extend_code(None, "b", resumed=True) == [UNRECORDED, "b"]
    assert extend_code(None, None, resumed=False) == [None]


def test_an_installed_package_records_its_version_and_a_hash_of_its_sources(tmp_path):
    """Outside a git work tree (a wheel), the version is telapa-VERSION+src.HASH: the
    same for the same sources, another when a source file changes; caches left out."""
    pkg = tmp_path / "site" / "telapa"
    (pkg / "configs").mkdir(parents=True)
    (pkg / "__pycache__").mkdir()
    (pkg / "mod.py").write_text("x = 1\n")
    (pkg / "configs" / "p.yaml").write_text("a: 1\n")
    (pkg / "__pycache__" / "junk.py").write_text("ignored\n")
    expected = hashlib.sha256(b"configs/p.yaml\0a: 1\n\0mod.py\0x = 1\n\0").hexdigest()[:12]
    assert source_hash(pkg) == expected
    assert installed_version(pkg) == f"telapa-{__version__}+src.{expected}"
    assert code_version(pkg) is None
    (pkg / "mod.py").write_text("x = 2\n")
    assert source_hash(pkg) != expected
