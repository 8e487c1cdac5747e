"""From a CAD face to a timed joint trajectory: passes on the exact surface, the planner (tool
poses, approach/retreat/link moves, reach and collision checks), the job trajectory builder and
plan.json I/O.
"""
