"""Rooflines: what a GPU can do at best, from its spec sheet and from our own measurement.

Two ceilings are kept apart on purpose. The *spec* peak (this table) is what the vendor promises and
what a chapter's "% of SOL" is measured against; no kernel reaches it, so it is also the *physical floor*
(:func:`floor_ms`): a time below it means a broken timer or a wrong count of FLOPs or bytes, and is flagged
rather than celebrated. The *measured* ceiling (``results/<gpu>/ceilings.json``, written by ``labmagic
calibrate``) is what a plain device-to-device copy and a cuBLAS matmul actually reach on this machine: a
library's result, not physics, so a kernel may beat it (a GEMM ahead of cuBLAS reads above 100% of it, a win).

Spec numbers are dense (no 2:4 sparsity), tensor-core throughput with FP32 accumulation where the
vendor distinguishes, and the fp32 entry is the CUDA-core (non tensor-core) rate. Units: bandwidth in
GB/s (1e9 bytes/s), throughput in TFLOP/s (TOP/s for int8).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

#: dtype spellings a race may use -> the key in the peak tables.
DTYPE_KEYS = {
    "float32": "fp32", "fp32": "fp32", "float": "fp32",
    "tf32": "tf32",
    "bfloat16": "bf16", "bf16": "bf16",
    "float16": "fp16", "fp16": "fp16", "half": "fp16",
    "int8": "int8", "uint8": "int8",
    "float8_e4m3fn": "fp8", "float8_e5m2": "fp8", "fp8": "fp8",
    "float64": "fp64", "fp64": "fp64", "double": "fp64",
}


@dataclass(frozen=True)
class GpuSpec:
    """One GPU's spec-sheet peaks."""

    slug: str
    name: str
    bandwidth_gbps: float
    tflops: dict[str, float]
    l2_bytes: int

    def peak_tflops(self, dtype: str) -> float | None:
        return self.tflops.get(dtype_key(dtype))


#: Spec sheets (NVIDIA datasheets; dense rates). Keys are device slugs as ``runtime.device_slug`` makes them.
SPECS: dict[str, GpuSpec] = {s.slug: s for s in [
    GpuSpec("nvidia-h200", "NVIDIA H200 (SXM)", 4800.0,
            {"fp64": 34.0, "fp32": 67.0, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4, "fp8": 1978.9, "int8": 1978.9},
            50 * 2**20),
    GpuSpec("nvidia-h100-80gb-hbm3", "NVIDIA H100 (SXM)", 3350.0,
            {"fp64": 34.0, "fp32": 67.0, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4, "fp8": 1978.9, "int8": 1978.9},
            50 * 2**20),
    GpuSpec("nvidia-h100-pcie", "NVIDIA H100 (PCIe)", 2000.0,
            {"fp64": 26.0, "fp32": 51.0, "tf32": 378.0, "bf16": 756.0, "fp16": 756.0, "fp8": 1513.0, "int8": 1513.0},
            50 * 2**20),
    GpuSpec("nvidia-a100-sxm4-80gb", "NVIDIA A100 80GB (SXM)", 2039.0,
            {"fp64": 9.7, "fp32": 19.5, "tf32": 156.0, "bf16": 312.0, "fp16": 312.0, "int8": 624.0},
            40 * 2**20),
    GpuSpec("nvidia-a100-sxm4-40gb", "NVIDIA A100 40GB (SXM)", 1555.0,
            {"fp64": 9.7, "fp32": 19.5, "tf32": 156.0, "bf16": 312.0, "fp16": 312.0, "int8": 624.0},
            40 * 2**20),
    GpuSpec("nvidia-a100-80gb-pcie", "NVIDIA A100 80GB (PCIe)", 1935.0,
            {"fp64": 9.7, "fp32": 19.5, "tf32": 156.0, "bf16": 312.0, "fp16": 312.0, "int8": 624.0},
            40 * 2**20),
    GpuSpec("nvidia-l40s", "NVIDIA L40S", 864.0,
            {"fp32": 91.6, "tf32": 183.0, "bf16": 362.0, "fp16": 362.0, "fp8": 733.0, "int8": 733.0},
            96 * 2**20),
    GpuSpec("nvidia-l4", "NVIDIA L4", 300.0,
            {"fp32": 30.3, "tf32": 60.0, "bf16": 121.0, "fp16": 121.0, "fp8": 242.5, "int8": 242.5},
            48 * 2**20),
    GpuSpec("nvidia-geforce-rtx-4090", "NVIDIA GeForce RTX 4090", 1008.0,
            {"fp32": 82.6, "tf32": 82.6, "bf16": 165.2, "fp16": 165.2, "fp8": 330.3, "int8": 660.6},
            72 * 2**20),
    GpuSpec("tesla-t4", "NVIDIA T4", 320.0,
            {"fp32": 8.1, "fp16": 65.0, "int8": 130.0},
            4 * 2**20),
]}

