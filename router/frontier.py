"""How far a router has folded one log table, per writer (pure: no I/O).

A writer numbers its rows of a table 1, 2, 3, ... (``wseq``) in the transaction that
bumps its counter (``profiles.store.writers``). Per writer the frontier keeps ``hw``:
every row numbered up to it is folded (or was deleted), plus the numbers folded above it
(this router's own writes, folded as they return, before a look settles the range). A
look that read a writer's counter ``n`` and folded the rows of ``(hw, n]`` it fetched
settles ``hw = n``. What it keeps grows with writers, not with rows.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from trustroute.profiles.store.executions import Origin


class Frontier:
    """Per writer: every row numbered up to ``hw`` folded, and those folded above it."""

    def __init__(self, hw: Mapping[str, int] | None = None,
                 above: Mapping[str, Iterable[int]] | None = None) -> None:
        self.hw: dict[str, int] = dict(hw or {})
        self.above: dict[str, set[int]] = {w: set(s) for w, s in (above or {}).items() if s}

    def has(self, origin: Origin | None) -> bool:
        """True when the row numbered ``origin`` is folded (rows without one predate the
        writers' counters: the scan that opened the router folded them)."""
        if origin is None:
            return True
        writer, wseq = origin
        return wseq <= self.hw.get(writer, 0) or wseq in self.above.get(writer, ())

    def add(self, origin: Origin | None) -> bool:
        """Count the row numbered ``origin`` as folded; False when it was already."""
        if self.has(origin):
            return False
        assert origin is not None
        writer, wseq = origin
        mark = self.hw.get(writer, 0)
        if wseq == mark + 1:  # the common case: the next one
            self.hw[writer] = mark = wseq
            more = self.above.get(writer)
            while more and mark + 1 in more:
                mark += 1
                more.discard(mark)
            self.hw[writer] = mark
            if more is not None and not more:
                del self.above[writer]
        else:
            self.above.setdefault(writer, set()).add(wseq)
        return True

    def settle(self, writer: str, upto: int) -> None:
        """Every row of ``writer`` numbered up to ``upto`` is folded or gone."""
        mark = max(self.hw.get(writer, 0), upto)
        more = {n for n in self.above.pop(writer, ()) if n > mark}
        while mark + 1 in more:
            mark += 1
            more.discard(mark)
        self.hw[writer] = mark
        if more:
            self.above[writer] = more

    def behind(self, counters: Mapping[str, int]) -> list[tuple[str, int, int]]:
        """``(writer, hw, n)`` for each writer whose counter is ahead of what is folded."""
        return [(w, self.hw.get(w, 0), n) for w, n in counters.items()
                if n > self.hw.get(w, 0)]

    def unfolded(self, counters: Mapping[str, int]) -> int | None:
        """How many rows the writers' ``counters`` number that are not folded here, had
        none been deleted; None when this frontier claims a row no counter numbered (it
        was not folded from this log)."""
        missing = 0
        for writer in set(counters) | set(self.hw) | set(self.above):
            n, mark = counters.get(writer, 0), self.hw.get(writer, 0)
            above = self.above.get(writer, set())
            if mark > n or any(s > n for s in above):
                return None
            missing += n - mark - len(above)
        return missing

    def export(self) -> dict[str, Any]:
        """JSON-ready form (for the cached projection)."""
        return {"hw": dict(self.hw), "above": {w: sorted(s) for w, s in self.above.items()}}

    @classmethod
    def load(cls, data: Mapping[str, Any]) -> Frontier:
        """From ``export``'s form."""
        return cls({str(w): int(n) for w, n in data["hw"].items()},
                   {str(w): [int(n) for n in s] for w, s in data["above"].items()})
