"""ExportLog on its own: offsets, slices, retention (blocking), commit and trimming, close."""

from __future__ import annotations

import threading

import pytest

from tests.helpers import eventually
from tuplemesh.gateway.export_log import CHUNK_RECORDS, ExportLog, OffsetCommitted, RaggedRecords


def filled(retention: int, count: int) -> ExportLog:
    log = ExportLog(retention)
    for i in range(count):
        assert log.append([i])
    return log


def appending(log: ExportLog, values: list[object]) -> tuple[threading.Thread, list[bool]]:
    """Append on another thread (it may block); the result lands in the returned list."""
    result: list[bool] = []
    thread = threading.Thread(target=lambda: result.append(log.append(values)), daemon=True)
    thread.start()
    return thread, result


def test_offsets_count_from_zero_and_end_follows_appends():
    log = ExportLog(10)
    assert (log.start, log.end, len(log)) == (0, 0, 0)
    for i in range(3):
        log.append([f"r{i}"])
    assert (log.start, log.end, len(log)) == (0, 3, 3)


def test_fetch_slices_from_an_offset_and_reports_the_end():
    log = filled(10, 6)
    assert log.fetch(0, 100) == ([[0], [1], [2], [3], [4], [5]], 6)
    assert log.fetch(2, 3) == ([[2], [3], [4]], 6)
    assert log.fetch(6, 10) == ([], 6)  # at the end: nothing yet
    assert log.fetch(9, 10) == ([], 6)  # past the end: nothing, not an error


def test_commit_forgets_below_the_offset_and_offsets_stay_absolute():
    log = filled(10, 6)
    assert log.commit(4) == 4
    assert (log.start, log.end, len(log)) == (4, 6, 2)
    assert log.fetch(4, 10) == ([[4], [5]], 6)
    with pytest.raises(ValueError, match="offset 3 is below the retained start 4"):
        log.fetch(3, 10)
    log.append([6])
    assert log.fetch(5, 10) == ([[5], [6]], 7)


def test_commit_is_clamped_and_never_moves_backwards():
    log = filled(10, 5)
    assert log.commit(99) == 5  # beyond the end: everything, no further
    assert (log.start, log.end) == (5, 5)
    assert log.commit(2) == 5  # an older commit changes nothing
    log.append(["next"])
    assert log.fetch(5, 10) == ([["next"]], 6)


def test_many_commits_trim_the_storage_and_keep_every_offset_right():
    log = ExportLog(8)
    for i in range(1_000):
        log.append([i])
        if i % 3 == 2:
            assert log.commit(i - 1) == i - 1
    assert (log.start, log.end) == (997, 1_000)
    assert log.fetch(997, 10) == ([[997], [998], [999]], 1_000)
    assert log.stored <= log.retention + CHUNK_RECORDS  # freed as it goes, not grown to 1000


def test_a_full_log_blocks_the_appender_until_a_commit_frees_room():
    log = filled(3, 3)
    thread, result = appending(log, ["waits"])
    thread.join(0.2)
    assert thread.is_alive() and len(log) == 3  # held back: nothing dropped, nothing over retention
    log.commit(1)
    eventually(lambda: not thread.is_alive())
    assert result == [True]
    assert log.fetch(1, 10) == ([[1], [2], ["waits"]], 4)


def test_a_commit_that_frees_nothing_keeps_the_appender_waiting():
    log = filled(2, 2)
    thread, _ = appending(log, ["waits"])
    log.commit(0)
    thread.join(0.2)
    assert thread.is_alive() and log.end == 2
    log.commit(2)
    eventually(lambda: not thread.is_alive())
    assert log.end == 3


def test_close_releases_a_blocked_appender_without_appending():
    log = filled(2, 2)
    thread, result = appending(log, ["late"])
    thread.join(0.2)
    assert thread.is_alive()
    log.close()
    eventually(lambda: not thread.is_alive())
    assert result == [False] and log.end == 2


def test_a_closed_log_still_takes_records_while_it_has_room():
    log = filled(3, 1)
    log.close()
    assert log.append([1]) and log.append([2])
    assert not log.append([3])
    assert log.fetch(0, 10) == ([[0], [1], [2]], 3)


def test_every_log_has_its_own_epoch_that_fits_json_exactly():
    epochs = {ExportLog(10).epoch for _ in range(100)}
    assert len(epochs) == 100  # random: a restarted log never reuses its predecessor's
    assert all(0 < e < 2**53 for e in epochs)  # 0 means "any epoch" on the wire
    assert ExportLog(10, epoch=42).epoch == 42


