"""GRINDING_SLOW_CALLBACK_MS: node_base.guarded logs a callback that runs longer than the threshold
(the clock is the module's perf_counter, stepped by the test), and refuses a bad value by name."""

from __future__ import annotations

from typing import Any

import pytest

from robot_grinding_sim.core.errors import InputError
from robot_grinding_sim.ros import node_base

pytestmark = pytest.mark.ros


class FakeLogger:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def warning(self, msg: str) -> None:
        self.lines.append(msg)

    error = warning


class FakeNode:
    def __init__(self) -> None:
        self.logger = FakeLogger()

    def get_logger(self) -> FakeLogger:
        return self.logger


def test_a_callback_over_the_threshold_is_logged(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [100.0]
    monkeypatch.setattr(node_base.time, "perf_counter", lambda: now[0])
    monkeypatch.setenv(node_base.SLOW_CALLBACK_ENV, "15")
    node = FakeNode()

    def callback(took: float) -> str:
        now[0] += took
        return "done"

    wrapped: Any = node_base.guarded(node, "contact/model")(callback)
    assert wrapped(0.010) == "done" and node.logger.lines == []
    assert wrapped(0.0421) == "done"
    assert node.logger.lines == ["slow callback: contact/model took 42.1 ms"]


def test_unset_means_no_timing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(node_base.SLOW_CALLBACK_ENV, raising=False)
    assert node_base.slow_callback_threshold() is None
    node = FakeNode()
    assert node_base.guarded(node, "x")(lambda: 1)() == 1 and node.logger.lines == []


@pytest.mark.parametrize("value", ["fast", "-1"])
def test_a_bad_value_names_the_variable(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv(node_base.SLOW_CALLBACK_ENV, value)
    with pytest.raises(InputError, match=node_base.SLOW_CALLBACK_ENV):
        node_base.slow_callback_threshold()
