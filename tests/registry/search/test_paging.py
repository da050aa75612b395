"""``registry.search.paging``: pages of a sort by a metric or hyperparameter, read as the trials
with a number for the first key and then those without, are exactly the slices of the one
sorted query, at every offset, in both directions, with ties, missing and text values."""

import pytest

from registry.models import Trial
from registry.search import order_queryset
from registry.search.compile import use_side_table
from registry.search.paging import SplitIds, rows_in_order, sorted_ids
from tests.registry.search.conftest import summary

ORDERS = [
    "-accuracy",
    "accuracy",
    "hparams.lr",
    "-hparams.lr",
    "-accuracy,hparams.lr",
    "hparams.optimizer,-accuracy",
]


@pytest.fixture
def crowd(world):
    """``world`` plus 13 trials: tied accuracies, some without one, an ``lr`` that is text."""
    for n in range(13):
        metrics = summary(validation__accuracy=[0.5, 0.7, 0.7][n % 3]) if n % 4 else {}
        Trial.objects.create(
            experiment=world.vision,
            hparams={"lr": "auto" if n == 5 else 10 ** -(n % 4), "optimizer": "adam"},
            summary_metrics=metrics,
        )
    return world


@pytest.mark.parametrize("order_by", ORDERS)
def test_every_page_is_the_slice_of_the_one_sorted_query(crowd, order_by):
    trials = order_queryset(Trial.objects.order_by("id"), order_by)
    expected = list(trials.values_list("id", flat=True))
    assert len(expected) == 17
    ids = sorted_ids(trials)
    assert ids.count() == 17
    for limit in (1, 3, 5, 17, 40):
        for offset in range(0, 19):
            assert list(ids[offset : offset + limit]) == expected[offset : offset + limit], (
                order_by,
                offset,
                limit,
            )
    page = list(ids[2:7])
    assert [row.id for row in rows_in_order(trials, page)] == page


def test_the_split_is_taken_for_a_side_table_number_only(crowd):
    by_metric = sorted_ids(order_queryset(Trial.objects.order_by("id"), "-accuracy"))
    by_column = sorted_ids(order_queryset(Trial.objects.order_by("id"), "-start_time"))
    assert isinstance(by_metric, SplitIds) is use_side_table()
    assert not isinstance(by_column, SplitIds)
    assert by_column.count() == 17


def test_a_split_page_reads_single_rows_and_refuses_steps(crowd):
    trials = order_queryset(Trial.objects.order_by("id"), "-accuracy")
    if not use_side_table():
        pytest.skip("the side table is PostgreSQL's")
    ids = SplitIds(trials)
    expected = list(trials.values_list("id", flat=True))
    assert ids[0] == expected[0] and ids[16] == expected[16] and len(ids) == 17
    with pytest.raises(IndexError):
        ids[17]
    with pytest.raises(ValueError, match="contiguous"):
        ids[0:10:2]
