"""tests/devcluster/test_swap.py: the word count with split rule 1, 2 count tasks named 'counter'."""
from swap_parts import CONFIG, build

topology = build(rule=1, count_tasks=2, count_name="counter")
config = dict(CONFIG)
