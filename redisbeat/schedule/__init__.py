"""The schedule domain: entries, schedule kinds and time arithmetic. Pure: no I/O, no Redis.

Every other package builds on this one; it imports none of them.
"""
