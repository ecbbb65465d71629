"""``Race(rounds=N)``: the variants' timed calls taken in turns, in a rotating order (the real wall-clock timer,
real torch on the CPU; the call order is read from the variants themselves)."""

from __future__ import annotations

import itertools

import pytest
import torch

import labmagic
from labmagic.benchmark import Race, bench
from labmagic.errors import LabError
from labmagic.timing import WallTimer, round_orders, time_in_rounds

pytestmark = pytest.mark.skipif(labmagic.has_gpu(), reason="CPU-mode behaviour (the wall-clock timer)")


def logged(log: list[str], name: str, fail_on_call: int | None = None):
    """A correct a + b that appends its name to ``log`` on every call, and raises on call ``fail_on_call``."""

    def fn(a, b):
        log.append(name)
        if fail_on_call is not None and log.count(name) == fail_on_call:
            raise RuntimeError(f"{name} failed on call {fail_on_call}")
        return a + b

    fn.__name__ = name
    return fn


def race(variants, rounds=3, **kw):
    return Race(chapter="test_rounds", variants=variants, ref="torch",
                make_inputs=lambda n: (torch.randn(n), torch.randn(n)), shapes=[64],
                check_shapes=[(5,)], rounds=rounds, **kw)


def test_turns_rotate_and_each_variant_gets_all_its_calls():
    log: list[str] = []
    calls = {name: logged(log, name) for name in ("a", "b", "c")}
    sets = [(torch.randn(8), torch.randn(8))]
    timings = time_in_rounds(WallTimer(reps=6, warmup=1), calls, sets, 3)
    assert log[:3] == ["a", "b", "c"]  # each prepared (warmed up) first, in the race's order
    # then 3 rounds of 2 calls each, round r starting with the r-th variant
    assert log[3:] == ["a", "a", "b", "b", "c", "c", "b", "b", "c", "c", "a", "a", "c", "c", "a", "a", "b", "b"]
    for name in calls:
        assert len(timings[name].times_ms) == 6
        assert timings[name].method == "wall+rounds3"
        assert torch.equal(timings[name].output, sets[0][0] + sets[0][1])


def test_a_variant_failing_mid_rounds_is_its_error_and_the_others_finish():
    log: list[str] = []
    calls = {"a": logged(log, "a"), "b": logged(log, "b", fail_on_call=4), "c": logged(log, "c")}
    timings = time_in_rounds(WallTimer(reps=6, warmup=1), calls, [(torch.randn(8), torch.randn(8))], 3)
    assert isinstance(timings["b"], RuntimeError)  # call 1 warm-up, 2-3 round 0, 4 fails in round 1
    assert log.count("b") == 4  # no turns after the failure
    assert len(timings["a"].times_ms) == len(timings["c"].times_ms) == 6


def runs_of(log: list[str], name: str) -> list[int]:
    """Lengths of the runs of consecutive calls of ``name`` in ``log``."""
    return [len(list(group)) for entry, group in itertools.groupby(log) if entry == name]


def test_bench_with_rounds_records_the_method_and_every_sample():
    log: list[str] = []
    result = bench(race({"torch": logged(log, "torch"), "torch_b": logged(log, "torch_b"),
                         "torch_bad": logged(log, "torch_bad", fail_on_call=5)}),
                   timer=WallTimer(reps=6, warmup=1), plot=False)
    for name in ("torch", "torch_b"):
        row = result.row(name, 64)
        assert row.status == "ok" and row.samples == 6 and row.timer == "wall+rounds3"
    # Its timed calls, three turns of two; then, after the re-check, its host figures' six calls in one go.
    assert runs_of(log, "torch_b")[-4:] == [2, 2, 2, 6]
    bad = result.row("torch_bad", 64)
    assert bad.status == "error" and "failed on call 5" in bad.error


def test_without_rounds_each_variant_is_timed_in_one_go():
    log: list[str] = []
    result = bench(race({"torch": logged(log, "torch"), "torch_b": logged(log, "torch_b")}, rounds=1),
                   timer=WallTimer(reps=4, warmup=1), plot=False)
    # The warm-up and the four timed calls, back to back; then, after the re-check, the host figures' four calls.
    assert runs_of(log, "torch_b")[-2:] == [5, 4]
    assert result.row("torch_b", 64).timer == "wall"


@pytest.mark.parametrize("bad", [{"rounds": 0}, {"rounds": 2.5}, {"rep_ms": 0}, {"rep_ms": -5.0}, {"shuffle": "yes"},
                                 {"shuffle": True}])
def test_bad_rounds_or_rep_ms_is_refused_where_the_race_is_made(bad):
    with pytest.raises(LabError, match="rounds must be|rep_ms must be|shuffle is a seed"):
        race({"torch": torch.add}, **bad)


def test_round_orders_rotate_or_shuffle_every_round():
    names = ["a", "b", "c", "d"]
    rotated = round_orders(names, 4)
    assert rotated == [list("abcd"), list("bcda"), list("cdab"), list("dabc")]
    shuffled = round_orders(names, 8, shuffle=3)
    assert all(sorted(order) == names for order in shuffled)  # every round a permutation
    assert shuffled == round_orders(names, 8, shuffle=3)  # the seed makes it reproducible
    predecessors = {order[order.index("b") - 1] for order in shuffled if order.index("b") > 0}
    assert len(predecessors) > 1  # b does not always follow the same variant, as under rotation


def test_a_shuffled_race_says_so_in_its_timer_column():
    log: list[str] = []
    result = bench(race({"torch": logged(log, "torch"), "torch_b": logged(log, "torch_b")}, shuffle=7),
                   timer=WallTimer(reps=6, warmup=1), plot=False)
    assert result.row("torch_b", 64).timer == "wall+shuffled3" and result.row("torch_b", 64).samples == 6
