"""How long a Trainer trains, checked against the trial's searcher, and its operations.

Two forms of ``searcher`` config, as in ``headway.core``: with ``max_length`` the searcher hands
the trial operations (``core_context.searcher.operations()``, Determined before 0.38: an ASHA
rung is an operation shorter than ``max_length``); without it (Determined 0.38) the script's
``--max_steps`` / ``--num_train_epochs`` is the length and ``adaptive_asha`` reads
``time_metric`` from the validation metrics. Either way the Trainer's length must be the one
the searcher expects, or the search is wrong without anyone noticing: the mismatch is refused.
"""

from __future__ import annotations

from typing import Any

from headway.expconf import Length, SearcherConfig


def trainer_length(args: Any) -> tuple[str, float, str]:
    """``(unit, length, flag)`` of ``TrainingArguments``: ``batches`` with ``max_steps > 0``,
    else ``epochs`` of ``num_train_epochs``; ``flag`` names the argument that set it."""
    if args.max_steps is not None and args.max_steps > 0:
        return "batches", float(args.max_steps), "--max_steps"
    return "epochs", float(args.num_train_epochs), "--num_train_epochs"


def check_searcher_length(searcher: SearcherConfig, args: Any) -> Length | None:
    """Check the Trainer's length against the ``searcher`` config; return ``max_length``.

    Returns:
        The parsed ``searcher.max_length`` (the trial then follows searcher operations), or
        None when the config has none.

    Raises:
        ValueError: ``max_length`` (or an ASHA ``max_time`` in ``batches``/``epochs``) differs
            from the Trainer's ``--max_steps`` / ``--num_train_epochs``, or is in ``records``;
            the message names both.
    """
    unit, length, flag = trainer_length(args)
    max_length = searcher.max_length
    if max_length is not None:
        if (str(max_length.unit), float(max_length.value)) != (unit, length):
            raise ValueError(
                f"searcher.max_length ({max_length.unit}: {max_length.value}) does not match the "
                f"Trainer's {flag} ({unit}: {length:g}); set them to the same length (batches "
                "go with --max_steps, epochs with --num_train_epochs)"
            )
        return max_length
    # Only the halving searchers have these (Determined 0.38's timed ASHA).
    time_metric = getattr(searcher, "time_metric", None)
    max_time = getattr(searcher, "max_time", None)
    if time_metric in ("batches", "epochs") and max_time is not None:
        timed = (time_metric, float(max_time))
    else:
        timed = (unit, length)
    if timed != (unit, length):
        raise ValueError(
            f"searcher.max_time ({time_metric}: {max_time}) does not match the Trainer's "
            f"{flag} ({unit}: {length:g}); set one to the other"
        )
    return None


def required_metrics(searcher: SearcherConfig | None) -> list[str]:
    """The validation metrics the searcher reads: ``metric`` and a ``time_metric`` other than
    ``batches`` / ``epochs`` (which every report carries); none without a searcher (local
    mode)."""
    if searcher is None:
        return []
    names = [searcher.metric]
    time_metric = getattr(searcher, "time_metric", None)
    if time_metric and time_metric not in ("batches", "epochs"):
        names.append(time_metric)
    return names
