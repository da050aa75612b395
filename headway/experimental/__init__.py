"""Determined's ``determined.experimental``: ``client`` (``from headway.experimental import
client``) and ``core_v2`` (unmanaged runs; imported on its own: ``from headway.experimental
import core_v2``)."""

from headway.experimental import client

__all__ = ["client"]
