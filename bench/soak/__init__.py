"""The soak of everything at once (`bench/soak_everything.py`): deployments, traffic, operators, invariants."""
