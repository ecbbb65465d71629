"""``labmagic bench CHAPTER``'s work, in the child that replayed the chapter: which races, shapes and variants the
command line names, each race run as ``%bench`` runs it, and what the parent prints.

The parent (:mod:`labmagic.cli.bench`) writes a :class:`BenchSpec` to a JSON file and starts
``python -m labmagic.child --chapter CHAPTER --mode bench --spec FILE``; the child replays the chapter
(:func:`labmagic.child.replay.load_chapter`) and calls :func:`run_spec` on the namespace. Every name is checked
against the chapter before anything runs, and one that does not exist is a :class:`BadInput` naming what does. Then
each race goes through :func:`~labmagic.benchmark.runner.bench` (or, with ``--check``,
:func:`~labmagic.benchmark.verify.verify`), so its rows reach the chapter's CSV through the same writer as
``%bench``'s, and comes back as Markdown (:func:`labmagic.display.race_table.render_markdown`).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..errors import LabError
from ..store.schema import ERROR, MISMATCH, shape_str
from .race import TIMERS

#: ``python -m labmagic.child --mode`` value of this mode.
MODE = "bench"


class BadInput(LabError):
    """A race, variant or shape the chapter does not have: the message names what it has."""


@dataclass
class BenchSpec:
    """What ``labmagic bench`` asks for: race names (none: the one the chapter's ``%bench`` names), shapes as
    ``AxB`` keys and variants (none: all), the timer (:data:`~labmagic.benchmark.race.TIMERS`), and whether to only
    check, cross-check with Nsight Compute, save the rows and draw the chapter's plots. No timer: the race's own
    (``Race(timer=...)``), else events."""

    races: list[str] = field(default_factory=list)
    shapes: list[str] = field(default_factory=list)
    variants: list[str] = field(default_factory=list)
    timer: str | None = None
    check: bool = False
    nsight: bool = False
    save: bool = True
    plot: bool = False

    def write(self, path: Path | str) -> Path:
        path = Path(path)
        path.write_text(json.dumps(asdict(self)))
        return path

    @classmethod
    def read(cls, path: Path | str) -> BenchSpec:
        try:
            raw = json.loads(Path(path).read_text())
            spec = cls(**raw)
        except (OSError, ValueError, TypeError) as exc:
            raise LabError(f"--spec {path}: not a labmagic bench spec ({type(exc).__name__}: {exc})") from exc
        if spec.timer is not None and spec.timer not in TIMERS:
            raise LabError(f"--spec {path}: timer {spec.timer!r} is not one of {', '.join(TIMERS)}")
        return spec


def _races(namespace: dict, names: list[str]) -> list[tuple[str, object]]:
    """(name, race) of each race asked for, or of the one the chapter's ``%bench`` names."""
    from ..child.replay import find_race, races_in

    found = dict(races_in(namespace))
    if not names:
        race = find_race(namespace)
        return [(next((n for n, r in found.items() if r is race), "race"), race)]
    unknown = [n for n in names if n not in found]
    if unknown:
        raise BadInput(f"{_chapter(namespace)} has no race {', '.join(map(repr, unknown))} "
                       f"(races: {', '.join(sorted(found)) or 'none'})")
    return [(n, found[n]) for n in dict.fromkeys(names)]


def _chapter(namespace: dict) -> str:
    return Path(namespace.get("__chapter_path__", "the chapter")).stem


def _declared(race) -> list[str]:
    """The race's shapes, then its check shapes, as keys."""
    return list(dict.fromkeys(shape_str(s) for s in [*race.shapes, *race.check_shapes]))


def _has(kind: str, race) -> str:
    """What a race has of ``kind``, for a message."""
    if kind == "variant":
        return ", ".join(race.variants) or "none"
    shapes = ", ".join(shape_str(s) for s in race.shapes) or "none"
    return f"{shapes}; check shapes {', '.join(shape_str(s) for s in race.check_shapes) or 'none'}"


def select(namespace: dict, spec: BenchSpec) -> list[tuple[str, object, list[str] | None, list[tuple] | None]]:
    """(name, race, variants, shapes) per race to run; None where the spec names none (all of them). A variant or
    shape (a timed or a check shape) must be one that some named race has; a race that has none of those named is
    left out."""
    races = _races(namespace, spec.races)
    for kind, asked, has in (("variant", spec.variants, lambda race: list(race.variants)),
                             ("shape", spec.shapes, _declared)):
        missing = [a for a in dict.fromkeys(asked) if not any(a in has(race) for _, race in races)]
        if missing:
            names = ", ".join(map(repr, missing))
            if len(races) == 1:
                name, race = races[0]
                raise BadInput(f"race {name!r} of {_chapter(namespace)} has no {kind} {names} "
                               f"({kind}s: {_has(kind, race)})")
            raise BadInput(f"none of the races named in {_chapter(namespace)} has the {kind} {names} "
                           f"({'; '.join(f'{n}: {_has(kind, race)}' for n, race in races)})")
    chosen = []
    for name, race in races:
        variants = [v for v in dict.fromkeys(spec.variants) if v in race.variants] or None
        shapes = [tuple(int(d) for d in s.split("x")) for s in dict.fromkeys(spec.shapes) if s in _declared(race)]
        if (spec.variants and variants is None) or (spec.shapes and not shapes):
            continue
        chosen.append((name, race, variants, shapes or None))
    return chosen


def run_spec(namespace: dict, spec: BenchSpec) -> dict:
    """Run what ``spec`` asks of the replayed chapter ``namespace``; the record the parent prints from:
    ``{"races": [{"name", "text", "failed"}], "csv": [...], "plots": [...]}``."""
    chosen = select(namespace, spec)
    record: dict = {"races": [], "csv": [], "plots": []}
    for name, race, variants, shapes in chosen:
        if spec.check:
            from .verify import verify

            result = verify(race, variants=variants, shapes=shapes)
            record["races"].append({"name": name, "text": f"## {name}\n\n{result!r}", "failed": result.failed})
            continue
        record["races"].append(_bench_one(name, race, variants, shapes, spec, record))
    return record


def _bench_one(name: str, race, variants, shapes, spec: BenchSpec, record: dict) -> dict:
    from ..display.race_table import render_markdown
    from .runner import bench

    result = bench(race, shapes=shapes, variants=variants, timer=spec.timer, save=None if spec.save else False,
                   plot=False, save_png=spec.plot)
    if spec.nsight:
        from .ncu_check import nsight_checked  # the child's tooling, only when asked

        nsight_checked(race, result)
    text = render_markdown(result, race.ref, title=name)
    if result.nsight_check is not None:
        text += f"\n\n```\n{result.nsight_check!r}\n```"
    for key, path in (("csv", result.csv_path), ("plots", result.png_path)):
        if path is not None and str(path) not in record[key]:
            record[key].append(str(path))
    return {"name": name, "text": text, "failed": any(r.status in (MISMATCH, ERROR) for r in result.rows)}
