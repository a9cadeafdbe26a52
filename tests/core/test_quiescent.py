"""`mesh_quiescent`: the one rule local runs and launched runs use to tell a finite run is over."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from tuplemesh.core.summary import mesh_quiescent


def worker(finished: bool, consumed: int, delivered: int) -> Any:
    return SimpleNamespace(spouts_finished=finished, consumed=consumed, delivered=delivered)


def test_a_mesh_with_a_spout_still_running_is_not_quiescent_and_is_not_read_again() -> None:
    reads: list[int] = []

    def again() -> list[Any]:
        reads.append(1)
        return []

    assert not mesh_quiescent([worker(True, 5, 5), worker(False, 0, 0)], again)
    assert reads == []


def test_consumed_from_the_first_read_must_equal_delivered_from_the_second() -> None:
    first = [worker(True, 6, 7), worker(True, 4, 3)]  # 10 consumed, whatever was delivered then
    assert mesh_quiescent(first, lambda: [worker(True, 6, 7), worker(True, 4, 3)])
    # a tuple delivered after the first read (in flight then): not over yet
    assert not mesh_quiescent(first, lambda: [worker(True, 6, 8), worker(True, 4, 3)])
    # the first read's delivered counts are not what is compared: 12 there, 10 in the second
    assert mesh_quiescent([worker(True, 6, 8), worker(True, 4, 4)], lambda: first)
