"""The teaching tools around the memory: the summary audit, the retention probe, transcripts and prices.

None of them is needed to chat; each shows a student something about what the
memory did. ``python -m memora.teaching.probe`` runs the probe in a terminal.
"""
