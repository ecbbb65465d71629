"""``%bench --shapes``: every token is a shape or a one-line LabError naming it, through the real IPython shell."""

from __future__ import annotations

import pytest
import torch

import labmagic
from labmagic.benchmark import Race

pytestmark = pytest.mark.skipif(labmagic.has_gpu(), reason="CPU-mode behaviour (a prediction, nothing timed)")


@pytest.fixture
def race_shell(shell, monkeypatch):
    monkeypatch.setitem(shell.ns, "shapes_race", Race(
        chapter="test_race", variants={"torch": torch.add}, ref="torch",
        make_inputs=lambda *s: (torch.randn(*s), torch.randn(*s)), shapes=[16], check_shapes=[(3,)]))
    return shell


def test_shapes_accepts_sizes_products_tuples_and_notebook_variables(race_shell, monkeypatch):
    monkeypatch.setitem(race_shell.ns, "side", 32)
    result = race_shell.run("%bench shapes_race --no-plot --shapes 2**6 8x4 '(2, 3)' \"[5]\" side")
    assert result.shapes == ["5", "2x3", "8x4", "32", "64"]


@pytest.mark.parametrize("token, said", [
    ("abc", "cannot evaluate 'abc' (NameError"),
    ("2**", "cannot evaluate '2**' (SyntaxError"),
    ("as_text", "'as_text' is '4096', neither a size nor a shape"),  # not (4, 0, 9, 6)
    ("2.5", "'2.5' is 2.5, neither a size nor a shape"),
    ("-4", "'-4' is -4, neither a size nor a shape"),
    ("'(2,0)'", "neither a size nor a shape"),
])
def test_a_token_that_is_not_a_shape_is_one_line_naming_it_and_the_accepted_forms(race_shell, monkeypatch, token,
                                                                                   said):
    monkeypatch.setitem(race_shell.ns, "as_text", "4096")
    with pytest.raises(labmagic.LabError, match="expected a size") as caught:
        race_shell.run(f"%bench shapes_race --no-plot --shapes 16 {token}")
    assert str(caught.value).startswith("--shapes: ") and said in str(caught.value)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("line, env, asked", [
    ("--sanitize", "", True),
    ("", "1", True),  # labmagic sweep --sanitize sets it for the chapters it runs
    ("", "", False),
    ("", "0", False),
])
def test_sanitize_reaches_bench_from_the_flag_or_the_sweep(race_shell, monkeypatch, line, env, asked):
    from labmagic.magics.bench_magic import SANITIZE_ENV

    monkeypatch.setenv(SANITIZE_ENV, env)
    result = race_shell.run(f"%bench shapes_race --no-plot {line}")
    assert ("sanitize needs a GPU: nothing ran under memcheck" in result.notes) is asked


@pytest.mark.parametrize("line, nsight_note", [("--timer graph", False), ("--timer events", False),
                                               ("--timer nsight", True)])
def test_timer_reaches_bench_and_nsight_is_the_cross_check(race_shell, line, nsight_note):
    from labmagic.benchmark.ncu_check import NO_GPU_NOTE

    result = race_shell.run(f"%bench shapes_race --no-plot {line}")
    assert not result.measured  # no GPU: a prediction whatever the timer
    assert (NO_GPU_NOTE in result.notes) is nsight_note


@pytest.mark.parametrize("line, env, timer", [
    ("", "graph", "graph"),  # labmagic sweep --timer graph sets it for the chapters it runs
    ("--timer events", "graph", "events"),  # the cell's own --timer wins
    ("", "events", None),  # the race's timer=, else events
    ("", "nsight", None),  # the cross-check, over the race's timer
    ("", "", None),
])
def test_the_sweeps_graph_timer_reaches_every_bench_without_a_timer_of_its_own(race_shell, monkeypatch, line, env,
                                                                              timer):
    import labmagic.benchmark
    from labmagic.magics.bench_magic import TIMER_ENV

    real, asked = labmagic.benchmark.bench, []

    def bench(race, **kwargs):  # the real bench, its timer noted
        asked.append(kwargs["timer"])
        return real(race, **kwargs)

    monkeypatch.setattr(labmagic.benchmark, "bench", bench)
    monkeypatch.setenv(TIMER_ENV, env)
    race_shell.run(f"%bench shapes_race --no-plot {line}")
    assert asked == [timer]


def test_an_unknown_timer_is_refused_by_the_line_parser(race_shell):
    from IPython.core.error import UsageError

    with pytest.raises(UsageError, match="invalid choice: 'cupti'"):
        race_shell.run("%bench shapes_race --timer cupti")
