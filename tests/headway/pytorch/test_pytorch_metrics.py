"""Metric reduction, batch moving, units and the resumable DataLoader (pure unit tests)."""

from __future__ import annotations

import collections
from itertools import chain

import numpy as np
import pytest
import torch

from headway.core import DistributedContext
from headway.pytorch import Batch, DataLoader, Epoch, MetricReducer, Reducer
from headway.pytorch._context import _to_device
from headway.pytorch._dataloader import ResumableLoader
from headway.pytorch._metrics import combine_slots, detach_metrics, reduce_metrics


def test_it_averages_tensors_numbers_and_arrays() -> None:
    batches = [
        {
            "loss": torch.tensor(1.0),
            "acc": 0.5,
            "n": np.float32(2.0),
            "v": torch.tensor([1.0, 3.0]),
        },
        {
            "loss": torch.tensor(3.0),
            "acc": 1.0,
            "n": np.float32(4.0),
            "v": torch.tensor([3.0, 5.0]),
        },
    ]
    out = reduce_metrics(batches)
    assert out == {"loss": 2.0, "acc": 0.75, "n": 3.0, "v": [2.0, 4.0]}
    assert all(isinstance(out[k], float) for k in ("loss", "acc", "n"))


def test_it_reduces_nested_dicts_and_missing_names() -> None:
    out = reduce_metrics([{"a": {"b": 1.0, "c": 2}}, {"a": {"b": 3.0}}, {"d": 5}])
    assert out == {"a": {"b": 2.0, "c": 2.0}, "d": 5.0}


def test_it_weights_and_uses_reducers() -> None:
    batches = [
        {"x": torch.tensor(1.0), "s": 1, "m": 4.0},
        {"x": torch.tensor(4.0), "s": 2, "m": 2.0},
    ]
    out = reduce_metrics(batches, [1, 2], {"s": Reducer.SUM, "m": Reducer.MIN})
    assert out == {"x": pytest.approx(3.0), "s": 3.0, "m": 2.0}
    assert reduce_metrics(batches, reducers=Reducer.MAX)["x"] == 4.0


def test_tensor_columns_average_in_float64_whatever_their_dtypes() -> None:
    # One float32 column (stacked at once), one that mixes dtypes, one of tensors and numbers,
    # one of bools: each averages the values as float64, as value-by-value conversion does.
    values = [0.1, 0.2, 0.7]
    batches = [
        {
            "f32": torch.tensor(v),
            "mixed": torch.tensor(v, dtype=torch.float16 if i else torch.float32),
            "some_numbers": torch.tensor(v) if i else v,
            "flag": torch.tensor(i > 0),
        }
        for i, v in enumerate(values)
    ]
    out = reduce_metrics(batches)
    as_f32 = [float(torch.tensor(v)) for v in values]
    assert out["f32"] == sum(as_f32) / 3
    assert out["mixed"] == (as_f32[0] + sum(float(torch.tensor(v).half()) for v in values[1:])) / 3
    assert out["some_numbers"] == (values[0] + sum(as_f32[1:])) / 3
    assert out["flag"] == 2 / 3
    assert all(type(value) is float for value in out.values())


def test_it_combines_slots_by_total_weight() -> None:
    assert combine_slots([({"x": 1.0}, 3.0), ({"x": 5.0}, 1.0)]) == {"x": 2.0}


def test_it_names_metrics_that_cannot_be_averaged() -> None:
    with pytest.raises(TypeError, match="metric 'x'"):
        reduce_metrics([{"x": "text"}, {"x": torch.tensor(1.0)}])
    with pytest.raises(ValueError, match="metric 'x'"):
        reduce_metrics([{"x": torch.ones(2)}, {"x": torch.ones(3)}])


def test_detach_drops_the_graph_and_rejects_non_dicts() -> None:
    w = torch.ones(2, requires_grad=True)
    out = detach_metrics({"loss": (w * 2).sum(), "inner": {"y": w.sum()}})
    assert not out["loss"].requires_grad and not out["inner"]["y"].requires_grad
    # A bare tensor is the loss (Determined's _train_batch); other non-dicts are refused.
    loss = detach_metrics((w * 2).sum())
    assert list(loss) == ["loss"] and not loss["loss"].requires_grad
    with pytest.raises(TypeError, match="must return a dict"):
        detach_metrics([1.0])


