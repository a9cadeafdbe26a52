"""`Buckets`: plain and weighted observations, and the cumulative form Prometheus reads."""

from __future__ import annotations

from tuplemesh.buckets import Buckets, make_buckets


def test_an_observation_lands_in_the_first_bucket_at_or_above_it():
    buckets = Buckets((1.0, 2.0))
    for value in (0.5, 1.0, 1.5, 3.0):
        buckets.observe(value)
    assert buckets.counts == [2, 1, 1]
    assert buckets.count == 4
    assert buckets.total == 6.0
    assert buckets.cumulative() == [("1.0", 2.0), ("2.0", 3.0), ("+Inf", 4.0)]


def test_a_weighted_observation_counts_weight_observations_of_its_value():
    buckets = Buckets((1.0, 2.0))
    buckets.observe(1.5, 4)  # a batch of 4 tuples whose mean was 1.5
    buckets.observe(0.5)
    assert buckets.counts == [1, 4, 0]
    assert buckets.count == 5
    assert buckets.total == 6.5
    assert buckets.cumulative()[-1] == ("+Inf", 5.0)


def test_disabled_buckets_ignore_observations():
    buckets = make_buckets((1.0,), enabled=False)
    buckets.observe(0.5, 10)
    assert buckets.count == 0
    assert buckets.counts == [0, 0]
