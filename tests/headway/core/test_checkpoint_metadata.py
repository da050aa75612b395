"""Merging the metadata every rank gives a sharded checkpoint (Determined's rules)."""

from __future__ import annotations

import pytest

from headway.core._checkpoint_metadata import check_metadata, merge_metadata


def test_disjoint_keys_and_nested_dicts_merge() -> None:
    merged, conflicts = merge_metadata(
        [
            {"steps_completed": 3, "shards": {"0": {"bytes": 10}}, "a": [1]},
            {"steps_completed": 3, "shards": {"1": {"bytes": 20}}, "b": None},
        ]
    )
    assert conflicts == {}
    assert merged == {
        "steps_completed": 3,
        "shards": {"0": {"bytes": 10}, "1": {"bytes": 20}},
        "a": [1],
        "b": None,
    }


@pytest.mark.parametrize(
    ("mine", "theirs", "path"),
    [
        ({"loss": 1.0}, {"loss": 2.0}, "/loss"),
        ({"x": {"y": 1}}, {"x": {"y": 2}}, "/x/y"),
        ({"x": {"y": 1}}, {"x": 1}, "/x"),
        ({"x": 1}, {"x": {"y": 1}}, "/x"),
        ({"x": [1]}, {"x": [2]}, "/x"),
    ],
)
def test_different_values_for_one_key_conflict(
    mine: dict[str, object], theirs: dict[str, object], path: str
) -> None:
    _, conflicts = merge_metadata([mine, {"other": 0}, theirs])
    assert conflicts == {path: [0, 2]}


def test_one_ranks_part_may_leave_steps_completed_to_another() -> None:
    assert check_metadata({"k": 1}, require_steps=False) == {"k": 1}
    with pytest.raises(ValueError, match="steps_completed"):
        check_metadata({"k": 1})
    with pytest.raises(ValueError, match="steps_completed"):
        check_metadata({"steps_completed": -1}, require_steps=False)
