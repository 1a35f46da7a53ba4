"""The acker's XOR ledger (Storm's acker.clj, Acker.java): pure logic, no threads or I/O.

Every spout tuple tree has a 64-bit root id. The ledger keeps, per root, the XOR of every
edge id created and acked so far; it is zero exactly when every edge was acked (up to a
2^-64 chance). Messages:
  init [root, xor_of_out_edges, spout_task]  from the spout when it emits
  ack  [root, edge ^ ack_val]                from a bolt acking an input tuple
  fail [root]                                from a bolt failing an input tuple
An outcome is ("ack" | "fail", spout_task, root) for the spout task that owns the root.
"""

from __future__ import annotations

from executor.rotating_map import RotatingMap

ACK = "ack"
FAIL = "fail"


class AckerLedger:
    __slots__ = ("_pending",)

    def __init__(self, num_buckets: int = 2):
        # entries: [xor_value, spout_task or None, failed]
        self._pending = RotatingMap(num_buckets)

    def init(self, root: int, value: int, spout_task: int):
        entry = self._pending.get(root)
        if entry is None:
            entry = [value, spout_task, False]
            self._pending.put(root, entry)
        else:  # acks can overtake the init on another path
            entry[0] ^= value
            entry[1] = spout_task
        return self._check(root, entry)

    def ack(self, root: int, value: int):
        entry = self._pending.get(root)
        if entry is None:
            entry = [value, None, False]
            self._pending.put(root, entry)
        else:
            entry[0] ^= value
        return self._check(root, entry)

    def fail(self, root: int):
        entry = self._pending.get(root)
        if entry is None:
            entry = [0, None, True]
            self._pending.put(root, entry)
        else:
            entry[2] = True
        return self._check(root, entry)

    def _check(self, root: int, entry: list):
        spout_task = entry[1]
        if spout_task is None:
            return None
        if entry[2]:
            self._pending.remove(root)
            return (FAIL, spout_task, root)
        if entry[0] == 0:
            self._pending.remove(root)
            return (ACK, spout_task, root)
        return None

    def value(self, root: int):
        entry = self._pending.get(root)
        return None if entry is None else entry[0]

    def rotate(self) -> list[int]:
        """Expire the oldest roots silently (their spouts time them out on their own)."""
        return list(self._pending.rotate())

    def __len__(self) -> int:
        return self._pending.size()