def test_extend_appends_a_batch_in_order_waiting_for_room_as_it_goes():
    log = filled(4, 2)
    done: list[int] = []
    thread = threading.Thread(target=lambda: done.append(log.extend([[2], [3], [4], [5], [6]])), daemon=True)
    thread.start()
    eventually(lambda: log.end == 4)  # the room there was: two of the five
    assert thread.is_alive()
    log.commit(3)  # three more fit now
    eventually(lambda: not thread.is_alive())
    assert done == [5] and log.fetch(3, 10) == ([[3], [4], [5], [6]], 7)


def test_extend_on_a_full_closed_log_appends_what_fits_and_says_how_many():
    log = filled(4, 1)
    log.close()
    assert log.extend([("a",), ("b",), ("c",), ("d",)]) == 3
    assert log.fetch(0, 10) == ([[0], ("a",), ("b",), ("c",)], 4)
    assert log.extend([]) == 0


def test_a_columnar_batch_is_kept_as_columns_and_read_back_as_rows_or_columns():
    log = ExportLog(100)
    assert log.extend_columns([["a", "b", "c"], [1, 2, 3]], 3) == 3
    log.append(["d", 4])  # a row after the columns: a chunk of its own
    assert log.extend_columns([["e"], [5]], 1) == 1
    assert log.fetch(1, 10) == ([("b", 2), ("c", 3), ["d", 4], ("e", 5)], 5)
    assert log.fetch_columns(1, 3) == ([["b", "c", "d"], [2, 3, 4]], 3, 5)
    assert log.fetch_columns(0, 100) == ([["a", "b", "c", "d", "e"], [1, 2, 3, 4, 5]], 5, 5)
    assert log.fetch_columns(5, 10) == ([], 0, 5)
    log.commit(2)
    assert log.fetch_columns(2, 10) == ([["c", "d", "e"], [3, 4, 5]], 3, 5)
    with pytest.raises(OffsetCommitted, match="offset 1 is below the retained start 2"):
        log.fetch_columns(1, 10)
    with pytest.raises(ValueError, match="a column of 1 values for 2 records"):
        log.extend_columns([["f", "g"], [6]], 2)
    assert log.end == 5  # nothing of it taken


def test_records_without_values_and_records_of_unequal_lengths_as_columns():
    log = ExportLog(10)
    assert log.extend_columns([], 2) == 2  # a stream of no fields: two records of no values
    assert log.fetch(0, 10) == ([(), ()], 2) and log.fetch_columns(0, 10) == ([], 2, 2)
    ragged = ExportLog(10)
    ragged.extend([["a"], ["b", 2]])
    with pytest.raises(RaggedRecords, match="unequal lengths"):
        ragged.fetch_columns(0, 10)
    mixed = ExportLog(10)
    mixed.extend_columns([["a"]], 1)
    mixed.extend_columns([["b"], [2]], 1)  # of another width: a chunk of its own
    assert mixed.fetch(0, 10) == ([("a",), ("b", 2)], 2)
    with pytest.raises(RaggedRecords, match="records of 1 and 2 values"):
        mixed.fetch_columns(0, 10)


def test_columnar_batches_join_into_chunks_that_commits_free_whole():
    log = ExportLog(10 * CHUNK_RECORDS)
    batch = list(range(1000))
    for _ in range(40):  # 40,000 records in about ten chunks
        assert log.extend_columns([batch], len(batch)) == len(batch)
    assert log.end == 40_000 and log.stored == 40_000
    log.commit(39_500)
    assert log.start == 39_500 and log.stored <= 500 + CHUNK_RECORDS  # whole chunks went
    columns, count, end = log.fetch_columns(39_500, 1_000)
    assert (columns, count, end) == ([batch[500:]], 500, 40_000)


def test_extend_columns_waits_for_room_and_a_full_closed_log_takes_what_fits():
    log = filled(4, 2)
    done: list[int] = []
    thread = threading.Thread(
        target=lambda: done.append(log.extend_columns([[2, 3, 4, 5, 6]], 5)), daemon=True
    )
    thread.start()
    eventually(lambda: log.end == 4)
    assert thread.is_alive()
    log.commit(3)
    eventually(lambda: not thread.is_alive())
    assert done == [5] and log.fetch(3, 10) == ([(3,), (4,), (5,), (6,)], 7)
    closed = filled(4, 1)
    closed.close()
    assert closed.extend_columns([["a", "b", "c", "d"]], 4) == 3
    assert closed.fetch_columns(0, 10) == ([[0, "a", "b", "c"]], 4, 4)
