"""A worker process's interpreter settings: the GIL's switch interval and the collector."""

from __future__ import annotations

import gc
import sys
from collections.abc import Iterator

import pytest

from tuplemesh.config import Config, ConfigError
from tuplemesh.worker.interpreter import tune_interpreter


@pytest.fixture
def restored() -> Iterator[None]:
    interval, threshold = sys.getswitchinterval(), gc.get_threshold()
    yield
    sys.setswitchinterval(interval)
    gc.set_threshold(*threshold)


def test_the_switch_interval_is_set_in_milliseconds_and_0_leaves_it(restored: None) -> None:
    sys.setswitchinterval(0.005)
    tune_interpreter(Config({"worker.gc.threshold": 0, "worker.gil.switch.interval.ms": 0}))
    assert sys.getswitchinterval() == pytest.approx(0.005)
    tune_interpreter(Config({"worker.gc.threshold": 0, "worker.gil.switch.interval.ms": 0.5}))
    assert sys.getswitchinterval() == pytest.approx(0.0005)


def test_a_worker_holds_the_gil_2_ms_at_most_by_default(restored: None) -> None:
    sys.setswitchinterval(0.005)
    tune_interpreter(Config({"worker.gc.threshold": 0}))
    assert sys.getswitchinterval() == pytest.approx(0.002)


def test_the_collector_threshold_is_raised(restored: None) -> None:
    gc.set_threshold(700, 10, 10)
    tune_interpreter(Config({"worker.gc.threshold": 40_000}))
    assert gc.get_threshold() == (40_000, 20, 20)


def test_a_negative_switch_interval_is_refused_by_name() -> None:
    with pytest.raises(ConfigError, match=r"worker\.gil\.switch\.interval\.ms"):
        Config({"worker.gil.switch.interval.ms": -1})
