"""Determined's ``determined.experimental``: only ``client`` (``from headway.experimental import
client``)."""

from headway.experimental import client

__all__ = ["client"]
