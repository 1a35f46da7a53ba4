"""bench/swap.py: split rule 2."""
from swap_parts import CONFIG, build

topology = build(rule=2)
config = dict(CONFIG)
