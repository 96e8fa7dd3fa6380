"""The teaching tools around the memory: the summary audit, the retention probe, prices and the
what-if replay.

None of them is needed to chat; each shows a student something about what the
memory did. ``python -m memora.app.probe`` runs the probe in a terminal.
"""