#: The GPU the book predicts for when the machine has none.
DEFAULT_TARGET = "nvidia-h200"


def dtype_key(dtype) -> str:
    """``torch.float32`` / ``"float32"`` / ``"fp32"`` -> ``"fp32"``."""
    text = str(dtype).rsplit(".", 1)[-1].lower()
    return DTYPE_KEYS.get(text, text)


def find_spec(name: str | None) -> GpuSpec | None:
    """The spec for a device name, slug or short target (``h200``, ``NVIDIA H100 80GB HBM3``, ``a100``).

    An exact slug wins; otherwise the first table entry whose slug contains every token of the query
    (so ``h100`` finds the SXM part, listed first, and ``h100 pcie`` the PCIe one).
    """
    if not name:
        return None
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    if slug in SPECS:
        return SPECS[slug]
    tokens = [t for t in slug.split("-") if t and t != "nvidia"]
    if not tokens:
        return None
    for match in (str.__eq__, str.startswith):  # whole words first: "l4" is the L4, not the L40S
        for spec in SPECS.values():
            parts = spec.slug.split("-")
            if all(any(match(p, t) for p in parts) for t in tokens):
                return spec
    return None


@dataclass(frozen=True)
class Ceilings:
    """This machine's measured ceilings (``labmagic calibrate``)."""

    copy_gbps: float
    matmul_tflops: dict[str, float] = field(default_factory=dict)
    source: str = ""
    #: The fastest memory pattern measured (copy, add, read); the bandwidth ceiling. Defaults to the copy.
    peak_gbps: float | None = None

    @property
    def bandwidth_gbps(self) -> float:
        return max(self.peak_gbps or 0.0, self.copy_gbps)

    def peak_tflops(self, dtype: str) -> float | None:
        return self.matmul_tflops.get(dtype_key(dtype))


def ceilings_path(slug: str) -> Path:
    from ..paths import results_dir

    return results_dir(slug) / "ceilings.json"


def load_ceilings(slug: str, path: Path | None = None) -> Ceilings | None:
    """Read ``results/<slug>/ceilings.json``; None when the GPU was never calibrated."""
    path = Path(path) if path else ceilings_path(slug)
    if not path.exists():
        return None
    data = json.loads(path.read_text())
    return Ceilings(copy_gbps=float(data["copy_gbps"]),
                    matmul_tflops={dtype_key(k): float(v) for k, v in data.get("matmul_tflops", {}).items()},
                    source=str(path), peak_gbps=float(data["peak_gbps"]) if "peak_gbps" in data else None)


@dataclass(frozen=True)
class Roof:
    """Bandwidth and compute peaks for one dtype, from one source (``spec`` or ``measured``)."""

    bandwidth_gbps: float | None
    tflops: float | None
    source: str

    def floor_ms(self, flops: float | None, nbytes: float | None) -> float | None:
        """The physical floor: the slower of moving ``nbytes`` and computing ``flops`` at peak."""
        times = []
        if nbytes and self.bandwidth_gbps:
            times.append(nbytes / (self.bandwidth_gbps * 1e9) * 1e3)
        if flops and self.tflops:
            times.append(flops / (self.tflops * 1e12) * 1e3)
        return max(times) if times else None

    def memory_bound(self, flops: float | None, nbytes: float | None) -> bool:
        """True when moving the bytes takes longer than doing the math (left of the ridge point)."""
        if not nbytes or not self.bandwidth_gbps:
            return False
        if not flops or not self.tflops:
            return True
        return nbytes / (self.bandwidth_gbps * 1e9) >= flops / (self.tflops * 1e12)

    def pct(self, ms: float, flops: float | None, nbytes: float | None) -> float | None:
        """Achieved fraction of this roof (percent) in the unit that bounds the kernel."""
        if not ms or ms <= 0:
            return None
        if self.memory_bound(flops, nbytes):
            return 100.0 * (nbytes / (ms * 1e-3) / 1e9) / self.bandwidth_gbps
        if flops and self.tflops:
            return 100.0 * (flops / (ms * 1e-3) / 1e12) / self.tflops
        return None


