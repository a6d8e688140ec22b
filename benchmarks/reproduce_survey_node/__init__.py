"""Reproduce the survey's two node-level systems: FED-PUB's Table 1 (disjoint METIS
clients) and FedEgo's Tables 2-3 (label skew), with their baselines, protected runs and
the two leakage attacks. ``python -m benchmarks.reproduce_survey_node --help``."""
