"""This run's rows against earlier ones: which got slower or faster beyond their noise.

Two sets of bench rows (each what :func:`labmagic.store.catalog.load` gives) are joined on GPU, chapter, variant,
shape and dtype. A row *changed* when its median moved by more than ``threshold`` (relative; 2% by default) **and**,
where both rows carry the medians' 95% intervals (:mod:`labmagic.timing.noise`), those intervals do not overlap. The
threshold is there because an interval describes the calls of one run: two runs also differ by what no interval
of either sees (clocks, temperature, the machine), which on the H200 has been about 1%. Rows measured before the
intervals existed are judged by the threshold alone, and the table says so.

The earlier rows come from a git revision (``labmagic results --compare REV``: the CSVs as committed there, read
with the same strict reader) or from the CSVs as they were before a sweep (the line ``labmagic sweep`` ends with).
"""

from __future__ import annotations

import io
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ..errors import LabError
from .catalog import SLUG, measured_ok, parse_bench_csv
from .schema import KEY

#: A median must move by more than this fraction to count as a change (see the module docstring).
THRESHOLD = 0.02
JOIN = ["gpu_slug", *KEY]
SLOWER, FASTER, SAME = "slower", "faster", "same"


def rows_at(root: Path, rev: str) -> pd.DataFrame:
    """Every bench row committed at git revision ``rev`` of the checkout at ``root``."""
    root = Path(root)
    if rev.startswith("-"):
        raise LabError(f"--compare {rev!r}: a revision does not start with '-'")
    listing = _git(root, "ls-tree", "-r", "-z", "--full-tree", rev, "--", "results/")
    frames = []
    for entry in filter(None, listing.split("\0")):
        meta, path = entry.split("\t", 1)
        parts = path.split("/")
        if len(parts) != 4 or parts[2] != "bench" or not parts[3].endswith(".csv"):
            continue
        mode = meta.split()[0]
        if mode not in ("100644", "100755"):
            raise LabError(f"{plain(path)} at {plain(rev)} is not a plain file (mode {mode}): results are plain files")
        text = _git(root, "show", f"{rev}:{path}")
        try:
            frames.append(parse_bench_csv(io.StringIO(text, newline=""), Path(path)))
        except LabError as exc:
            raise LabError(f"{exc} (as committed at {plain(rev)})") from None
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def _git(root: Path, *args: str) -> str:
    try:
        done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise LabError(f"`git {' '.join(args)}`: {exc}") from None
    if done.returncode:
        why = (done.stderr.strip().splitlines() or ["failed"])[-1]
        raise LabError(f"`git {' '.join(args)}`: {why}")
    return done.stdout


@dataclass
class Comparison:
    """The joined rows (``old_ms``, ``new_ms``, ``change``, ``verdict``) and what they were compared against."""

    rows: pd.DataFrame
    against: str
    threshold: float = THRESHOLD

    def count(self, verdict: str) -> int:
        return int((self.rows["verdict"] == verdict).sum()) if len(self.rows) else 0

    @property
    def changed(self) -> pd.DataFrame:
        return self.rows[self.rows["verdict"] != SAME] if len(self.rows) else self.rows

    def line(self) -> str:
        """One line for the end of a sweep."""
        if not len(self.rows):
            return f"compared with {self.against}: no rows in common"
        without = int(self.rows["by_threshold_only"].sum())
        tail = f" ({without} without intervals, judged by the {self.threshold:.0%} threshold alone)" if without else ""
        return (f"compared with {self.against}: {self.count(SLOWER)} slower, {self.count(FASTER)} faster beyond "
                f"noise, {self.count(SAME)} the same{tail}")

    def text(self) -> str:
        """The line, then one line per changed row, per GPU, slowest first."""
        out = [self.line()]
        for slug, rows in self.changed.groupby("gpu_slug", sort=True):
            out.append(f"{plain(slug)}:")
            for _, r in rows.sort_values("change", ascending=False).iterrows():
                out.append(f"  {r['verdict']:6s} {r['change']:+7.1%}  {r['old_ms']:.4g} -> {r['new_ms']:.4g} ms  "
                           f"{plain(r['chapter'])}  {plain(r['variant'])}  {plain(r['shape'])}  {plain(r['dtype'])}")
        return "\n".join(out)


def plain(value) -> str:
    """A CSV value for a terminal line: control characters (an escape sequence in a crafted CSV) shown, not run."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(value))


def compare(old: pd.DataFrame, new: pd.DataFrame, against: str, threshold: float = THRESHOLD) -> Comparison:
    """Join the rows that passed in both and judge each (see the module docstring)."""
    if not 0 <= threshold < 1:
        raise LabError(f"threshold {threshold!r}: a fraction between 0 and 1 (0.02 is 2%)")
    keep = [*JOIN, "ms_median", "ms_ci_low", "ms_ci_high"]
    if old.empty or new.empty:
        return Comparison(pd.DataFrame(columns=[*JOIN, "old_ms", "new_ms", "change", "verdict",
                                                "by_threshold_only"]), against, threshold)
    both = old[measured_ok(old)][keep].merge(new[measured_ok(new)][keep], on=JOIN, suffixes=("_old", "_new"))
    both["old_ms"], both["new_ms"] = both.pop("ms_median_old"), both.pop("ms_median_new")
    both["change"] = both["new_ms"] / both["old_ms"] - 1
    intervals = both[["ms_ci_low_old", "ms_ci_high_old", "ms_ci_low_new", "ms_ci_high_new"]].notna().all(axis=1)
    apart = (both["ms_ci_low_new"] > both["ms_ci_high_old"]) | (both["ms_ci_high_new"] < both["ms_ci_low_old"])
    moved = both["change"].abs() > threshold
    changed = moved & (apart | ~intervals)
    both["verdict"] = SAME
    both.loc[changed & (both["change"] > 0), "verdict"] = SLOWER
    both.loc[changed & (both["change"] < 0), "verdict"] = FASTER
    both["by_threshold_only"] = ~intervals
    return Comparison(both.drop(columns=[c for c in both.columns if c.startswith("ms_ci_")]), against, threshold)


def snapshot(root: Path, slugs: list[str]) -> dict[Path, str]:
    """The text of every bench CSV of these GPUs now (before a sweep rewrites them)."""
    texts = {}
    for slug in slugs:
        if SLUG.fullmatch(slug):
            for path in sorted((Path(root) / "results" / slug / "bench").glob("*.csv")):
                texts[path.relative_to(root)] = path.read_text(encoding="utf-8")
    return texts


def rows_of(texts: dict[Path, str]) -> pd.DataFrame:
    """The rows of a :func:`snapshot`."""
    frames = [parse_bench_csv(io.StringIO(text, newline=""), name) for name, text in texts.items()]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def since_snapshot(root: Path, before: dict[Path, str], ran: set[tuple[str, str]]) -> str:
    """The line a sweep ends with: the rows of the (GPU, chapter) pairs it ran against the :func:`snapshot` taken
    before it, beyond noise."""
    against = "the rows stored before this sweep"
    if not ran:
        return f"compared with {against}: no chapter ran"
    try:
        new = rows_of(snapshot(root, sorted({slug for slug, _ in ran})))
        old = rows_of(before)
    except LabError as exc:
        return f"not compared with {against}: {exc}"
    if not new.empty:
        new = new[[(s, c) in ran for s, c in zip(new["gpu_slug"], new["chapter"])]]
    result = compare(old, new, against)
    return result.line() + ("; `labmagic results --compare HEAD` lists them" if len(result.changed) else "")
