"""`export_sweep` (``telapa sweep export DIR DEST``): the small outputs of the finished
cells, without checkpoints, in a sweep directory of their own (e.g. to commit a study's
results while it still runs)."""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from telapa.continual.rundir import RESULT_FILES, RunDir, RunDirError
from telapa.continual.sweep.layout import (
    CELLS_FILE,
    SWEEP_FILE,
    cell_dir,
    create_dir_atomically,
    read_status,
    stored_sweep,
    write_status,
)
from telapa.continual.sweep.status import cell_state
from telapa.io import write_bytes_atomic, write_json_atomic
from telapa.io.destination import destination_problem

EXPORT_FILES = RESULT_FILES
"""What `export_sweep` keeps of a finished cell (`RunDir.result_files`): everything
`telapa report` and `telapa metrics` read, never checkpoints or per-update training logs."""


@dataclass(frozen=True)
class ExportSummary:
    """What one `export_sweep` call did."""

    added: list[str]
    """Cells copied by this call."""
    kept: list[str]
    """Cells the destination already held (identical files)."""
    left: list[str]
    """Cells of the sweep not done yet (not exported)."""
    bytes: int
    """Size of the destination's files after the export."""


def _listing(source: dict[str, Any], sweep_dir: Path, cells: list[dict[str, Any]]
             ) -> dict[str, Any]:
    """An export's ``cells.json``: the exported cells, in sweep order, the sweep
    directory they come from (``exported_from``) and its count of cells (``of_cells``).
    Where the source is itself an export, both are the source's own: re-exporting an
    export keeps its sweep's directory and count, not the export's path and the cells it
    holds."""
    if "exported_from" in source:
        return {"format": "telapa-sweep", "name": source.get("name"),
                "exported_from": source["exported_from"],
                "of_cells": source.get("of_cells", len(source["cells"])), "cells": cells}
    return {"format": "telapa-sweep", "name": source.get("name"),
            "exported_from": str(sweep_dir), "of_cells": len(source["cells"]), "cells": cells}


def _same_file(a: Path, b: Path) -> bool:
    return a.is_file() and b.is_file() and a.read_bytes() == b.read_bytes()


def _same_cell(src: Path, dst: Path) -> bool:
    """Whether ``dst`` holds exactly the exported files of cell ``src``, byte for byte."""
    names = sorted(p.name for p in dst.iterdir())
    return names == sorted(p.name for p in cell_dir(src.parent.parent, src.name).result_files()
                           ) and all(_same_file(src / n, dst / n) for n in names)


