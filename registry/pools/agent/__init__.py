"""The ``agent`` pool type (the default): hosts running Headway's host agent join the pool and
Headway's scheduler places its runs (``provider.PROVIDER``)."""
