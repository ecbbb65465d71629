"""Nsight Compute for one variant of a chapter's race: run it, keep the report, summarise it.

``ncu`` must launch the process it profiles and writes its report when that process exits, so the
variant is rebuilt in a child (:mod:`labmagic.child`, replaying the chapter notebook) under

    ncu --set full --clock-control none --profile-from-start off -f -o results/<gpu>/profiles/<chapter>/<variant> \
        python -m labmagic.child --chapter ... --variant ... --shape ... --mode ncu

``--profile-from-start off`` with the child's ``cudaProfilerStart/Stop`` around the timed calls means
only the variant's own kernels are profiled: not input creation, not warm-up, not Triton's or JAX's
compilation. ``--clock-control none`` keeps the GPU's normal boost clocks, which is what ``%bench``
measures (ncu's default locks the base clock and makes kernels look slower than they run).

The saved ``.ncu-rep`` opens in the Nsight Compute GUI; the summary comes from
``ncu --import REPORT --csv --page raw --print-units base`` (one row per kernel, one column per
metric), parsed by :mod:`labmagic.ncu`.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

from .errors import LabError, NoGPUError
from .ncu import KernelProfile, diagnose, parse_raw_csv, summary_rows
from .tools import find_nsight_tool

CHILD_MARKER = "LABMAGIC-CHILD "


class ProfilerError(LabError, RuntimeError):
    """ncu ran but produced no usable report."""


# --- finding the tools ----------------------------------------------------------------------------

def find_ncu() -> str:
    return find_nsight_tool("ncu", "LABMAGIC_NCU")


def require_gpu(what: str) -> None:
    from .runtime import has_gpu

    if not has_gpu():
        raise NoGPUError(f"{what} needs a CUDA GPU; this machine has none (the compile panel works without one: "
                         f"%%cuda_kernel --panel)")




# --- running ---------------------------------------------------------------------------------------

@dataclasses.dataclass
class ProfileResult:
    """The kernels one variant launched (per call) and where the full report is."""

    chapter: str
    variant: str
    shape: str
    report: Path | None
    kernels: list[KernelProfile]
    iters: int = 1
    nbytes: float | None = None  # the race's predicted bytes per call
    flops: float | None = None
    command: list[str] = dataclasses.field(default_factory=list)

    @property
    def dram_bytes(self) -> float | None:
        """DRAM bytes read + written per call, summed over the variant's kernels."""
        values = [(k.dram_read or 0) + (k.dram_write or 0) for k in self.kernels
                  if k.dram_read is not None or k.dram_write is not None]
        return sum(values) / max(self.iters, 1) if values else None

    @property
    def duration_s(self) -> float | None:
        values = [k.duration_s for k in self.kernels if k.duration_s is not None]
        return sum(values) / max(self.iters, 1) if values else None

    def _repr_html_(self) -> str:
        from .display.explain import profile_html

        return profile_html(self)

    def __repr__(self) -> str:
        from .display.explain import profile_text

        return profile_text(self)


def report_path(chapter: str, variant: str, slug: str | None = None) -> Path:
    """``results/<gpu>/profiles/<chapter>/<variant>`` (ncu adds ``.ncu-rep``)."""
    from .paths import results_dir

    return results_dir(slug) / "profiles" / chapter / variant


def child_command(chapter: str, variant: str, shape: str | None, mode: str, iters: int = 1,
                  params: dict | None = None) -> list[str]:
    """``python -m labmagic.child ...``; a notebook path is made absolute (the child runs at the repo root)."""
    if str(chapter).endswith(".ipynb"):
        chapter = str(Path(chapter).resolve())
    cmd = [sys.executable, "-m", "labmagic.child", "--chapter", str(chapter), "--variant", variant,
           "--mode", mode, "--iters", str(iters)]
    if shape:
        cmd += ["--shape", *str(shape).split()]
    for name, value in (params or {}).items():  # VALUE as typed; the child reads it as a Python literal
        cmd += ["-p", f"{name}={value}"]
    return cmd


def child_record(output: str) -> dict:
    """The child's last ``LABMAGIC-CHILD {json}`` line, or {} when it died before writing one."""
    for line in reversed(output.splitlines()):
        idx = line.find(CHILD_MARKER)
        if idx >= 0:
            try:
                return json.loads(line[idx + len(CHILD_MARKER):])
            except ValueError:
                return {}
    return {}


def ncu_command(ncu: str, out: Path, child: list[str], section_set: str = "full",
                clock_control: str = "none", extra: tuple[str, ...] = ()) -> list[str]:
    return [ncu, "--set", section_set, "--clock-control", clock_control, "--profile-from-start", "off",
            "--target-processes", "all", "-f", "-o", str(out), *extra, *child]


