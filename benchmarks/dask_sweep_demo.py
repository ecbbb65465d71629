"""Does a sweep on a Dask cluster reproduce a sweep on this machine? ``--scheduler local-cuda`` against ``--gpus all``
on one multi-GPU host (issue 20).

Both runs sweep chapters 01, 03 and 04 with ``--quick --force``, their ``%ncu`` cells removed (profiling is not what
this compares), each in a scratch copy of the repository (``LABMAGIC_ROOT`` and ``PYTHONPATH`` pointing at it, git
initialised and the copy committed, since the cluster ships a commit to its workers), so the book's own results are
not touched. The copy is of the working tree (tracked and untracked files, not ignored ones); the summary names the
commit it came from and whether the tree had uncommitted changes. The chapters' stored rows and notebooks are removed
from both copies first, so each run's CSVs hold only its own rows.

- run A: ``labmagic sweep 01 03 04 --quick --force --gpus all`` (one worker thread per GPU)
- run B: ``labmagic sweep 01 03 04 --quick --force --scheduler local-cuda --kinds all`` (dask-cuda's LocalCUDACluster,
  one worker process per GPU; without dask_cuda, labmagic says so and starts one plain Dask worker per GPU with
  ``CUDA_VISIBLE_DEVICES`` set)

Then, per row: the same (chapter, variant, shape, dtype) keys and statuses in both runs, and the ratio B/A of the
medians, summarised (min / median / max) for the rows timed on the device (CUDA events or graphs) and apart for the
others (host-timed). Written into ``--out``: ``summary.md``, ``rows.csv``, ``records.json`` (each run's chapter
records: status, seconds, worker, CUDA_VISIBLE_DEVICES) and the two sweeps' output (``run_a.txt``, ``run_b.txt``).

Usage (from the repository root, ``labmagic`` importable, e.g. ``PYTHONPATH=.``; dask, distributed, dask_cuda):

    python benchmarks/dask_sweep_demo.py --out results/nvidia-h200/sweep_dask_demo   # a host with 2+ GPUs
    python benchmarks/dask_sweep_demo.py --dry-run                                    # any machine: the plan
    python benchmarks/dask_sweep_demo.py --cpu --out /tmp/demo    # no GPU: serial against --scheduler local
"""

from __future__ import annotations

import argparse
import csv
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run from a checkout without installing

CHAPTERS = ("01", "03", "04")
SWEEP = ["--quick", "--force"]
#: Timers that time on the device; the rest (Pallas, timed around JAX's dispatch) time on the host.
DEVICE_TIMERS = ("cuda_event", "cuda_graph", "cupti")
#: Seconds either sweep may take (the two-GPU host does each in about a minute).
RUN_TIMEOUT_S = 200
KEY = ("chapter", "variant", "shape", "dtype")


def plan(cpu: bool) -> dict:
    from labmagic.runtime import device_slug, driver_devices

    gpus = len(driver_devices())
    if cpu:
        runs = {"a": [*SWEEP], "b": [*SWEEP, "--scheduler", "local", "--workers", "2", "--kinds", "all"]}
    else:
        runs = {"a": [*SWEEP, "--gpus", "all"], "b": [*SWEEP, "--scheduler", "local-cuda", "--kinds", "all"]}
    return {"gpus": gpus, "slug": device_slug(), "dask_cuda": importlib.util.find_spec("dask_cuda") is not None,
            "runs": runs}


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, text=True).stdout.strip()


def source_state() -> tuple[str, bool]:
    """The commit the working tree is at, and whether it has uncommitted changes."""
    dirty = git(ROOT, "status", "--porcelain", "--untracked-files=no")
    return git(ROOT, "rev-parse", "--short=12", "HEAD"), bool(dirty)


