"""The checks that judge a delivered order: the per-epoch guarantees (guarantees.py) and the
shuffle-quality measures (shuffle_metrics.py), used by audit.py and the tests. Never edited for
an experiment: they state the contract the read path (data/) keeps.
"""