def _copy_cell(src: RunDir, final: Path) -> None:
    """Copies ``src``'s result files (`RunDir.result_files`) to a new folder ``final``,
    whole: into a temporary sibling first, renamed into place."""
    tmp = final.with_name(f".{final.name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    for path in src.result_files():
        shutil.copy2(path, tmp / path.name)
    os.replace(tmp, final)


def check_export_dest(sweep_dir: str | Path, dest: str | Path, name: str | None,
                      cells: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Checks, reading only, that ``dest`` can take the export of the sweep ``name`` with
    ``cells`` (their payloads) from ``sweep_dir``, which need not exist yet: it is new
    (absent, or an empty folder), or an export of that sweep whose cells have those
    settings, writable; it is not a link, ``sweep_dir`` or inside it, a file, a mount
    point or any other non-empty folder. `RunDirError` naming what is wrong otherwise.
    ``telapa sweep FILE --export DEST`` calls it before the sweep directory is created,
    `export_sweep` before it writes. Returns ``dest``'s ``cells.json`` (None: new)."""
    sweep_dir, dest = Path(sweep_dir), Path(dest)
    # before resolving it (a loop of links raises); the mount point below, for a new one
    if problem := destination_problem(dest, what="export directory",
                                      choose="choose another place"):
        raise RunDirError(problem)
    if dest.resolve() == sweep_dir.resolve():
        raise RunDirError(f"cannot export {sweep_dir} into itself")
    if dest.resolve().is_relative_to(sweep_dir.resolve()):
        raise RunDirError(f"cannot export {sweep_dir} into {dest}, which is inside it; "
                          "choose a destination outside the sweep directory")
    meta = stored_sweep(dest) if dest.is_dir() else None
    if meta is None:
        if dest.is_dir() and (entries := sorted(os.listdir(dest))):
            shown = ", ".join(entries[:5]) + (", ..." if len(entries) > 5 else "")
            raise RunDirError(f"export directory {dest} is not empty (holds {shown}) and "
                              f"is not an export of sweep {name!r}; choose another place")
        if problem := destination_problem(dest, what="export directory",
                                          choose="choose another place",
                                          renamed_into_place=True):
            raise RunDirError(problem)
        return None
    _check_export_meta(meta, sweep_dir, dest, name, cells)
    return meta


def _check_export_meta(meta: dict[str, Any], sweep_dir: Path, dest: Path, name: str | None,
                       cells: list[dict[str, Any]]) -> None:
    """`RunDirError` unless ``meta`` (``dest``'s ``cells.json``) is an export of sweep
    ``name`` whose cells have the settings of ``cells``, and ``dest`` is writable."""
    if meta.get("name") != name or "exported_from" not in meta:
        raise RunDirError(f"{dest} is not an export of sweep {name!r}; "
                          "choose another destination")
    if not os.access(dest, os.W_OK | os.X_OK):  # e.g. on a read-only mount: before copying
        raise RunDirError(f"cannot write export directory {dest} (read-only); choose "
                          "another destination")
    by_name = {c["name"]: c for c in cells}
    for cell in meta["cells"]:
        if json.loads(json.dumps(by_name.get(cell["name"]))) != cell:
            raise RunDirError(f"{dest} holds cell {cell['name']} with other settings than "
                              f"{sweep_dir}; choose another destination")


def export_sweep(sweep_dir: str | Path, dest: str | Path) -> ExportSummary:
    """Copies the small outputs (`EXPORT_FILES`) of every done cell of ``sweep_dir`` into
    ``dest`` (outside ``sweep_dir``): a sweep directory of its own that holds only those
    cells, so that ``telapa report DEST``, ``telapa metrics DEST`` and ``telapa sweep
    status DEST`` read it.

    Re-exporting into the same ``dest`` adds the cells finished since (for a study that
    runs over several sessions). Nothing in ``dest`` is overwritten: a cell ``dest``
    already holds must be byte-identical to the source, and a ``dest`` that is not an
    export of the same sweep is refused, both before anything is written. A new ``dest``
    is created whole, as an export of no cell yet (so not on a mount point itself,
    `create_dir_atomically`); one that cannot be written is refused before any copy; each
    cell is written to a temporary folder and renamed into place; ``cells.json`` (the
    exported cells, in sweep order) is written last. An export stopped part way (a full
    disk) is completed by the next.
    """
    sweep_dir, dest = Path(sweep_dir), Path(dest)
    if not sweep_dir.exists():
        raise RunDirError(f"sweep directory {sweep_dir} does not exist")
    source = stored_sweep(sweep_dir)
    if source is None:
        raise RunDirError(f"{sweep_dir} is not a sweep directory (no {CELLS_FILE})")
    meta = check_export_dest(sweep_dir, dest, source.get("name"), source["cells"])
    cells = source["cells"]
    done = [c for c in cells if cell_state(sweep_dir, c["name"])[0] == "done"]
    for cell in done:  # a linked result file is refused before anything is written
        cell_dir(sweep_dir, cell["name"]).result_files()
    if meta is None:  # a new export, created whole: an export holding no cell yet
        def build(tmp: Path) -> None:
            (tmp / "cells").mkdir()
            (tmp / "status").mkdir()
            write_bytes_atomic(tmp / SWEEP_FILE, (sweep_dir / SWEEP_FILE).read_bytes())
            write_json_atomic(tmp / CELLS_FILE, _listing(source, sweep_dir, []))

        create_dir_atomically(dest, build, what="export directory")
        meta = stored_sweep(dest)
        if meta is None:
            raise RunDirError(f"export directory {dest} is being created by another process")
    _check_export_meta(meta, sweep_dir, dest, source.get("name"), cells)
    existing = meta["cells"]
    have = {c["name"] for c in existing}
    adopted = []
    for cell in done:
        src_dir, dst_dir = cell_dir(sweep_dir, cell["name"]), cell_dir(dest, cell["name"])
        if cell["name"] not in have:
            if dst_dir.path.exists():
                if not _same_cell(src_dir.path, dst_dir.path):
                    raise RunDirError(f"{dst_dir.path} exists but is not listed in "
                                      f"{dest / CELLS_FILE}; nothing was exported (move it "
                                      "aside)")
                adopted.append(cell["name"])  # copied by an export stopped before listing it
            continue
        for name in EXPORT_FILES:
            src, dst = src_dir.path / name, dst_dir.path / name
            if src.is_file() != dst.is_file() or (src.is_file() and not _same_file(src, dst)):
                raise RunDirError(f"{dst} differs from {src}; nothing was exported (move "
                                  f"{dest} aside to export afresh)")
    (dest / "cells").mkdir(exist_ok=True)
    (dest / "status").mkdir(exist_ok=True)
    if not (dest / SWEEP_FILE).exists():
        write_bytes_atomic(dest / SWEEP_FILE, (sweep_dir / SWEEP_FILE).read_bytes())
    added = list(adopted)
    for cell in done:
        if cell["name"] in have or cell["name"] in adopted:
            continue
        _copy_cell(cell_dir(sweep_dir, cell["name"]), cell_dir(dest, cell["name"]).path)
        status = read_status(sweep_dir, cell["name"])
        write_status(dest, cell["name"], {k: status[k] for k in ("state", "attempts",
                                                                 "started", "finished")
                                          if k in status})
        added.append(cell["name"])
    exported = have | set(added)
    write_json_atomic(dest / CELLS_FILE, _listing(
        source, sweep_dir, [c for c in cells if c["name"] in exported]))
    size = sum(f.stat().st_size for f in dest.rglob("*") if f.is_file())
    return ExportSummary(added=added, kept=sorted(have),
                         left=[c["name"] for c in cells if c["name"] not in exported],
                         bytes=size)


def restore_exported(sweep_dir: str | Path, dest: str | Path) -> list[str]:
    """Copies back into ``sweep_dir`` the cells its export ``dest`` holds and
    ``sweep_dir`` has no run directory for (a study resumed on a fresh checkout, whose
    committed export is all that is left of its earlier sessions). Each becomes a done
    cell there, byte-identical to its export (no checkpoints: it is complete), so that
    `telapa sweep status`, its time estimates and `telapa report DIR` read it as they
    read the cells finished in ``sweep_dir``; its status file comes back with it. Cells
    with a run directory in ``sweep_dir`` are left as they are. Call it after
    `export_sweep` has checked that ``dest`` is an export of this sweep. Returns the
    names restored, in sweep order."""
    sweep_dir, dest = Path(sweep_dir), Path(dest)
    meta = stored_sweep(dest)
    restored = []
    for cell in meta["cells"] if meta else []:
        final = cell_dir(sweep_dir, cell["name"]).path
        src = cell_dir(dest, cell["name"])
        if final.exists() or not src.is_complete():
            continue
        _copy_cell(src, final)
        if read_status(sweep_dir, cell["name"]).get("attempts", 0) == 0:  # no history here
            write_status(sweep_dir, cell["name"], read_status(dest, cell["name"])
                         | {"restored_from": str(dest)})
        restored.append(cell["name"])
    return restored


__all__ = ["EXPORT_FILES", "ExportSummary", "check_export_dest", "export_sweep",
           "restore_exported"]
