"""`SpoutSwitch`: when a spout executor's loop may call next_tuple, and waiting for a drain to be
seen. The loop's side is driven by hand here; tests/worker/test_executor.py and
tests/worker/test_queue_time.py drive it from real spout executors."""

from __future__ import annotations

import threading

from tuplemesh.worker.spout_switch import SpoutSwitch


def test_a_new_switch_lets_the_spouts_emit_and_a_hold_is_not_a_deactivation():
    switch = SpoutSwitch()
    assert switch.active and not switch.held
    switch.hold()
    assert switch.held and switch.active  # held spouts stay active: a drain still finds them
    switch.release()
    assert not switch.held


def test_a_loop_that_is_not_running_is_quiet_at_once():
    switch = SpoutSwitch()
    switch.deactivate()
    assert switch.wait_deactivated(0.0) and switch.quiet  # nothing runs next_tuple
    switch.looping(True)
    switch.looping(False)
    assert switch.wait_deactivated(0.0)  # ended: nothing runs it any more either


def test_a_running_loop_is_quiet_only_once_it_has_seen_the_deactivation():
    switch = SpoutSwitch()
    switch.looping(True)
    assert not switch.quiet  # active and running: a next_tuple call may be under way
    switch.deactivate()
    assert not switch.active and not switch.wait_deactivated(0.05)  # the loop has not looked yet
    waiter_saw: list[bool] = []
    waiter = threading.Thread(target=lambda: waiter_saw.append(switch.wait_deactivated(30.0)))
    waiter.start()
    switch.seen_inactive()  # the loop's next turn
    waiter.join(30)
    assert waiter_saw == [True] and switch.quiet
    switch.seen_inactive()  # every later turn: idempotent
    assert switch.quiet