def spec_roof(spec: GpuSpec | None, dtype: str, sol=None, *, flops=None, nbytes=None) -> Roof | None:
    """The spec roof for a dtype, with a race's ``sol`` override applied.

    ``sol`` is a number, or a mapping keyed by GPU (see :func:`sol_for`), in GB/s when the kernel is
    memory-bound at the spec's ridge point and TFLOP/s otherwise, so a chapter states the one peak it is racing against.
    """
    if isinstance(sol, Mapping):
        sol = sol_for(spec, sol)
    if spec is None and sol is None:
        return None
    bw = spec.bandwidth_gbps if spec else None
    tf = spec.peak_tflops(dtype) if spec else None
    if sol is not None:
        base = Roof(bw, tf, "spec")
        if spec is None:
            # Without a spec there is no ridge point: the number is GB/s unless the race counts no bytes.
            return Roof(None, float(sol), "sol") if flops and not nbytes else Roof(float(sol), None, "sol")
        if base.memory_bound(flops, nbytes):
            bw = float(sol)
        else:
            tf = float(sol)
        return Roof(bw, tf, "sol")
    return Roof(bw, tf, "spec")


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", str(text).lower()).strip("-")


def sol_for(spec: GpuSpec | None, sol: Mapping[str, float]):
    """The entry of a per-GPU ``sol`` mapping that applies to ``spec``; None when none does.

    A key is a slug (``nvidia-h200``) or a piece of the GPU's name (``"H200"``, ``"A100 80GB"``), matched without
    case as whole words of the slug or of the spec's name (so ``"L4"`` is the L4, not the L40S). An exact slug
    wins; otherwise the longest matching key, so ``{"H100": 989, "H100 PCIe": 756}`` gives the PCIe part its own.
    """
    if spec is None:
        return None
    if spec.slug in sol:
        return sol[spec.slug]
    words = (f"-{spec.slug}-", f"-{_slug(spec.name)}-")
    matches = [k for k in sol if _slug(k) and any(f"-{_slug(k)}-" in w for w in words)]
    return sol[max(matches, key=lambda k: len(_slug(k)))] if matches else None


def measured_roof(ceilings: Ceilings | None, dtype: str) -> Roof | None:
    if ceilings is None:
        return None
    return Roof(ceilings.bandwidth_gbps, ceilings.peak_tflops(dtype), "measured")


#: How far past the measured ceiling a row must be to be called ahead of it: the ceiling is itself a median, and the
#: library that set it lands within this of it on another run.
CEILING_NOISE_PCT = 1.0


def ceiling_passed(ceiling_pct: float | None, bound_by_memory: bool) -> str:
    """The note for a row beyond the measured ceiling (a win, not an error): what it beat ('ahead of cuBLAS', the
    measured matmul's library, or 'ahead of the measured memory ceiling'); '' for one within the ceiling's noise."""
    if ceiling_pct is None or ceiling_pct != ceiling_pct or ceiling_pct <= 100 + CEILING_NOISE_PCT:
        return ""
    return "ahead of the measured memory ceiling" if bound_by_memory else "ahead of cuBLAS"


#: How far below the physical floor a time may land before it is flagged: the timer's own noise (a median of
#: microsecond-scale calls), not a margin for kernels, which cannot pass the spec sheet.
FLOOR_SLACK = 0.02


def floor_ms(spec: GpuSpec | None, dtype: str, flops: float | None, nbytes: float | None) -> float | None:
    """The physical floor: the time to move ``nbytes`` at the spec sheet's bandwidth or do ``flops`` at its peak
    rate for ``dtype``, whichever is longer. Never a race's ``sol`` nor a measured ceiling: those are targets and
    library results, and an honest kernel can pass them. None for a GPU the table does not know."""
    roof = spec_roof(spec, dtype) if spec else None
    return roof.floor_ms(flops, nbytes) if roof else None


def below_floor(ms: float | None, floor: float | None) -> bool:
    """Whether a median of ``ms`` is faster than the physical ``floor`` beyond the timer's noise: impossible, so
    the measurement (or the race's FLOP and byte counts) is suspect."""
    return bool(ms and floor and ms < (1 - FLOOR_SLACK) * floor)