def test_custom_metric_reducer_interface() -> None:
    class Count(MetricReducer):
        def __init__(self) -> None:
            self.n = 0

        def reset(self) -> None:
            self.n = 0

        def per_slot_reduce(self) -> int:
            return self.n

        def cross_slot_reduce(self, per_slot_metrics: list[int]) -> int:
            return sum(per_slot_metrics)

    r = Count()
    r.n = 3
    assert r.cross_slot_reduce([r.per_slot_reduce(), 4]) == 7


def test_to_device_handles_nested_batches() -> None:
    Pair = collections.namedtuple("Pair", "a b")
    batch = {
        "data": [{"x": np.zeros((2, 2), dtype=np.float32)}, {"y": torch.ones(2)}],
        "label": (torch.zeros(2), Pair(np.ones(1), "keep")),
    }
    out = _to_device(batch, torch.device("cpu"))
    assert isinstance(out["data"][0]["x"], torch.Tensor)
    assert out["data"][1]["y"] is batch["data"][1]["y"]
    assert isinstance(out["label"], tuple) and isinstance(out["label"][1], Pair)
    assert out["label"][1].b == "keep"
    # The usual (inputs, labels) batch keeps its type; tensors already there are not copied.
    x, y = torch.ones(2), torch.zeros(2)
    for pair in ((x, y), [x, y]):
        moved = _to_device(pair, torch.device("cpu"))
        assert type(moved) is type(pair) and moved[0] is x and moved[1] is y
    assert isinstance(_to_device([np.ones(1), [x]], torch.device("cpu"))[0], torch.Tensor)


def test_units() -> None:
    assert Batch(5).is_due(10) and not Batch(5).is_due(11) and not Batch(5).is_due(0)
    assert Batch([2, 5]).is_due(5) and not Batch([2, 5]).is_due(4)
    assert Epoch(2).length() == 2
    with pytest.raises(ValueError):
        Batch(0)


def _epoch(loader: ResumableLoader, epoch: int, skip: int = 0) -> list[list[int]]:
    loader.set_position(epoch, skip)
    return [b[0].tolist() for b in loader]


def test_dataloader_order_depends_on_seed_and_epoch_and_resumes_mid_epoch() -> None:
    dataset = torch.utils.data.TensorDataset(torch.arange(23))
    spec = DataLoader(dataset, batch_size=5, shuffle=True)
    a = ResumableLoader(spec, seed=1, rank=0, size=1, training=True)
    b = ResumableLoader(spec, seed=1, rank=0, size=1, training=True)
    assert len(a) == 5
    e0 = _epoch(a, 0)
    assert sorted(chain.from_iterable(e0)) == list(range(23))
    assert _epoch(b, 0) == e0
    assert _epoch(a, 1) != e0
    assert _epoch(b, 0, skip=3) == e0[3:]
    other_seed = ResumableLoader(spec, seed=2, rank=0, size=1, training=True)
    assert _epoch(other_seed, 0) != e0


def test_dataloader_shards_across_slots() -> None:
    dataset = torch.utils.data.TensorDataset(torch.arange(10))
    spec = DataLoader(dataset, batch_size=2, shuffle=True, drop_last=False)
    shards = [ResumableLoader(spec, seed=3, rank=r, size=3, training=True) for r in range(3)]
    seen = [list(chain.from_iterable(_epoch(s, 0))) for s in shards]
    assert all(len(s) == 4 for s in seen)  # padded to 12 samples, 4 per slot
    assert set(chain.from_iterable(seen)) == set(range(10))
    val = [ResumableLoader(spec, seed=3, rank=r, size=3, training=False) for r in range(3)]
    assert sorted(i for v in val for batch in _epoch(v, 0) for i in batch) == list(range(10))


def test_dataloader_is_a_drop_in_for_iteration_and_rejects_bad_arguments() -> None:
    dataset = torch.utils.data.TensorDataset(torch.arange(6))
    assert [b[0].tolist() for b in DataLoader(dataset, batch_size=4)] == [[0, 1, 2, 3], [4, 5]]
    with pytest.raises(ValueError, match="shuffle"):
        DataLoader(dataset, sampler=torch.utils.data.SequentialSampler(dataset), shuffle=True)
    custom = DataLoader(dataset, sampler=torch.utils.data.SequentialSampler(dataset), batch_size=2)
    loader = ResumableLoader(custom, seed=0, rank=0, size=1, training=True)
    assert _epoch(loader, 0, skip=1) == [[2, 3], [4, 5]]


def test_distributed_context_single_is_what_loaders_see() -> None:
    assert DistributedContext.single().size == 1
