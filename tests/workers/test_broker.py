"""``workers.broker``: the Celery settings both apps use. Its Redis transport is tested where
the failure it prevents happens, a worker whose running task outlives a broker restart
(e2e_tests/workers/test_faults_broker_outage.py)."""

from __future__ import annotations

from workers.broker import celery_broker_settings


def test_settings_keep_the_transport_options_and_bound_redis_connection_attempts():
    files = {"data_folder_in": "/x"}
    assert celery_broker_settings("filesystem://", files)["broker_transport_options"] == files
    assert "broker_transport" not in celery_broker_settings("filesystem://", files)
    redis = celery_broker_settings("redis://h:6379/0", {"visibility_timeout": 60})
    assert redis["broker_transport"] == "workers.broker:RedisTransport"
    assert redis["broker_transport_options"] == {
        "visibility_timeout": 60,
        "socket_connect_timeout": 5.0,
    }
    assert redis["broker_connection_max_retries"] is None
    assert redis["worker_cancel_long_running_tasks_on_connection_loss"] is False
    # An admin's own connect timeout wins.
    own = celery_broker_settings("redis://h", {"socket_connect_timeout": 1})
    assert own["broker_transport_options"]["socket_connect_timeout"] == 1