def profile_variant(chapter: str, variant: str, shape: str | None = None, *, section_set: str = "full",
                    clock_control: str = "none", iters: int = 1, extra: tuple[str, ...] = (),
                    params: dict | None = None, slug: str | None = None, timeout: float | None = 1800,
                    ) -> ProfileResult:
    """Profile ``variant`` of ``chapter``'s race at ``shape`` (``"4096"``, ``"4096x4096"``; default the
    race's largest) under Nsight Compute; save the report and return the per-kernel summary."""
    require_gpu("%ncu")
    ncu = find_ncu()
    out = report_path(_chapter_stem(chapter), variant, slug)
    out.parent.mkdir(parents=True, exist_ok=True)
    child = child_command(chapter, variant, shape, "ncu", iters, params)
    cmd = ncu_command(ncu, out, child, section_set, clock_control, extra)
    from .paths import repo_root

    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=repo_root(),
                          env=child_env())
    log = proc.stdout + proc.stderr
    record = child_record(proc.stdout)
    reason = diagnose(log)
    if reason and "ERR_NVGPUCTRPERM" in reason:
        raise ProfilerError(reason)
    if record and not record.get("ok", False):
        raise ProfilerError(f"the child could not run {variant!r}: {record.get('error')}", detail=log_tail(log))
    report = out.with_suffix(".ncu-rep")
    if not report.exists():
        raise ProfilerError(reason or f"ncu wrote no report (exit code {proc.returncode})", detail=log_tail(log))
    kernels = read_report(report, ncu)
    if not kernels:
        raise ProfilerError(reason or "the report holds no kernels", detail=log_tail(log))
    _save_csv(out.with_suffix(".csv"), kernels)
    return ProfileResult(chapter=record.get("chapter", str(chapter)), variant=variant,
                         shape=record.get("shape", shape or ""), report=report, kernels=kernels, iters=iters,
                         nbytes=record.get("nbytes"), flops=record.get("flops"), command=cmd)


def read_report(report: Path, ncu: str | None = None) -> list[KernelProfile]:
    """Per-kernel metrics of a saved ``.ncu-rep`` (raw page, base units)."""
    ncu = ncu or find_ncu()
    proc = subprocess.run([ncu, "--import", str(report), "--csv", "--page", "raw", "--print-units", "base"],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise ProfilerError(f"ncu --import {report.name} failed", detail=log_tail(proc.stdout + proc.stderr))
    return parse_raw_csv(proc.stdout)


def _save_csv(path: Path, kernels: list[KernelProfile]) -> bool:
    """A flat summary next to the report, for diffs and the book's tables."""
    rows = summary_rows(kernels)
    if not rows:
        return False
    with open(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return True


def _chapter_stem(chapter: str) -> str:
    try:
        from .chapter import chapter_path

        return chapter_path(chapter).stem
    except LabError:
        return Path(str(chapter)).stem


def child_env(**extra: str) -> dict:
    """The child's environment: this labmagic importable whatever the working directory."""
    env = dict(os.environ)
    env.setdefault("PYTHONUNBUFFERED", "1")
    package_parent = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_parent, env.get("PYTHONPATH", "")) if p)
    env.update(extra)
    return env


def log_tail(log: str, lines: int = 30) -> str:
    """The last lines of a tool's output, for an error's detail."""
    return "\n".join(log.strip().splitlines()[-lines:])


# --- CLI: labmagic profile CHAPTER -----------------------------------------------------------------

def list_variants(chapter: str, params: dict | None = None) -> dict:
    """The race's variants and shapes, asked of a child (so the CLI never imports the chapter itself)."""
    cmd = [sys.executable, "-m", "labmagic.child", "--chapter", str(chapter), "--mode", "list"]
    for name, value in (params or {}).items():
        cmd += ["-p", f"{name}={value}"]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=child_env())
    record = child_record(proc.stdout)
    if not record or record.get("ok") is False:
        raise LabError(f"could not load chapter {chapter!r}: {record.get('error', 'no answer from the child')}",
                       detail=log_tail(proc.stderr))
    return record


def add_chapter_arguments(parser, verb: str) -> None:
    """The arguments every command that runs a chapter's variants in a child takes (profile, sanitize)."""
    parser.add_argument("chapter", help="chapter number, stem or name (01, 01_vector_add, vector_add)")
    parser.add_argument("--variant", action="append", help=f"variant(s) to {verb} (default: all)")
    parser.add_argument("-p", "--param", action="append", default=[], metavar="NAME=VALUE",
                        help="override a papermill parameter of the chapter")


def chapter_variants(args) -> tuple[dict[str, str], list[str]]:
    """(papermill parameters, variants to run) from :func:`add_chapter_arguments`'s arguments."""
    params = dict(p.partition("=")[::2] for p in args.param)
    return params, args.variant or list_variants(args.chapter, params)["variants"]


def add_arguments(parser) -> None:
    add_chapter_arguments(parser, "profile")
    parser.add_argument("--shape", help="shape to profile: 4096, 4096x4096, 2**28 (default: the race's largest)")
    parser.add_argument("--set", dest="section_set", default="full", help="ncu section set (default: full)")
    parser.add_argument("--clock-control", default="none", help="ncu --clock-control (default: none)")
    parser.add_argument("--iters", type=int, default=1, help="calls inside the profiled range")


def run(args) -> int:
    require_gpu("labmagic profile")
    find_ncu()
    params, variants = chapter_variants(args)
    failed = 0
    for variant in variants:
        try:
            result = profile_variant(args.chapter, variant, args.shape, section_set=args.section_set,
                                     clock_control=args.clock_control, iters=args.iters, params=params)
        except ProfilerError as exc:
            if "ERR_NVGPUCTRPERM" in str(exc):
                raise
            print(f"{variant}: {exc}", file=sys.stderr)
            failed += 1
            continue
        print(repr(result))
        print(f"  report: {result.report}\n")
    return 1 if failed else 0

