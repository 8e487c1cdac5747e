"""Running a simulated arm in time: when its steps are taken against the wall clock, how it waits for
a contact side that answers over a transport (lockstep), and how its stamps map to its sim time.

ROS-free: the clocks are callables handed in (``time.monotonic`` and ``time.time`` in a node, a
fake clock in the tests), and what a step does and what is published after it are the caller's.
"""
