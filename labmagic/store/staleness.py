"""Which stored rows no longer describe the current source.

A row is *stale* when the source it measured is no longer the current source:

* variant level: the row's ``source_hash`` (see :func:`labmagic.benchmark.provenance.source_hash`) differs from the
  hash of the most recent measurement of the same variant on any GPU among the rows current at chapter level (a
  kernel edited and re-run on one GPU makes the others stale; a run of a chapter since put back to its earlier
  source, which is stale itself, does not);
* chapter level: the chapter's notebook or kernel files changed since the row was measured: the row's
  ``chapter_hash`` (the chapter's hash when ``%bench`` wrote it) differs from the chapter's hash now, so a row a
  sweep measured before it was cut off is current while the chapter is unchanged; a row from before rows carried
  the hash goes by the sweep that produced the results (the hash that ``labmagic sweep`` stored in
  ``results/<gpu>/notebooks/<chapter>.json``); or the chapter is gone.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from ..errors import LabError
from .fingerprint import chapter_hash
from .manifest import passed_run


def _newest_hashes(df: pd.DataFrame) -> dict[str, dict[str, str]]:
    """chapter -> variant -> the source hash of its most recent measurement on any GPU."""
    rows = df[df["source_hash"].notna() & (df["source_hash"].astype(str) != "")]
    if "timestamp" in rows.columns:
        rows = rows.assign(_when=pd.to_datetime(rows["timestamp"], errors="coerce", utc=True)).sort_values("_when")
    newest: dict[str, dict[str, str]] = {}
    for _, row in rows.iterrows():  # later rows overwrite earlier ones
        newest.setdefault(row["chapter"], {})[row.get("variant")] = str(row["source_hash"])
    return newest


def _sweep_run(root: Path, slug: str, chapter: str) -> dict | None:
    """The sweep run the stored results came from, or None when no sweep recorded one; LabError naming the record
    when it is there but is not a JSON object (a broken record must not quietly make every row look fresh)."""
    name = f"results/{slug}/notebooks/{chapter}.json"  # named under the checkout: the message may reach the site
    path = Path(root) / name
    if not path.exists():
        return None
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise LabError(f"{name}: not a sweep record ({exc})") from None
    if not isinstance(record, dict):
        raise LabError(f"{name}: not a sweep record (a JSON object)")
    ran = passed_run(record)
    return ran if isinstance(ran, dict) else None


def stale_reasons(df: pd.DataFrame, root: Path) -> pd.Series:
    """Why each row is stale ('' when it is not): the chapter level first, for every row; then the variant level,
    against the newest measurement among the rows the first found current."""
    reasons = pd.Series("", index=df.index, dtype=object)
    if df.empty:
        return reasons
    hashes: dict[str, str] = {}  # chapter -> its notebook's hash, read once for all GPUs
    for (slug, chapter), rows in df.groupby(["gpu_slug", "chapter"]):
        notebook = Path(root) / "book" / f"{chapter}.ipynb"
        if not notebook.exists():
            reasons[rows.index] = f"chapter {chapter} no longer exists"
            continue
        ran = _sweep_run(root, slug, chapter)
        if chapter not in hashes:
            hashes[chapter] = chapter_hash(notebook)
        swept_before = bool(ran and ran.get("input_hash") != hashes[chapter])
        for idx, row in rows.iterrows():
            measured = row.get("chapter_hash")
            if isinstance(measured, str) and measured:  # the row says what it measured: that decides
                if measured != hashes[chapter]:
                    reasons[idx] = f"chapter changed since this row was measured ({str(row.get('timestamp'))[:10]})"
            elif swept_before:  # a row from before rows carried it: its sweep's record decides
                reasons[idx] = f"chapter changed since the sweep of {str(ran.get('started', '?'))[:10]}"
    if "source_hash" not in df.columns:
        return reasons
    current = df[reasons == ""]
    newest = _newest_hashes(current)
    for idx, row in current.iterrows():
        now = newest.get(row["chapter"], {}).get(row.get("variant"))
        then = row.get("source_hash")
        if now is not None and isinstance(then, str) and then and then != now:
            reasons[idx] = f"source of {row.get('variant')} changed since it was measured"
    return reasons


def with_staleness(df: pd.DataFrame, root: Path) -> pd.DataFrame:
    """``df`` with a ``stale`` column (the reason, or '')."""
    if not df.empty:
        df["stale"] = stale_reasons(df, root)
    return df
