"""tests/devcluster/test_swap.py: the word count with 2 spout tasks (its positions cannot be split)."""
from swap_parts import CONFIG, build

topology = build(rule=1, spout_tasks=2)
config = dict(CONFIG)
