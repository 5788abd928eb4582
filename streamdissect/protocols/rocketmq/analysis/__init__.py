"""RocketMQ's analyses: one collector per figure (calls and latency, errors, sends, pulls,
consumer offsets, clients, broker registrations) and the set the analysis driver feeds
(collectors.py)."""
