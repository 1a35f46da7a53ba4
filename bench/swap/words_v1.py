"""bench/swap.py: split rule 1."""
from swap_parts import CONFIG, build

topology = build(rule=1)
config = dict(CONFIG)
