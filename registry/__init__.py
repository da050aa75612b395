"""The registry: experiments, trials, metrics, checkpoints, their lifecycle, REST API and searchers."""
