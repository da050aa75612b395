"""``grid``: one trial per point of the hyperparameter grid (Determined's grid searcher)."""

from __future__ import annotations

from headway.expconf import ExperimentConfig, grid_point, grid_size
from registry.searcher._base import Create
from registry.searcher._fixed import FixedSearch, trial_rng


class GridSearch(FixedSearch):
    """Trial ``i`` gets grid point ``i - 1`` (``headway.expconf.grid_points`` order) and a seed
    from ``trial_rng(experiment seed, i)``. Points are built one at a time, never the whole grid.
    """

    def __init__(self, config: ExperimentConfig, seed: int) -> None:
        super().__init__(config, seed)
        self.size = grid_size(config.hyperparameters)

    def total(self) -> int:
        return self.size

    def trial_create(self, index: int) -> Create:
        hparams = grid_point(self.config.hyperparameters, index - 1)
        return Create(
            request_id=str(index),
            hparams=hparams,
            seed=trial_rng(self.seed, index).randrange(2**31),
        )
