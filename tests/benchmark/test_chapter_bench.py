"""What ``labmagic bench`` runs of a replayed chapter (labmagic.benchmark.chapter_bench), in this process on CPU:
which races, variants and shapes a command line selects, and the one line that names what exists when a name does
not. The command itself, through its child, is tests/cli/test_bench_command.py."""

from __future__ import annotations

import pytest
import torch

import labmagic
from labmagic.benchmark import Race
from labmagic.benchmark.chapter_bench import BadInput, BenchSpec, run_spec, select

pytestmark = pytest.mark.skipif(labmagic.has_gpu(), reason="CPU-mode behaviour (a prediction, nothing timed)")


def added(a, b):
    return a + b


def make(n):
    return torch.randn(n), torch.randn(n)


@pytest.fixture
def namespace():
    """A replayed chapter's namespace, as load_chapter leaves it: two races, the first named by its %bench."""
    race = Race(chapter="98_scratch", variants={"torch": added, "twice": lambda a, b: b + a}, ref="torch",
                make_inputs=make, shapes=[64, 128], check_shapes=[3, 17])
    race_b = Race(chapter="98_scratch", variants={"torch": added, "only_b": added}, ref="torch", make_inputs=make,
                  shapes=[32], check_shapes=[5])
    return {"race": race, "race_b": race_b, "size": "full", "__bench_line__": "%bench race",
            "__chapter_path__": "/book/98_scratch.ipynb"}


@pytest.mark.parametrize(("spec", "message"), [
    (BenchSpec(races=["nope", "race"]), "98_scratch has no race 'nope' (races: race, race_b)"),
    (BenchSpec(variants=["nope"]), "race 'race' of 98_scratch has no variant 'nope' (variants: torch, twice)"),
    (BenchSpec(shapes=["4096", "64"]),
     "race 'race' of 98_scratch has no shape '4096' (shapes: 64, 128; check shapes 3, 17)"),
    (BenchSpec(races=["race", "race_b"], variants=["nope", "only_b"]),
     "none of the races named in 98_scratch has the variant 'nope' (race: torch, twice; race_b: torch, only_b)"),
])
def test_a_name_the_chapter_does_not_have_names_what_it_has(namespace, spec, message):
    with pytest.raises(BadInput) as caught:
        select(namespace, spec)
    assert str(caught.value) == message


def test_the_default_race_is_the_one_the_chapters_bench_names(namespace):
    assert [(name, v, s) for name, _, v, s in select(namespace, BenchSpec())] == [("race", None, None)]


def test_a_named_variant_or_shape_runs_in_the_races_that_have_it_and_the_others_are_left_out(namespace):
    chosen = select(namespace, BenchSpec(races=["race", "race_b"], variants=["only_b"]))
    assert [(name, v, s) for name, _, v, s in chosen] == [("race_b", ["only_b"], None)]
    chosen = select(namespace, BenchSpec(races=["race", "race_b"], shapes=["3", "32"]))  # a check shape is a shape
    assert [(name, s) for name, _, _, s in chosen] == [("race", [(3,)]), ("race_b", [(32,)])]


def test_run_spec_prints_the_narrowed_race_per_shape_with_its_reference(namespace):
    record = run_spec(namespace, BenchSpec(shapes=["128"], variants=["twice"]))
    (race,) = record["races"]
    assert race["name"] == "race" and not race["failed"]
    text = race["text"]
    assert text.startswith("## race\n") and [line for line in text.splitlines() if line.startswith("### ")] == [
        "### 128 (float32)"]
    assert [line.split("|")[1].strip() for line in text.splitlines() if line.startswith("| ")] == [
        "variant", "torch", "twice"]  # the reference always runs
    assert record["csv"] == [] and record["plots"] == []  # nothing measured, nothing saved


def test_check_runs_the_correctness_pass_alone(namespace):
    namespace["race"].variants["wrong"] = lambda a, b: a - b
    record = run_spec(namespace, BenchSpec(check=True))
    (race,) = record["races"]
    assert race["failed"] and "err / tol" in race["text"] and "MISMATCH" in race["text"]
