"""Logging from anywhere: what a logger costs a Lightning fit, and MLflow ``log_batch`` throughput.

Run from the repository root: ``.venv/bin/python bench/logging_overhead.py [--steps N]
[--rounds N] [--kinds none,headway,mlflow,mlflow_async] [--batches N] [--mlflow-batches N]
[--batch-size N] [--keys N] [--no-postgres]``.

Per Headway backend (SQLite, then PostgreSQL ``headway_bench_logging``, recreated; one of them
under ``bench/run_all.py``) a Headway master (``manage.py serve``, gunicorn as deployed; the
embedded ``runserver`` when gunicorn is missing) and, once, an MLflow tracking server (``mlflow
server``, 2 uvicorn workers) on a PostgreSQL database of its own (``..._mlflow``):

1. **Lightning** (bench/_logging_lightning.py): the same small fit (an MLP on scikit-learn's
   digits, ``--steps`` batches, three metrics logged every step) with no logger,
   ``headway.lightning.HeadwayLogger`` reporting to the master (an unmanaged trial), Lightning's
   ``MLFlowLogger`` to the tracking server, and the same with ``synchronous=False``; ``--rounds``
   rounds, the order of the rows rotated every round. Per row: wall time of the ``Trainer``'s
   life (construction, fit, the logger's finalize) and its overhead over no logger in the same
   round (median and range), with the points each store holds afterwards (``verified``).
2. **MLflow API**: the real ``MlflowClient.log_batch`` with ``--batch-size`` metrics a request
   (``--keys`` metrics x the steps that fill it) into one run, against the master's
   MLflow-compatible API (``/api/2.0/mlflow/``, ``MLFLOW_TRACKING_TOKEN`` a Headway token) and
   against the tracking server, alternating every round: points/s each and their ratio (goal:
   Headway >= 5x MLflow), with each run's history read back; beside them, the client's own
   time to encode one call (protobuf to JSON), the ceiling of one client whatever the server.

Without the full ``mlflow`` package (the ``bench`` extra) or without PostgreSQL for its server,
the MLflow rows are not measured (null, with the reason in ``mlflow_not_measured``): nothing is
compared against a stand-in. The last line printed is one JSON object of the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _logging_lightning as lit
from _mlflow_server import MlflowServer, mlflow_server_missing
from _pairs import median_range
from _server import Backend, Server, backend_factories, gunicorn_available
from _tiny import pick

POSTGRES_URL = os.environ.get(
    "HEADWAY_BENCH_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/headway_bench_logging"
)
TARGET_API_RATIO = 5.0
MLFLOW_MAX_BATCH = 1000  # MLflow's own limit of metrics in one log_batch request


def log_batch_rate(
    url: str, token: str | None, batches: int, size: int, keys: int
) -> dict[str, Any]:
    """``batches`` ``log_batch`` calls of ``size`` metrics (``keys`` names x consecutive steps)
    into a new run at ``url``; ``points_per_s`` and ``verified`` (``m0``'s history holds every
    step it was sent)."""
    from mlflow import MlflowClient
    from mlflow.entities import Metric

    if token is None:
        os.environ.pop("MLFLOW_TRACKING_TOKEN", None)
    else:
        os.environ["MLFLOW_TRACKING_TOKEN"] = token  # read by the client at every request
    client = MlflowClient(tracking_uri=url)
    experiment = client.create_experiment(f"log-batch-{time.time_ns()}")
    run_id = client.create_run(experiment).info.run_id
    per = max(size // keys, 1)
    now = int(time.time() * 1000)
    requests_ = [
        [
            Metric(f"m{k}", 1.0 / (1 + step), now, step)
            for step in range(b * per, (b + 1) * per)
            for k in range(keys)
        ]
        for b in range(batches)
    ]  # built before timing: the client's own entity building is not the server's speed
    t0 = time.perf_counter()
    for metrics in requests_:
        client.log_batch(run_id, metrics=metrics)
    elapsed = time.perf_counter() - t0
    points = sum(len(m) for m in requests_)
    history = client.get_metric_history(run_id, "m0")
    client.set_terminated(run_id)
    return {"points_per_s": points / elapsed, "verified": len(history) == batches * per}


def client_encode_ms(size: int, keys: int, repeats: int = 5) -> float:
    """Milliseconds the MLflow client takes to encode one ``log_batch`` request of ``size``
    metrics (entities to protobuf to JSON, as ``RestStore.log_batch`` does): the part of every
    call that no server speeds up, so ``1000 * size / this`` points/s bounds one client."""
    from mlflow.entities import Metric
    from mlflow.protos.service_pb2 import LogBatch
    from mlflow.utils.proto_json_utils import message_to_json

    per = max(size // keys, 1)
    metrics = [Metric(f"m{k}", 0.5, 0, step) for step in range(per) for k in range(keys)]
    t0 = time.perf_counter()
    for _ in range(repeats):
        message_to_json(LogBatch(run_id="1", metrics=[m.to_proto() for m in metrics]))
    return (time.perf_counter() - t0) * 1000 / repeats


def measure_api(urls: dict[str, str], token: str, args: argparse.Namespace) -> dict[str, Any]:
    """``args.rounds`` alternating rounds of ``log_batch`` into Headway and MLflow."""
    size, keys = args.batch_size, args.keys
    log_batch_rate(urls["headway"], token, 2, size, keys)  # warm-ups: first requests, imports
    log_batch_rate(urls["mlflow"], None, 2, size, keys)
    headway, mlflow, ratios, encode, verified = [], [], [], [], True
    for i in range(args.rounds):
        got: dict[str, dict[str, Any]] = {}
        for side in ("headway", "mlflow") if i % 2 == 0 else ("mlflow", "headway"):
            batches = args.batches if side == "headway" else args.mlflow_batches
            got[side] = log_batch_rate(
                urls[side], token if side == "headway" else None, batches, size, keys
            )
        encode.append(client_encode_ms(size, keys))
        headway.append(got["headway"]["points_per_s"])
        mlflow.append(got["mlflow"]["points_per_s"])
        ratios.append(headway[-1] / mlflow[-1])
        verified = verified and got["headway"]["verified"] and got["mlflow"]["verified"]
    out: dict[str, Any] = {}
    out["api_headway_points_per_s"], out["api_headway_points_per_s_range"] = median_range(
        headway, 0
    )
    out["api_mlflow_points_per_s"], out["api_mlflow_points_per_s_range"] = median_range(mlflow, 0)
    out["api_ratio"], out["api_ratio_range"] = median_range(ratios, 2)
    # What the client alone costs a call: the ceiling of one client's points/s, any server.
    out["api_client_encode_ms_per_call"], _ = median_range(encode, 1)
    out["api_client_ceiling_points_per_s"] = round(size * 1000 / statistics.median(encode))
    out["api_verified"] = verified
    out["api_target_met"] = out["api_ratio"] >= TARGET_API_RATIO
    return out


def measure_lightning(
    urls: dict[str, str], token: str, kinds: list[str], args: argparse.Namespace
) -> dict[str, Any]:
    """``args.rounds`` rounds of one fit per row of ``kinds`` (order rotated every round)."""
    data = lit.digits()
    for kind in kinds:  # warm-ups: imports, the first run of each store
        lit.fit_once(kind, max(args.steps // 10, 5), data, urls, token, -1)
    walls: dict[str, list[float]] = {kind: [] for kind in kinds}
    cpus: dict[str, list[float]] = {kind: [] for kind in kinds}
    stored: dict[str, list[int | None]] = {kind: [] for kind in kinds}
    for i in range(args.rounds):
        for kind in kinds[i % len(kinds) :] + kinds[: i % len(kinds)]:
            fit = lit.fit_once(kind, args.steps, data, urls, token, i)
            walls[kind].append(fit["wall_s"])
            cpus[kind].append(fit["cpu_s"])
            stored[kind].append(lit.points_stored(kind, fit["run"], urls, token))
    out: dict[str, Any] = {}
    for kind in kinds:
        out[f"fit_{kind}_s"], out[f"fit_{kind}_s_range"] = median_range(walls[kind], 2)
        out[f"fit_{kind}_cpu_s"], _ = median_range(cpus[kind], 2)
        if kind == "none":
            continue
        overheads = [100 * (w / b - 1) for w, b in zip(walls[kind], walls["none"], strict=True)]
        out[f"overhead_{kind}_pct"], out[f"overhead_{kind}_pct_range"] = median_range(overheads, 1)
        # The same in seconds: run creation and finalize are a fixed cost, the rest per step.
        added = [w - b for w, b in zip(walls[kind], walls["none"], strict=True)]
        out[f"added_{kind}_s"], _ = median_range(added, 2)
        # This process's CPU beside wall: steadier on a loaded machine, and the client-side
        # cost alone (a store's own work is in its server's processes).
        cpu_overheads = [100 * (c / b - 1) for c, b in zip(cpus[kind], cpus["none"], strict=True)]
        out[f"cpu_overhead_{kind}_pct"], _ = median_range(cpu_overheads, 1)
        out[f"verified_{kind}"] = all(n == args.steps for n in stored[kind])
    return out


def print_rows(label: str, result: dict[str, Any], kinds: list[str]) -> None:
    """The human-readable lines of one backend's figures."""
    for kind in kinds:
        line = f"{label}: fit with {kind:<12} {result[f'fit_{kind}_s']:6.2f} s"
        if kind != "none":
            low, high = result[f"overhead_{kind}_pct_range"]
            line += (
                f"  overhead {result[f'overhead_{kind}_pct']:+.1f}% ({low:+.1f}..{high:+.1f}%,"
                f" {result[f'added_{kind}_s']:+.2f} s)"
                f"  CPU {result[f'cpu_overhead_{kind}_pct']:+.1f}%"
                f"  verified {result[f'verified_{kind}']}"
            )
        print(line, flush=True)
    if result.get("api_ratio") is not None:
        print(
            f"{label}: log_batch Headway {result['api_headway_points_per_s']:,.0f} points/s, "
            f"MLflow {result['api_mlflow_points_per_s']:,.0f} points/s: "
            f"{result['api_ratio']}x {result['api_ratio_range']} (goal >= {TARGET_API_RATIO}x, "
            f"met {result['api_target_met']}); the client's encoding alone "
            f"{result['api_client_encode_ms_per_call']} ms a call (ceiling "
            f"{result['api_client_ceiling_points_per_s']:,} points/s); "
            f"verified {result['api_verified']}",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=pick(200, 10), help="batches a fit")
    parser.add_argument("--rounds", type=int, default=pick(3, 1))
    parser.add_argument("--kinds", default=",".join(lit.KINDS), help="Lightning rows")
    parser.add_argument("--batches", type=int, default=pick(30, 2), help="log_batch to Headway")
    parser.add_argument("--mlflow-batches", type=int, default=pick(6, 2), help="to MLflow")
    parser.add_argument("--batch-size", type=int, default=MLFLOW_MAX_BATCH, help="metrics a call")
    parser.add_argument("--keys", type=int, default=10, help="metric names a batch")
    parser.add_argument("--no-postgres", action="store_true", help="Headway on SQLite only")
    args = parser.parse_args()
    kinds = args.kinds.split(",")
    if not set(kinds) <= set(lit.KINDS) or "none" not in kinds:
        parser.error(f"--kinds: a subset of {','.join(lit.KINDS)} holding none")
    if not 1 <= args.batch_size <= MLFLOW_MAX_BATCH or not 1 <= args.keys <= args.batch_size:
        parser.error(f"--batch-size: 1..{MLFLOW_MAX_BATCH}; --keys: 1..--batch-size")
    if min(args.steps, args.rounds, args.batches, args.mlflow_batches) < 1:
        parser.error("--steps, --rounds, --batches and --mlflow-batches: at least 1")
    lit.quiet()
    import torch

    # One thread: the servers share the 2 cores, and a spinning second OpenMP thread is load.
    torch.set_num_threads(1)
    os.environ.setdefault("HEADWAY_SYSTEM_METRICS", "0")  # MLFlowLogger samples none either
    os.environ.setdefault("MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT", "true")  # a line a run
    mlflow_url = POSTGRES_URL.rsplit("/", 1)[0] + f"/headway_bench_logging_mlflow_{os.getpid()}"
    missing = mlflow_server_missing(mlflow_url)
    figures: dict[str, Any] = {
        "steps": args.steps,
        "rounds": args.rounds,
        "batch_size": args.batch_size,
        "keys": args.keys,
        "mlflow_not_measured": missing,
        "load_before": round(os.getloadavg()[0], 2),
    }
    if missing is not None:
        print(f"note: MLflow not measured ({missing}); its rows are null", flush=True)
        kinds = [k for k in kinds if not k.startswith("mlflow")]
    kind = "serve" if gunicorn_available() else "runserver"
    with ExitStack() as stack:
        urls = {"mlflow": ""}
        if missing is None:
            urls["mlflow"] = stack.enter_context(MlflowServer(mlflow_url)).url
        for make in backend_factories(POSTGRES_URL, postgres=not args.no_postgres):
            backend: Backend = make()
            try:
                token = backend.prepare()
                with Server(backend, kind) as server:
                    urls["headway"] = server.url
                    print(f"measuring {backend.label} ({kind}) ...", flush=True)
                    result = measure_lightning(urls, token, kinds, args)
                    if missing is None:
                        result.update(measure_api(urls, token, args))
            finally:
                backend.cleanup()
            for key in ("overhead_mlflow_pct", "overhead_mlflow_async_pct", "api_ratio"):
                result.setdefault(key, None)  # not measured: the same keys, null
            print_rows(backend.label, result, kinds)
            figures.update({f"{backend.label}_{k}": v for k, v in result.items()})
    figures["load_after"] = round(os.getloadavg()[0], 2)
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
