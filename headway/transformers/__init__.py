"""``headway.transformers``: the Hugging Face ``transformers.Trainer`` integration.

``DetCallback`` (Determined's name and semantics) reports a Trainer's metrics and checkpoints
through a Core API context, follows the trial's searcher, and stops on preemption;
``HeadwayCallback`` is the same callback under Headway's name (docs/logging-from-anywhere.md).
Importing this package imports ``transformers``; nothing else in ``headway`` does.
"""

from __future__ import annotations

from headway.transformers._callback import DetCallback

HeadwayCallback = DetCallback

__all__ = ["DetCallback", "HeadwayCallback"]
