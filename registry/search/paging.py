"""Pages of trial ids sorted by a metric or hyperparameter (``order_trials``), read in two parts.

``ORDER BY v.num DESC NULLS LAST`` over a LEFT JOIN of the side table makes PostgreSQL read
every match's side row and sort them all before the first page: 40,000 index probes for a
filter that keeps 40% of 100,000 trials. Split on whether the first key has a number, the
trials that have one are an INNER JOIN whose order the ``(key, num, trial)`` index gives, so
the top page walks that index and stops after a few hundred rows (3.9 ms against 90 ms,
bench/run_filter.py "sorted"). The trials without a value come after them in either direction
(NULLS LAST), so a page is a slice of the first part followed, past its end, by a slice of
the second, and the rows and their order are exactly those of the one sorted query.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, overload

from django.db.models import F, OrderBy, QuerySet

from registry.search.order import FIRST_SIDE_NUMBER


class SplitIds:
    """The ids of a sorted trial queryset as a sequence that Django's ``Paginator`` and DRF's
    pagination can ``count()`` and slice: the trials whose first sort key has a number, then
    those without. ``count()`` is one query; a slice one query, two at the seam between the
    parts (plus the first part's count when a page starts past it).

    Raises:
        ValueError: ``queryset`` is not sorted first by a metric or hyperparameter through the
            side table (``sorted_ids`` says when it is).
    """

    def __init__(self, queryset: QuerySet) -> None:
        self._all = queryset.values_list("id", flat=True)
        first, *rest = queryset.query.order_by or (None,)
        if not isinstance(first, OrderBy) or first.expression != F(FIRST_SIDE_NUMBER):
            raise ValueError("The queryset is not sorted by a side-table number first.")
        # Without NULLS LAST: the part has no nulls, and PostgreSQL walks the index backwards
        # only for the default ``DESC NULLS FIRST``.
        plain = OrderBy(F(FIRST_SIDE_NUMBER), descending=first.descending)
        self._valued = self._all.filter(**{f"{FIRST_SIDE_NUMBER}__isnull": False}).order_by(
            plain, *rest
        )
        self._rest = self._all.filter(**{f"{FIRST_SIDE_NUMBER}__isnull": True})
        self._count: int | None = None
        self._valued_count: int | None = None

    def count(self) -> int:
        """How many trials match (one query, cached)."""
        if self._count is None:
            self._count = self._all.count()
        return self._count

    def __len__(self) -> int:
        return self.count()

    def __iter__(self) -> Iterator[int]:
        return iter(self[0 : self.count()])

    @overload
    def __getitem__(self, index: int, /) -> int: ...

    @overload
    def __getitem__(self, index: slice, /) -> list[int]: ...

    def __getitem__(self, index: int | slice, /) -> Any:
        if isinstance(index, int):
            found = self[index : index + 1]
            if not found:
                raise IndexError(index)
            return found[0]
        start, stop, step = index.indices(self.count())
        if step != 1:
            raise ValueError("A page of trial ids is a contiguous slice.")
        if stop <= start:
            return []
        ids = list(self._valued[start:stop])
        if len(ids) == stop - start:
            return ids
        # Past the first part's end: its size is where the second part starts.
        if ids:
            valued = start + len(ids)
        else:
            if self._valued_count is None:
                self._valued_count = self._valued.count()
            valued = self._valued_count
        return ids + list(self._rest[max(0, start - valued) : stop - valued])


def rows_in_order(queryset: QuerySet, ids: Sequence[int]) -> list[Any]:
    """The rows of ``queryset`` whose ids are ``ids`` (a page), in the order of ``ids``: one
    query, which reads the wide rows of the page alone."""
    position = {row_id: n for n, row_id in enumerate(ids)}
    return sorted(queryset.filter(id__in=list(ids)), key=lambda row: position[row.id])


def sorted_ids(queryset: QuerySet) -> SplitIds | QuerySet:
    """The ids of ``queryset`` (trials) in its order, for a paginator: a ``SplitIds`` when
    its first sort key is the side table's number of a metric or hyperparameter
    (``order_trials``), else the plain ``values_list`` of ids (a sort on the trial's own
    columns already reads an index in order)."""
    terms = queryset.query.order_by
    first = terms[0] if terms else None
    if isinstance(first, OrderBy) and first.expression == F(FIRST_SIDE_NUMBER):
        return SplitIds(queryset)
    return queryset.values_list("id", flat=True)
