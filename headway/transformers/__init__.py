"""``headway.transformers``: the Hugging Face ``transformers.Trainer`` integration.

``DetCallback`` (Determined's name and semantics) reports a Trainer's metrics and checkpoints
through a Core API context, follows the trial's searcher, and stops on preemption;
``HeadwayCallback`` opens its own context through ``headway.experimental.core_v2`` (an
unmanaged run from anywhere, or a managed trial unchanged): docs/logging-from-anywhere.md.
Importing this package imports ``transformers``; nothing else in ``headway`` does.
"""

from __future__ import annotations

from headway.transformers._callback import DetCallback
from headway.transformers._headway_callback import HeadwayCallback

__all__ = ["DetCallback", "HeadwayCallback"]
