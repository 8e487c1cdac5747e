"""The recorder's loss account (core.record.loss), against streams made here with known holes.

Each test builds the stream a publisher sent, removes a known set of messages (the truth), shuffles
or duplicates what arrives, and checks the count against the set difference.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from robot_grinding_sim.core.record.loss import HOLES_MAX, SequenceGaps, StampGaps, TopicLoss, loss_line


def test_sequence_gaps_count_what_never_arrived_whatever_the_order() -> None:
    rng = np.random.default_rng(3)
    sent = np.arange(1, 5001)
    dropped = set(rng.choice(sent[1:-1], 137, replace=False).tolist())
    arrived = [s for s in sent if s not in dropped]
    # a few arrive late (out of order), some twice (a second subscription's copy)
    arrived = arrived[:1000] + arrived[1200:2000] + arrived[1000:1200] + arrived[2000:]
    dups = rng.choice(arrived, 50, replace=False).tolist()
    g = SequenceGaps()
    taken = [g.add(int(s)) for s in arrived] + [g.add(int(s)) for s in dups]
    assert g.lost == len(dropped)
    assert sum(taken) == len(arrived) and g.duplicates == len(dups) and g.received == len(arrived)


def test_a_message_older_than_the_first_opens_the_hole_before_it() -> None:
    g = SequenceGaps()
    for s in (10, 11, 12, 5, 7):  # a latched sample from before, through a second subscription
        assert g.add(s)
    assert g.lost == 3  # 6, 8, 9
    assert not g.add(11)


def test_a_gap_beyond_the_remembered_holes_is_counted_at_once() -> None:
    g = SequenceGaps()
    g.add(1)
    g.add(HOLES_MAX + 10)
    g.add(HOLES_MAX + 11)
    assert g.lost == HOLES_MAX + 8


def stream(rate: float, seconds: float, jitter: float, rng: np.random.Generator) -> np.ndarray:
    """Stamps (ns) of a stream at ``rate`` Hz with uniform jitter of ``jitter`` periods."""
    n = int(rate * seconds)
    t = (np.arange(n) + rng.uniform(-jitter / 2, jitter / 2, n)) / rate
    return np.sort((t * 1e9).astype(np.int64))


@pytest.mark.parametrize("jitter", [0.0, 0.4])
def test_stamp_gaps_count_the_messages_missing_from_a_regular_stream(jitter: float) -> None:
    rng = np.random.default_rng(7)
    t = stream(1000.0, 20.0, jitter, rng)
    # holes of 1, 2, 5 and 40 messages at known places
    holes = [(1000, 1), (5000, 2), (9000, 5), (15000, 40)]
    keep = np.ones(len(t), bool)
    for at, n in holes:
        keep[at:at + n] = False
    g = StampGaps()
    for s in t[keep]:
        g.add(int(s))
    g.finish()
    assert g.missing == sum(n for _, n in holes)
    assert g.rate_hz == pytest.approx(1000.0, rel=0.01)


def test_stamp_gaps_count_nothing_on_a_complete_bursty_stream() -> None:
    """A publisher that catches up in bursts (stamps microseconds apart, then a pause): complete,
    so nothing is missing, whatever the spacing looks like locally."""
    rng = np.random.default_rng(11)
    t = []
    k = 0
    while k < 20000:
        burst = int(rng.integers(1, 4))
        t += [k * 1_000_000 + j * 1000 for j in range(burst)]  # 1 us apart
        k += burst
    g = StampGaps()
    for s in t:
        g.add(s)
    g.finish()
    assert g.missing == 0


def test_stamp_gaps_ignore_a_topic_published_on_events() -> None:
    rng = np.random.default_rng(5)
    t = np.cumsum(rng.exponential(0.1e9, 3000)).astype(np.int64)  # Poisson events, 10 Hz
    g = StampGaps()
    for s in t:
        g.add(int(s))
    g.finish()
    assert g.missing == 0 and g.rate_hz is None


def test_topic_loss_keeps_publishers_apart_and_drops_second_copies() -> None:
    loss = TopicLoss("/w")
    a, b = b"A" * 16, b"B" * 16
    sent = [(a, s) for s in range(1, 1001)] + [(b, s) for s in range(1, 501)]
    lost = {(a, 17), (a, 500), (b, 3), (b, 4)}
    arriving = [m for m in sent if m not in lost]
    rng = np.random.default_rng(2)
    order = rng.permutation(len(arriving))
    taken = 0
    for i in order:
        taken += loss.take(*arriving[i])
    for m in arriving[:100]:  # copies through the other subscription
        assert not loss.take(*m)
    assert taken == len(arriving) == loss.received
    assert loss.lost == loss.lost_by_sequence == len(lost) and loss.duplicates == 100
    report = json.loads(json.dumps(loss.report()))
    assert report["lost"] == 4 and report["publishers_seen"] == 2
    assert loss_line({"/w": report}).startswith("lost 4 messages: /w 4 (publisher sequence numbers")


def test_without_sequence_numbers_the_middlewares_events_count() -> None:
    loss = TopicLoss("/w")
    for _ in range(10):
        assert loss.take(None, None)
    loss.lost_event(3)
    loss.lost_event(2)
    assert loss.lost_by_sequence is None and loss.lost == 5
    assert loss_line({"/w": loss.report()}) == ("lost 5 messages: /w 5 (DDS sample-lost events; 5 by DDS "
                                                 "sample-lost events)")
    assert loss_line({"/x": TopicLoss("/x").report()}) == ""
