"""The report of real runs (Finetune and TeLAPA, seeds 0 and 1, quick preset on the smoke
curriculum; with --clips) opened in headless Chromium: every figure loads, the transfer
and elite filmstrips included, every table is there, and the page fetches nothing from
outside."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service

CHROMIUM, CHROMEDRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")
FIGURES = ("curves", "profile", "telapa-local-transfer", "telapa-qd-structure",
           "telapa-lineage", "telapa-lineage-utility", "telapa-geometry",
           # --clips: TeLAPA seed 0's three transfers and its two archives
           "telapa-behaviour-transfer-01", "telapa-behaviour-transfer-02",
           "telapa-behaviour-transfer-03", "telapa-behaviour-elites-A",
           "telapa-behaviour-elites-B")
PAPER_TABLES = ("main", "revisits", "aggregates", "profile", "improvement", "compute",
                "runtime", "claims", "claim-tests")


@pytest.fixture
def chromium():
    missing = [str(p) for p in (CHROMIUM, CHROMEDRIVER) if not p.is_file()]
    if missing:
        pytest.fail(f"{' and '.join(missing)} missing: install the Debian packages chromium and "
                    "chromium-driver (`make browser` does, as root)")
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    yield driver
    driver.quit()


def test_report_of_two_methods_and_two_seeds_loads_in_headless_chromium(report_dir, chromium):
    chromium.get((report_dir / "index.html").as_uri())
    images = chromium.execute_script(
        "return Array.from(document.images, i => ({id: i.id, alt: i.alt, "
        "loaded: i.complete && i.naturalWidth > 0, src: i.src.slice(0, 22)}))")
    assert sorted(i["id"] for i in images) == sorted(f"fig-smoke-{f}" for f in FIGURES)
    for image in images:
        assert image["loaded"] and image["alt"], image
        assert image["src"] == "data:image/png;base64,", image

    tables = dict(chromium.execute_script(
        "return Array.from(document.querySelectorAll('table'), t => [t.id, t.rows.length])"))
    files = sorted((report_dir / "tables").glob("*.md"))
    assert set(tables) == {f"tbl-{f.stem}" for f in files}
    assert {f"tbl-smoke-{t}" for t in PAPER_TABLES} <= set(tables)
    assert len(files) > len(PAPER_TABLES)  # and the archive analysis tables
    assert tables["tbl-smoke-main"] == 3  # header, finetune, telapa
    assert chromium.execute_script(
        "return document.querySelectorAll('#tbl-smoke-main td.best').length") > 0
    assert chromium.execute_script(
        "return performance.getEntriesByType('resource').map(e => e.name)") == []

    page = (report_dir / "index.html").read_text()
    links = re.findall(r"""(?:src|href)\s*=\s*["']([^"']*)""", page) + re.findall(
        r"url\(([^)]*)\)", page)
    external = [u for u in links if not u.startswith(("data:", "#", "figures/"))]
    assert not external
    manifest = json.loads((report_dir / "report.json").read_text())
    assert len(manifest["runs"]) == 4
    for figure in manifest["figures"]:
        for ext in ("png", "svg"):
            assert (report_dir / "figures" / f"{figure}.{ext}").stat().st_size > 0
    for table in manifest["tables"]:
        assert (report_dir / "tables" / f"{table}.csv").is_file()
