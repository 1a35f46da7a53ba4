"""tests/devcluster/test_swap.py: the word count with split rule 2, 2 count tasks named 'count'."""
from swap_parts import CONFIG, build

topology = build(rule=2, count_tasks=2, count_name="count")
config = dict(CONFIG)
