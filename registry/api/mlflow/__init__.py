"""The MLflow-compatible API: the REST routes MLflow 3.x's tracking client calls, mapped onto
Headway's experiments, trials, metric store and storage locations (``MLFLOW_TRACKING_URI`` =
the master, ``MLFLOW_TRACKING_TOKEN`` = a user token). The master never imports ``mlflow``: these
modules speak its JSON wire protocol (``mlflow/protos/service.proto``). docs/logging-from-anywhere.md,
"MLflow client code", has the mapping.
"""
