"""Every measurement ``results/`` holds, as one DataFrame: each ``results/<gpu>/bench/<chapter>.csv`` read with the
schema's types, with the GPU slug and chapter taken from the path (a stray column value does not move a row)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from .schema import NUMERIC, OK


def csv_paths(root: Path) -> list[Path]:
    return sorted(Path(root).glob("results/*/bench/*.csv"))


def load(root: Path) -> pd.DataFrame:
    """Every row of every ``results/*/bench/*.csv``, with ``gpu_slug``, ``chapter`` and ``csv`` (its path)."""
    frames = []
    for path in csv_paths(root):
        try:
            frame = pd.read_csv(path, dtype=str, keep_default_na=False)  # versions like 0.10 stay text
        except (pd.errors.EmptyDataError, pd.errors.ParserError):
            continue
        for col in NUMERIC:
            if col in frame.columns:
                frame[col] = pd.to_numeric(frame[col], errors="coerce")
        frame["gpu_slug"] = path.parent.parent.name
        frame["chapter"] = path.stem
        frame["csv"] = path.relative_to(root).as_posix()
        frames.append(frame)
    if not frames:
        return pd.DataFrame(columns=["gpu_slug", "chapter", "variant", "shape", "status", "csv"])
    return pd.concat(frames, ignore_index=True)


def measured_ok(df: pd.DataFrame) -> pd.Series:
    """Rows that passed and carry a time."""
    status = df["status"].astype(str).str.lower() if "status" in df.columns else pd.Series(OK, index=df.index)
    measured = df["ms_median"].notna() if "ms_median" in df.columns else pd.Series(False, index=df.index)
    return (status == OK) & measured


def distinct(rows: pd.DataFrame, col: str) -> list[str]:
    """Distinct non-empty values of a column, sorted (``-`` means not recorded)."""
    if col not in rows.columns:
        return []
    return sorted({str(v) for v in rows[col].dropna()} - {"", "nan", "-"})
