"""One chapter executed with papermill in a child process, its log, and its record in the sweep manifest.

The chapter runs into ``results/<gpu>/notebooks/<chapter>.ipynb`` with its output in ``<chapter>.log`` beside it;
:func:`labmagic.store.manifest.write_manifest` records the outcome. ``labmagic sweep`` (:mod:`labmagic.cli.sweep`)
runs many of these, one worker per GPU (:mod:`labmagic.execute.parallel`).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from ..paths import atomic_write, repo_root, results_dir
from ..runtime import gpu_name
from ..store.fingerprint import chapter_hash
from ..store.manifest import write_manifest

_CELL_LINE = re.compile(r"Executing Cell (\d+)")
_ERROR_LINE = re.compile(r"^\s*([A-Za-z_][\w.]*(?:Error|Exception|Interrupt)\b.*)$")


@dataclass
class Outcome:
    """What happened to one chapter in one sweep."""

    chapter: str
    status: str  # passed | failed | skipped
    slug: str
    seconds: float = 0.0
    error: str = ""
    notebook: str = ""
    gpu: str | None = None
    details: dict = field(default_factory=dict)


def papermill_command(notebook: Path, output: Path, size: str | None, timeout: int | None) -> list[str]:
    cmd = [
        sys.executable, "-m", "papermill", str(notebook), str(output),
        "--cwd", str(notebook.parent), "--kernel", "python3",
        "--no-progress-bar", "--log-output", "--log-level", "INFO",
    ]
    if timeout:
        cmd += ["--execution-timeout", str(timeout)]
    if size:
        cmd += ["-p", "size", size]
    return cmd


def run_chapter(notebook: Path, slug: str, size: str, *, inject_size: bool, gpu: str | None = None,
                timeout: int | None = None, on_cell=None) -> Outcome:
    """Execute one chapter with papermill in a child process; record its outcome next to the executed notebook."""
    out_dir = results_dir(slug) / "notebooks"
    out_dir.mkdir(parents=True, exist_ok=True)
    output = out_dir / notebook.name
    log_path = output.with_suffix(".log")
    env = dict(os.environ, LABMAGIC_ROOT=str(repo_root()), LABMAGIC_SWEEP="1", PYDEVD_DISABLE_FILE_VALIDATION="1")
    if gpu is not None:
        env["CUDA_VISIBLE_DEVICES"] = gpu
    input_hash = chapter_hash(notebook)
    started = time.monotonic()
    when = datetime.now(timezone.utc).isoformat(timespec="seconds")
    last_error = ""
    with open(log_path, "w", encoding="utf-8") as log:
        proc = subprocess.Popen(
            papermill_command(notebook, output, size if inject_size else None, timeout),
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=str(notebook.parent),
        )
        assert proc.stdout is not None
        for line in proc.stdout:
            log.write(line)
            cell = _CELL_LINE.search(line)
            if cell and on_cell:
                on_cell(notebook.stem, int(cell.group(1)))
            err = _ERROR_LINE.match(line)
            if err:
                last_error = err.group(1).strip()
        code = proc.wait()
    seconds = time.monotonic() - started
    status = "passed" if code == 0 else "failed"
    error = "" if code == 0 else (last_error or f"papermill exited with status {code}; see {log_path}")
    record = {
        "chapter": notebook.stem, "status": status, "size": size, "input_hash": input_hash, "started": when,
        "seconds": round(seconds, 2), "error": error, "device": slug,
        "gpu_name": gpu_name(int(gpu)) if gpu else gpu_name(), "cuda_visible_devices": gpu,
        "python": sys.version.split()[0],
    }
    write_manifest(record)
    return Outcome(notebook.stem, status, slug, seconds, error, str(output), gpu)


def write_reference(executed: Path, target: Path) -> None:
    """Copy an executed notebook into ``book/`` without papermill's per-run timing metadata (smaller diffs)."""
    nb = json.loads(executed.read_text(encoding="utf-8"))
    nb.get("metadata", {}).pop("papermill", None)
    for cell in nb.get("cells", []):
        meta = cell.get("metadata", {})
        meta.pop("papermill", None)
        meta.pop("execution", None)
    atomic_write(target, json.dumps(nb, indent=1, ensure_ascii=False) + "\n")