def scratch_copy(dest: Path, chapters: list[str]) -> Path:
    """The working tree's files in ``dest``, the chapters' ``%ncu`` cells and stored results removed, committed."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            check=True, capture_output=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        source = ROOT / name
        if source.is_file() and not source.is_symlink():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)
    for stem in chapters:
        notebook = dest / "book" / f"{stem}.ipynb"
        nb = json.loads(notebook.read_text(encoding="utf-8"))
        nb["cells"] = [c for c in nb["cells"]
                       if not (c["cell_type"] == "code" and "".join(c["source"]).lstrip().startswith("%ncu"))]
        notebook.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        results = dest / "results"
        for stored in [*results.glob(f"*/bench/{stem}.*"), *results.glob(f"*/notebooks/{stem}.*")]:
            stored.unlink()
    git(dest, "init", "-q")
    git(dest, "add", "-A")
    git(dest, "-c", "user.name=dask sweep demo", "-c", "user.email=demo@example.invalid", "commit", "-qm", "demo copy")
    return dest


def sweep(root: Path, chapters: list[str], args: list[str]) -> tuple[int, float, str]:
    env = dict(os.environ, LABMAGIC_ROOT=str(root),
               PYTHONPATH=os.pathsep.join(p for p in (str(root), os.environ.get("PYTHONPATH", "")) if p))
    started = time.monotonic()
    try:
        done = subprocess.run([sys.executable, "-m", "labmagic.cli", "sweep", *chapters, *args], cwd=root, env=env,
                              capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
        code, output = done.returncode, done.stdout + done.stderr
    except subprocess.TimeoutExpired as exc:
        code, output = 124, f"{exc.stdout or ''}{exc.stderr or ''}\n(stopped after {RUN_TIMEOUT_S} s)"
    return code, time.monotonic() - started, output


def rows_of(root: Path, slug: str, chapters: list[str]) -> dict[tuple, dict]:
    rows = {}
    for stem in chapters:
        path = root / "results" / slug / "bench" / f"{stem}.csv"
        if path.exists():
            with open(path, newline="") as handle:
                rows.update({tuple(r[k] for k in KEY): r for r in csv.DictReader(handle)})
    return rows


def records_of(root: Path, slug: str, chapters: list[str]) -> dict[str, dict]:
    found = {}
    for stem in chapters:
        path = root / "results" / slug / "notebooks" / f"{stem}.json"
        record = json.loads(path.read_text()) if path.exists() else {}
        found[stem] = {k: record.get(k) for k in ("status", "seconds", "error", "worker", "cuda_visible_devices",
                                                 "gpu_name", "commit")}
    return found


def compare(a: dict[tuple, dict], b: dict[tuple, dict]) -> list[dict]:
    table = []
    for key in sorted(set(a) | set(b)):
        ra, rb = a.get(key, {}), b.get(key, {})
        ms_a, ms_b = _float(ra.get("ms_median")), _float(rb.get("ms_median"))
        table.append({**dict(zip(KEY, key)), "backend": ra.get("backend") or rb.get("backend"),
                      "timer": ra.get("timer") or rb.get("timer"), "status_a": ra.get("status", "(missing)"),
                      "status_b": rb.get("status", "(missing)"), "ms_a": ms_a, "ms_b": ms_b,
                      "ratio_b_over_a": round(ms_b / ms_a, 4) if ms_a and ms_b else None})
    return table


def _float(text) -> float | None:
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


def spread(ratios: list[float]) -> str:
    if not ratios:
        return "no rows"
    return (f"{len(ratios)} rows: min {min(ratios):.3f}, median {statistics.median(ratios):.3f}, "
            f"max {max(ratios):.3f}")


def summary(facts: dict, table: list[dict], records: dict) -> str:
    same_keys = all(r["status_a"] != "(missing)" and r["status_b"] != "(missing)" for r in table)
    same_status = all(r["status_a"] == r["status_b"] for r in table)
    device = [r["ratio_b_over_a"] for r in table if r["ratio_b_over_a"] and r["timer"] in DEVICE_TIMERS]
    host = [r["ratio_b_over_a"] for r in table if r["ratio_b_over_a"] and r["timer"] not in DEVICE_TIMERS]
    statuses = sorted({r["status_a"] for r in table})
    a, b = facts["runs"]["a"], facts["runs"]["b"]
    lines = [
        "# `labmagic sweep --scheduler` against a sweep on this machine",
        "",
        f"Host: {facts['gpus']} GPU(s), kind `{facts['slug']}`; source commit {facts['commit']}"
        + (" with uncommitted changes (the copies hold them)" if facts["dirty"] else "") + ".",
        "dask_cuda: " + ("importable, so `local-cuda` is dask-cuda's LocalCUDACluster." if facts["dask_cuda"] else
                         "**cannot be imported**: `local-cuda` fell back to one plain Dask worker per GPU, "
                         "CUDA_VISIBLE_DEVICES set for each."),
        "",
        "| run | command | exit | wall time |",
        "|---|---|---|---|",
        f"| A | `labmagic sweep {' '.join(CHAPTERS)} {' '.join(a)}` | {facts['code_a']} | "
        f"{facts['seconds_a']:.0f} s |",
        f"| B | `labmagic sweep {' '.join(CHAPTERS)} {' '.join(b)}` | {facts['code_b']} | "
        f"{facts['seconds_b']:.0f} s |",
        "",
        f"- **Rows:** {len(table)}; same keys in both runs: {'yes' if same_keys else 'NO'}; same statuses: "
        f"{'yes' if same_status else 'NO'} (statuses: {', '.join(statuses) or 'none'}).",
        f"- **Device-timed medians, B/A:** {spread(device)}.",
        f"- **Host-timed medians, B/A:** {spread(host)}.",
        "",
        "| chapter | A: status, s, GPU | B: status, s, worker, CUDA_VISIBLE_DEVICES |",
        "|---|---|---|",
    ]
    for stem in facts["chapters"]:
        ra, rb = records["a"].get(stem, {}), records["b"].get(stem, {})
        lines.append(f"| {stem} | {ra.get('status')}, {ra.get('seconds')}, {ra.get('cuda_visible_devices')} | "
                     f"{rb.get('status')}, {rb.get('seconds')}, {rb.get('worker')}, {rb.get('cuda_visible_devices')} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, help="folder for the summary, the row table and the sweeps' output")
    parser.add_argument("--dry-run", action="store_true", help="print the plan; run and write nothing")
    parser.add_argument("--cpu", action="store_true", help="no GPU here: serial sweep against --scheduler local")
    parser.add_argument("--keep", action="store_true", help="keep the scratch copies (their paths are printed)")
    args = parser.parse_args()
    facts = plan(args.cpu)
    facts["commit"], facts["dirty"] = source_state()
    from labmagic.execute.dask_sweep import host_gpus  # noqa: F401  (fails early where labmagic lacks the cluster code)

    chapters = [c.stem for c in _chapters()]
    facts["chapters"] = chapters
    print(f"source: {ROOT} at {facts['commit']}{' (uncommitted changes: copied)' if facts['dirty'] else ''}")
    print(f"GPUs: {facts['gpus']} ({facts['slug']}); dask_cuda "
          + ("importable" if facts["dask_cuda"] else "cannot be imported: local-cuda falls back to one plain Dask "
             "worker per GPU with CUDA_VISIBLE_DEVICES set"))
    for run in ("a", "b"):
        print(f"run {run.upper()}: in a scratch copy (LABMAGIC_ROOT, PYTHONPATH): labmagic sweep {' '.join(CHAPTERS)} "
              f"{' '.join(facts['runs'][run])}")
    print(f"chapters: {', '.join(chapters)} (%ncu cells removed); then rows and medians compared into {args.out}")
    if args.dry_run:
        return 0
    if not args.out:
        parser.error("--out is needed (or --dry-run)")
    if not args.cpu and facts["gpus"] < 2:
        print(f"warning: {facts['gpus']} GPU(s) here; the comparison is meant for a host with two or more",
              file=sys.stderr)
    if not args.cpu and not facts["gpus"]:
        print("no GPU here: use --cpu", file=sys.stderr)
        return 2
    scratch = Path(tempfile.mkdtemp(prefix="dask-sweep-demo-"))
    try:
        roots = {run: scratch_copy(scratch / run, chapters) for run in ("a", "b")}
        outputs = {}
        for run in ("a", "b"):
            print(f"run {run.upper()} ...", flush=True)
            facts[f"code_{run}"], facts[f"seconds_{run}"], outputs[run] = sweep(roots[run], list(CHAPTERS),
                                                                               facts["runs"][run])
            print(f"  exit {facts[f'code_{run}']} after {facts[f'seconds_{run}']:.0f} s")
        table = compare(rows_of(roots["a"], facts["slug"], chapters), rows_of(roots["b"], facts["slug"], chapters))
        records = {run: records_of(roots[run], facts["slug"], chapters) for run in ("a", "b")}
        args.out.mkdir(parents=True, exist_ok=True)
        for run in ("a", "b"):
            (args.out / f"run_{run}.txt").write_text(outputs[run])
        (args.out / "records.json").write_text(json.dumps(records, indent=2) + "\n")
        with open(args.out / "rows.csv", "w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(table[0]) if table else list(KEY))
            writer.writeheader()
            writer.writerows(table)
        text = summary(facts, table, records)
        (args.out / "summary.md").write_text(text)
        print(text)
        return 0 if facts["code_a"] == facts["code_b"] == 0 else 1
    finally:
        if args.keep:
            print(f"scratch copies kept in {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)


def _chapters() -> list[Path]:
    found = []
    for number in CHAPTERS:
        matches = sorted((ROOT / "book").glob(f"{number}_*.ipynb"))
        if len(matches) != 1:
            raise SystemExit(f"no single chapter {number} in {ROOT / 'book'}")
        found += matches
    return found


if __name__ == "__main__":
    sys.exit(main())
