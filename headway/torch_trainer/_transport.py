"""Commands and results between the ``TorchTrainer`` driver and its workers, over a TCPStore.

The driver owns a ``torch.distributed.TCPStore`` (the same store type torchrun's rendezvous
uses). Keys of worker group ``g`` (one per launch, see ``_group.py``):

- ``g{g}/c/{seq}``: command ``seq`` (1, 2, ...), written by the driver;
- ``g{g}/r/{seq}/{rank}``: each worker's answer; ``seq`` 0 is "set up and ready";
- ``g{g}/pg/...``: that group's ``init_process_group`` keys (a fresh namespace per launch, so a
  restarted group never reads a dead group's addresses);
- ``state/{path}``: on Ray, the bytes of state file ``path`` (the file itself lives on the
  driver's disk, which workers on other nodes do not see).

Payloads are pickles, so each is signed with HMAC-SHA256 under a random key that only the driver
and its workers hold (passed through the spawn pipe; on Ray, through Ray's own channels): a
process that reaches the store's port cannot make a worker unpickle anything. The libuv store refuses values over
8 MiB, so longer payloads are split into numbered chunks.
"""

from __future__ import annotations

import datetime
import hashlib
import hmac
import pickle
from typing import Any

import torch.distributed as dist

_CHUNK = 4 * 1024 * 1024
_SINGLE, _CHUNKED = b"S", b"C"
_DIGEST = hashlib.sha256().digest_size
_WAIT_SLICE_S = 3600.0


class TransportError(RuntimeError):
    """A payload whose signature does not verify (not written by this trainer)."""


def command_key(generation: int, seq: int) -> str:
    return f"g{generation}/c/{seq}"


def result_key(generation: int, seq: int, rank: int) -> str:
    return f"g{generation}/r/{seq}/{rank}"


def pg_prefix(generation: int) -> str:
    return f"g{generation}/pg"


def state_key(path: str) -> str:
    """Where a state file's bytes travel when the workers do not share the driver's disk."""
    return f"state/{path}"


def _set(store: dist.Store, key: str, data: bytes) -> None:
    # torch's stub declares ``value: str``; the binding takes bytes as well (and keeps them).
    store.set(key, data)  # type: ignore[arg-type]


def put(store: dist.Store, secret: bytes, key: str, value: Any) -> None:
    """Sign and write ``pickle(value)`` under ``key`` (chunks first, so ``key`` appearing
    means the whole value is readable)."""
    data = pickle.dumps(value)
    data = hmac.new(secret, data, hashlib.sha256).digest() + data
    if len(data) <= _CHUNK:
        _set(store, key, _SINGLE + data)
        return
    chunks = [data[i : i + _CHUNK] for i in range(0, len(data), _CHUNK)]
    for i, chunk in enumerate(chunks):
        _set(store, f"{key}/{i}", chunk)
    _set(store, key, _CHUNKED + str(len(chunks)).encode())


def get(store: dist.Store, secret: bytes, key: str) -> Any:
    """Read, verify and unpickle what ``put`` wrote under ``key`` (which must exist).

    Raises:
        TransportError: the signature does not verify.
    """
    head = store.get(key)
    if head[:1] == _CHUNKED:
        data = b"".join(store.get(f"{key}/{i}") for i in range(int(head[1:])))
    else:
        data = head[1:]
    digest, body = data[:_DIGEST], data[_DIGEST:]
    if not hmac.compare_digest(digest, hmac.new(secret, body, hashlib.sha256).digest()):
        raise TransportError(f"store key {key!r} does not carry this trainer's signature")
    return pickle.loads(body)


def delete(store: dist.Store, key: str) -> None:
    """Remove ``key`` and its chunks (best effort: keys only cost the driver's memory)."""
    head = store.get(key) if store.check([key]) else b""
    if head[:1] == _CHUNKED:
        for i in range(int(head[1:])):
            store.delete_key(f"{key}/{i}")
    store.delete_key(key)


def wait(store: dist.Store, keys: list[str]) -> None:
    """Block until every key exists. Nobody polls: the driver's launch thread writes a "group
    died" answer for every missing key when the group ends (``_group.py``), and a worker
    whose driver exited gets a connection error.

    Raises:
        torch.distributed.DistNetworkError: the store is gone (its driver exited).
    """
    while True:
        try:
            # Long slices: each timeout makes the store client log a warning line.
            store.wait(keys, datetime.timedelta(seconds=_WAIT_SLICE_S))
            return
        except dist.DistStoreError:
            continue
