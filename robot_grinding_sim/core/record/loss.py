"""What a recording lost, and how it is known; ROS-free (the recorder node feeds it).

Three witnesses, per topic:

- **publisher sequence numbers** (the middleware's, in each message's info: DDS numbers every
  sample a writer sends, 1, 2, 3, ...): a number never received between two that were is a message
  lost between that publisher and the recorder, wherever it was dropped (the publisher's history
  overwritten before delivery, a transport buffer, the recorder's own queue). The numbers are per
  publisher: with several publishers on a topic the messages must name theirs (rclpy gives the
  publisher's id from Kilted on); without it, only a topic with one publisher is counted this way.
  A message may arrive through two subscriptions (one per publisher QoS, see the recorder): the
  second copy is a duplicate, not counted twice (:meth:`SequenceGaps.add`).
- **the middleware's sample-lost events** (DDS SAMPLE_LOST: the reader learnt that samples it
  should have had are gone): counted as reported.
- **stamps against the topic's rate**, where the messages carry no sequence number: a stream of
  header stamps (or source timestamps) whose spacing is regular (a sensor's, a controller's)
  shows a hole as a span that holds fewer messages than its rate says (:class:`StampGaps`). This is
  an estimate, and it cannot tell a message lost on the way from one never sent.

``lost`` is the sequence-number count where the topic has one, else the sample-lost events';
the stamp estimate is given beside them (``missing_by_stamps``).
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

#: holes remembered one by one (a late copy may still fill them); a larger gap is counted at once
HOLES_MAX = 100_000
#: sample ids remembered to drop second copies where sequence numbers do not (TopicLoss.take)
RECENT = 20_000


class SequenceGaps:
    """The sequence numbers received from one publisher, and the holes between them."""

    def __init__(self) -> None:
        self.first: int | None = None
        self.last: int | None = None  # the highest received
        self.received = 0
        self.duplicates = 0
        self._holes: set[int] = set()
        self._lost_far = 0  # holes of gaps over HOLES_MAX: counted, not remembered

    def add(self, seq: int) -> bool:
        """Take sequence number ``seq``; False when it was received already (a duplicate)."""
        last = self.last
        if last is None:
            self.first = self.last = seq
        elif seq == last + 1:  # the usual case: in order, nothing missing
            self.last = seq
        elif seq > last:
            self._hole(last + 1, seq)
            self.last = seq
        elif seq in self._holes:  # late (another subscription's copy, or out of order)
            self._holes.discard(seq)
        elif self.first is not None and seq < self.first:  # older than the first: what lay between is missing
            self._hole(seq + 1, self.first)
            self.first = seq
        else:
            self.duplicates += 1
            return False
        self.received += 1
        return True

    def _hole(self, a: int, b: int) -> None:
        """Sequence numbers a .. b-1 are missing (so far)."""
        if b - a > HOLES_MAX:
            self._lost_far += b - a
        else:
            self._holes.update(range(a, b))

    @property
    def lost(self) -> int:
        """Sequence numbers between the first and the last received that never arrived."""
        return len(self._holes) + self._lost_far


class StampGaps:
    """Holes in a stream of stamps (ns) against its own rate.

    The stamps are taken in windows of ``window``; a window whose spacing is regular (at least
    ``regular`` of its intervals within 0.5 .. 1.5 x their median) fixes the period as the mean of
    those intervals, and each interval over 1.5 periods lacks round(interval / period) - 1
    messages. A window of irregular spacing (a topic published on events, a publisher catching
    up in bursts) counts nothing. Stamps not
    after the previous one are skipped (out of order, several publishers)."""

    def __init__(self, window: int = 256, regular: float = 0.8) -> None:
        self.window, self.regular = int(window), float(regular)
        self.period_ns: float | None = None
        self.missing = 0  # messages the stamps' spacing says are not there
        self.gaps = 0  # intervals longer than 1.5 periods
        self._stamps: list[int] = []

    def add(self, stamp_ns: int) -> None:
        s = self._stamps
        if s and stamp_ns <= s[-1]:
            return
        s.append(int(stamp_ns))
        if len(s) > self.window:
            self._close()

    def finish(self) -> None:
        """Count the last, partial window (at the period found so far)."""
        if len(self._stamps) > 1:
            self._close(final=True)

    def _close(self, final: bool = False) -> None:
        t = np.asarray(self._stamps, dtype=np.int64)
        dt = np.diff(t).astype(float)
        self._stamps = self._stamps[-1:]  # the next window starts at this one's last stamp
        med = float(np.median(dt))
        normal = (dt > 0.5 * med) & (dt < 1.5 * med)
        if med > 0 and np.mean(normal) >= self.regular:
            # the mean of the regular intervals: their jitter cancels (a sum of consecutive intervals
            # is the span between its ends), where the median keeps it
            self.period_ns = float(np.mean(dt[normal]))
        elif not final or self.period_ns is None:
            return
        p = self.period_ns
        long = dt[dt > 1.5 * p]
        self.gaps += len(long)
        self.missing += int(np.sum(np.round(long / p))) - len(long)

    @property
    def rate_hz(self) -> float | None:
        return None if not self.period_ns else 1e9 / self.period_ns


@dataclass
class TopicLoss:
    """One topic's account (see the module docstring).

    Attributes:
        topic: the topic name.
        received: messages taken (duplicates excluded).
        duplicates: second copies of a message (through another subscription), dropped.
        dds_lost: samples the middleware reported lost (its sample-lost events).
        untracked: why sequence numbers are not counted on this topic ("" when they are).
    """

    topic: str
    received: int = 0
    duplicates: int = 0
    dds_lost: int = 0
    untracked: str = ""
    #: publishers on the graph (the recorder sets it): over 1, messages that do not name their
    #: publisher cannot be counted by sequence numbers
    publishers_on_graph: int = 1
    publishers: dict[Hashable, SequenceGaps] = field(default_factory=dict)
    stamps: dict[Hashable, StampGaps] = field(default_factory=dict)
    _recent: dict[Hashable, None] = field(default_factory=dict)  # sample ids taken lately (untracked only)

    def take(self, publisher: Hashable, seq: int | None, sample: Hashable = None) -> bool:
        """A message from ``publisher`` (its id, or None when unknown) with sequence number ``seq``
        (None when the middleware gives none); False for a duplicate (drop it). ``sample``: an id of
        the sample (e.g. its source time and sequence number) that tells copies apart where the
        sequence numbers cannot (the last RECENT kept)."""
        if seq is not None and publisher is None and self.publishers_on_graph > 1:
            self.stop_tracking(f"{self.publishers_on_graph} publishers, and the messages do not say which one "
                               "sent them (rclpy before Kilted)")
        if seq is not None and not self.untracked:
            gaps = self.publishers.get(publisher)
            if gaps is None:
                gaps = self.publishers[publisher] = SequenceGaps()
            if not gaps.add(seq):
                self.duplicates += 1
                return False
        elif sample is not None and seq is not None:
            recent = self._recent
            if sample in recent:
                self.duplicates += 1
                return False
            recent[sample] = None
            if len(recent) > RECENT:
                del recent[next(iter(recent))]
        self.received += 1
        return True

    def stamp(self, publisher: Hashable, stamp_ns: int) -> None:
        """The stamp of a message taken (only where sequence numbers are not counted)."""
        gaps = self.stamps.get(publisher)
        if gaps is None:
            gaps = self.stamps[publisher] = StampGaps()
        gaps.add(stamp_ns)

    def stop_tracking(self, why: str) -> None:
        """Sequence numbers cannot be trusted from now on (e.g. a second publisher, and the messages
        do not say which one sent them): what was counted so far stays."""
        if not self.untracked:
            self.untracked = why

    def lost_event(self, count_change: int) -> None:
        self.dds_lost += max(0, int(count_change))

    @property
    def lost_by_sequence(self) -> int | None:
        """Messages missing by the publishers' sequence numbers (None: not counted on this topic)."""
        gaps = list(self.publishers.values())  # the executor's thread may add one meanwhile
        return sum(g.lost for g in gaps) if gaps else None

    @property
    def lost(self) -> int:
        """The loss reported: by sequence numbers where counted, else the middleware's events."""
        by_seq = self.lost_by_sequence
        if by_seq is None or self.untracked:
            return max(self.dds_lost, by_seq or 0)
        return by_seq

    def report(self) -> dict[str, Any]:
        """A JSON-able summary (what goes into the bag's metadata)."""
        for g in self.stamps.values():
            g.finish()
        rates = [g.rate_hz for g in self.stamps.values() if g.rate_hz]
        out: dict[str, Any] = {"received": self.received, "lost": self.lost,
                               "lost_by_sequence": self.lost_by_sequence, "dds_sample_lost": self.dds_lost,
                               "duplicates_dropped": self.duplicates, "publishers_seen": len(self.publishers)}
        if self.untracked:
            out["sequence_untracked"] = self.untracked
        if self.stamps:
            out["missing_by_stamps"] = sum(g.missing for g in self.stamps.values())
            out["stamp_gaps"] = sum(g.gaps for g in self.stamps.values())
            out["stamp_rate_hz"] = round(max(rates), 3) if rates else None
        return out


def loss_line(reports: dict[str, dict[str, Any]]) -> str:
    """One line naming the topics that lost messages ("" when none did), e.g.
    ``lost 12 messages: /ft_sensor/wrench 12 (publisher sequence numbers; 12 by DDS sample-lost events)``."""
    parts = []
    for topic, r in sorted(reports.items()):
        if r["lost"] > 0:
            how = "publisher sequence numbers" if r["lost_by_sequence"] is not None and \
                "sequence_untracked" not in r else "DDS sample-lost events"
            parts.append(f"{topic} {r['lost']} ({how}; {r['dds_sample_lost']} by DDS sample-lost events)")
    total = sum(r["lost"] for r in reports.values())
    return f"lost {total} messages: " + ", ".join(parts) if parts else ""
