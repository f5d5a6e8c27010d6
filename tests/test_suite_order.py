"""The suite's longest-first order (tests/conftest.py's `HEAVY_FIRST`) names files that
exist, each once, so that a renamed file cannot drop silently to the end of the run."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from conftest import HEAVY_FIRST, pytest_collection_modifyitems

TESTS = Path(__file__).parent


def test_the_heavy_files_exist_and_are_named_once():
    missing = [name for name in HEAVY_FIRST if not (TESTS / name).is_file()]
    assert missing == []
    assert len(set(HEAVY_FIRST)) == len(HEAVY_FIRST)


def test_collection_puts_them_first_and_keeps_every_other_order():
    items = [SimpleNamespace(path=TESTS / name, n=n) for n, name in enumerate([
        "a/test_one.py", HEAVY_FIRST[1], "test_two.py", HEAVY_FIRST[0], HEAVY_FIRST[1],
        "a/test_one.py"])]
    pytest_collection_modifyitems(None, items)
    assert [item.n for item in items] == [3, 1, 4, 0, 2, 5]
