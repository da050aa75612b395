"""Launch layers that start one process per slot (Determined's ``determined.launch``).

``python -m headway.launch.torch_distributed [TORCH_OVERRIDES... --] (--trial M:C | CMD...)``
wraps PyTorch's own launcher (``torch.distributed.run``, i.e. ``torchrun``); see
``headway.launch.torch_distributed`` and docs/distributed.md.
``python -m headway.launch.deepspeed`` is the same launcher with DeepSpeed's environment
(docs/deepspeed.md). ``python -m headway.launch.wrap_rank RANK -- CMD...`` prefixes a command's
output lines with its rank, for launchers a script writes itself (docs/distributed.md).
"""
