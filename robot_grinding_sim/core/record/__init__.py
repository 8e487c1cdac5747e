"""Recorded runs: rosbag2 reading and writing (MCAP, sqlite3), simulated-vs-measured comparison
(alignment, metrics) and reports.
"""
