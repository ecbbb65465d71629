"""How many calls the graph timer captures per replay (CudaTimer.graph_calls): no GPU needed to decide it."""

from __future__ import annotations

import pytest

from labmagic.timing import CudaTimer


@pytest.mark.parametrize(("est_ms", "sets", "expected"), [
    (0.005, 4, 200),    # a short call: a replay of >= 1 ms
    (0.0005, 4, 1000),  # ... of 1000 calls at most
    (0.005, 256, 256),  # ... that visits every input set
    (0.019, 256, 256),  # the longest call graphed by default keeps the rule
    (2.0, 64, 5),       # the graph timer on a long call: no more than rep_ms / min_reps of calls per replay
    (24.0, 1, 1),       # never fewer than one
])
def test_calls_per_captured_replay(est_ms, sets, expected):
    assert CudaTimer(rep_ms=100.0, min_reps=10).graph_calls(est_ms, sets) == expected



def _capture_error():
    """What torch.cuda.graph raises when the variant breaks the capture: its own error, raised while handling the
    variant's."""
    try:
        try:
            raise RuntimeError("CUDA error: operation not permitted when stream is capturing\nCompile with ...")
        except RuntimeError:
            raise RuntimeError("CUDA error: operation failed due to a previous error during capture")  # noqa: B904
    except RuntimeError as exc:
        return exc


def test_a_failed_capture_is_named_by_what_the_variant_did_not_by_the_capture():
    from labmagic.timing import first_cause

    assert first_cause(_capture_error()) == \
        "RuntimeError: CUDA error: operation not permitted when stream is capturing"
    assert first_cause(ValueError("")) == "ValueError: "
