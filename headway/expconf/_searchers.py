"""The ``searcher`` section: one model per searcher (Determined's names and defaults), the
tagged union of them (``SearcherConfig``), and local mode's nameless searcher
(``LocalSearcherConfig``: a local ``Trainer`` reads a few of its fields; no searcher runs).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeAlias

from pydantic import Field, model_validator

from headway.expconf._base import StrictModel, field_error, tagged_union
from headway.expconf._length import Length
from headway.expconf._sections import check_asha_length

_PositiveInt = Annotated[int, Field(gt=0)]


class _SearcherFields(StrictModel):
    """Fields every searcher has (``name`` is narrowed to a literal by each searcher)."""

    name: str
    metric: Annotated[str, Field(min_length=1)]
    smaller_is_better: bool = True
    # Optional as in Determined 0.38: without it the script decides how long to train.
    max_length: Length | None = None
    source_trial_id: _PositiveInt | None = None
    source_checkpoint_uuid: Annotated[str, Field(min_length=1)] | None = None


class SingleSearcherConfig(_SearcherFields):
    """``searcher.name: single``: one trial with the hyperparameters' sampled values.

    Attributes:
        metric (str): validation metric the searcher ranks by, e.g. ``validation_loss``.
        smaller_is_better (bool): whether lower ``metric`` is better (default True).
        max_length (Length | None): how long each trial trains (one searcher operation of this
            length); None (Determined 0.38): the script decides, and the trial ends when its
            process exits 0.
        source_trial_id (int | None), source_checkpoint_uuid (str | None): warm-start the trial
            from another trial's latest checkpoint or a given checkpoint ("continue trial").
    """

    name: Literal["single"]


class RandomSearcherConfig(_SearcherFields):
    """``searcher.name: random``: ``max_trials`` trials with independently sampled hyperparameters,
    each trained to ``max_length``.

    Attributes:
        max_trials (int): how many trials to create (> 0).
        max_concurrent_trials (int): how many may be unfinished at once (default 16, as in
            Determined); 0 means no limit.

    The other fields are ``single``'s; ``source_*`` warm-starts every trial.
    """

    name: Literal["random"]
    max_trials: _PositiveInt
    max_concurrent_trials: Annotated[int, Field(ge=0)] = 16


class GridSearcherConfig(_SearcherFields):
    """``searcher.name: grid``: one trial per point of the grid over the hyperparameters
    (``headway.expconf.grid_points``), each trained to ``max_length``. Every int/double/log
    hyperparameter needs ``count``.

    Attributes:
        max_concurrent_trials (int): as for ``random``.
    """

    name: Literal["grid"]
    max_concurrent_trials: Annotated[int, Field(ge=0)] = 16


class _HalvingFields(_SearcherFields):
    """Fields of the successive-halving searchers (Li et al., "A System for Massively Parallel
    Hyperparameter Tuning", MLSys 2020), with Determined's names and defaults.

    Two forms (exactly one, ``check_asha_length``): ``max_length`` (the searcher hands each
    trial operations of rung lengths and promotes the best) or Determined 0.38's
    ``time_metric`` + ``max_time`` (trials train as their script says and report
    ``time_metric`` in their validation metrics; ASHA stops the losing ones by preemption).
    """

    max_trials: _PositiveInt
    divisor: Annotated[float, Field(gt=1)] = 4.0
    max_concurrent_trials: Annotated[int, Field(ge=0)] = 16
    stop_once: bool = False
    time_metric: Annotated[str, Field(min_length=1)] | None = None
    max_time: _PositiveInt | None = None

    @model_validator(mode="after")
    def _check_length_form(self) -> Any:
        check_asha_length(self)
        return self

    @property
    def top_length(self) -> int:
        """The top rung's length: ``max_time`` (in ``time_metric``) or ``max_length.value``."""
        if self.max_time is not None:
            return self.max_time
        assert self.max_length is not None  # check_asha_length
        return self.max_length.value


class AsyncHalvingSearcherConfig(_HalvingFields):
    """``searcher.name: async_halving``: one bracket of asynchronous successive halving.

    Attributes:
        num_rungs (int): rungs of the bracket; rung ``i`` (0-based) trains to
            ``max_length / divisor ** (num_rungs - 1 - i)`` (at least 1 unit).
        max_trials (int): trials created in all (sampled as ``random`` does).
        divisor (float): the top ``1 / divisor`` of a rung is promoted (default 4).
        max_concurrent_trials (int): trials training at once (default 16; 0:
            ``divisor ** (num_rungs - 1)``, at most ``max_trials``).
        stop_once (bool): a trial not promoted when it reports a rung is never promoted later
            (no stopped trial is resumed). Default False: a stopped trial resumes from its
            checkpoint when later results make it one of the rung's best.
    """

    name: Literal["async_halving"]
    num_rungs: _PositiveInt


class AdaptiveASHASearcherConfig(_HalvingFields):
    """``searcher.name: adaptive_asha``: ASHA over several brackets (Determined's adaptive_asha).

    Attributes:
        max_rungs (int): rungs of the most aggressive bracket (default 5), capped so the
            smallest rung is at least one unit and ``max_trials`` can fill it.
        mode (str): which brackets run: ``aggressive`` (one bracket of ``max_rungs``),
            ``standard`` (default; brackets of ``(max_rungs-1)//2+1 .. max_rungs`` rungs) or
            ``conservative`` (``1 .. max_rungs`` rungs). Trials are split over brackets so
            each gets a similar training budget.
        bracket_rungs (list[int] | None): explicit rung counts of the brackets (overrides
            ``mode``/``max_rungs``).

    The rest as ``async_halving``.
    """

    name: Literal["adaptive_asha"]
    max_rungs: _PositiveInt = 5
    mode: Literal["aggressive", "standard", "conservative"] = "standard"
    bracket_rungs: list[_PositiveInt] | None = None


# One entry per searcher: ``searcher.name`` -> its model. A new searcher adds one entry.
SEARCHER_CONFIGS: dict[str, type[_SearcherFields]] = {
    "single": SingleSearcherConfig,
    "random": RandomSearcherConfig,
    "grid": GridSearcherConfig,
    "async_halving": AsyncHalvingSearcherConfig,
    "adaptive_asha": AdaptiveASHASearcherConfig,
}

if TYPE_CHECKING:
    # What the type checker sees; at run time the same members form a pydantic tagged union.
    SearcherConfig: TypeAlias = (
        SingleSearcherConfig
        | RandomSearcherConfig
        | GridSearcherConfig
        | AsyncHalvingSearcherConfig
        | AdaptiveASHASearcherConfig
    )
else:
    SearcherConfig = tagged_union("searcher", "name", SEARCHER_CONFIGS)


class LocalSearcherConfig(StrictModel):
    """A ``searcher`` without ``name``, as local mode takes it (Determined's local training
    passes a few searcher fields and runs no searcher): the fields a local ``Trainer`` reads.

    Attributes:
        metric (str | None): the validation metric that decides the "best" checkpoint; None: no
            best checkpoint is kept apart.
        smaller_is_better (bool): its direction (default True).
        max_length (Length | None): how long ``fit()`` trains when not given ``max_length``.
        time_metric (str | None), max_time (int | None): the timed form of the halving
            searchers (``batches`` / ``epochs`` bound ``fit()``), both or neither.

    A field of a real searcher (``max_trials``, ``divisor`` ...) needs the searcher's ``name``.
    """

    metric: Annotated[str, Field(min_length=1)] | None = None
    smaller_is_better: bool = True
    max_length: Length | None = None
    time_metric: Annotated[str, Field(min_length=1)] | None = None
    max_time: _PositiveInt | None = None

    @model_validator(mode="after")
    def _check_timed_pair(self) -> LocalSearcherConfig:
        if (self.time_metric is None) != (self.max_time is None):
            missing = "max_time" if self.max_time is None else "time_metric"
            raise field_error(missing, "time_metric and max_time are given together")
        return self


def _nameless_searcher(value: Any) -> str | None:
    # A mapping without ``name`` (or the model it became): local mode's searcher.
    if isinstance(value, LocalSearcherConfig) or (isinstance(value, dict) and "name" not in value):
        return "local"
    return None


if TYPE_CHECKING:
    LocalSearcher: TypeAlias = SearcherConfig | LocalSearcherConfig
else:
    LocalSearcher = tagged_union(
        "local_searcher",
        "name",
        {**SEARCHER_CONFIGS, "local": LocalSearcherConfig},
        fallback=_nameless_searcher,
        hidden=("local",),
    )
