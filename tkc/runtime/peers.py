"""A symmetric buffer as a launch argument of a pgl parameter (docs/multi-gpu.md).

`Peers(tensor, ptrs, rank)`: this rank's tensor of a symmetric allocation,
every rank's data pointer of it (rank order; PyTorch's symmetric memory
handle's `buffer_ptrs`, tkc/torchops/symm.py) and this rank. The launch
passes the tensor as the gl, then the peers' pointers (MAX_PEERS slots, the
unused ones repeating the local pointer), the rank and the world size; the
tensor maps of a TMA op on a peer are encoded over that peer's pointer with
the local tensor's shape (every rank's buffer has it). No torch import.
"""
from __future__ import annotations

MAX_PEERS = 8   # tkc.dialect.kernel.MAX_PEERS: the slots the lowering reserves


class Peers:
    __slots__ = ("tensor", "ptrs", "rank")

    def __init__(self, tensor, ptrs, rank: int):
        ptrs = tuple(int(p) for p in ptrs)
        if not 1 <= len(ptrs) <= MAX_PEERS:
            raise ValueError(f"a pgl spans 1 to {MAX_PEERS} ranks (its kernel parameters), "
                             f"got {len(ptrs)} pointers")
        if not 0 <= rank < len(ptrs):
            raise ValueError(f"rank {rank} is outside the {len(ptrs)} ranks")
        self.tensor, self.ptrs, self.rank = tensor, ptrs, int(rank)

    @property
    def world(self) -> int:
        return len(self.ptrs)

    def slots(self) -> tuple:
        """The MAX_PEERS pointer parameters: the ranks', then the local one repeated."""
        return self.ptrs + (self.ptrs[self.rank],) * (MAX_PEERS - len(self.ptrs))

    def __repr__(self):
        return f"Peers(rank {self.rank} of {self.world})"
