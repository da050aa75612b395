"""``random``: ``max_trials`` trials with independently sampled hparams (Determined's random)."""

from __future__ import annotations

from headway.expconf import ExperimentConfig, RandomSearcherConfig, sample_hparams
from registry.searcher._base import Create
from registry.searcher._fixed import FixedSearch, trial_rng


class RandomSearch(FixedSearch):
    """Trial ``i`` samples its hparams, then its seed, from ``trial_rng(experiment seed, i)``;
    a trial that reports invalid hparams is replaced by a new sample."""

    replaces_invalid = True

    def __init__(self, config: ExperimentConfig, seed: int) -> None:
        super().__init__(config, seed)
        assert isinstance(config.searcher, RandomSearcherConfig)
        self.max_trials = config.searcher.max_trials

    def total(self) -> int:
        return self.max_trials

    def trial_create(self, index: int) -> Create:
        rng = trial_rng(self.seed, index)
        hparams = sample_hparams(self.config.hyperparameters, rng)
        return Create(request_id=str(index), hparams=hparams, seed=rng.randrange(2**31))
