"""A ``shared_fs`` storage that is not one file system everywhere.

The marker the chief host writes and the other hosts read (``headway.storage._shared_fs_check``),
and the master's answer for a checkpoint on a folder it cannot list. The refusal of a real run
over two namespaced hosts is in e2e_tests/workers/test_multihost_netns.py.
"""

from __future__ import annotations

import os
import shutil

import pytest

from headway.storage import _shared_fs_check as check
from tests.helpers_checkpoints import store_over_rest, trial_on_storage


def test_a_host_sees_the_marker_of_this_start_only(tmp_path):
    base = tmp_path / "checkpoints"
    check.write_marker(base, 7, 2, "10.0.0.4:29500")
    assert check.marker_matches(base, 7, 2, "10.0.0.4:29500")
    # Another start of the run publishes another port: an old marker does not pass for it.
    assert not check.marker_matches(base, 7, 2, "10.0.0.4:29501")
    assert not check.marker_matches(base, 7, 3, "10.0.0.4:29500")
    # A host whose folder of that name is its own (not shared) has no marker at all.
    assert not check.marker_matches(tmp_path / "elsewhere", 7, 2, "10.0.0.4:29500")
    check.remove_marker(base, 7, 2)
    assert not check.marker_matches(base, 7, 2, "10.0.0.4:29500")
    check.remove_marker(base, 7, 2)  # twice is fine


def test_the_refusal_names_the_storage_and_the_hosts(tmp_path):
    storage = {"type": "shared_fs", "host_path": str(tmp_path), "storage_path": "runs"}
    assert check.shared_fs_base(storage) == tmp_path / "runs"
    assert check.shared_fs_base({"type": "s3", "bucket": "b"}) is None
    message = check.refusal(storage, "gpu-a", ["gpu-b"])
    assert f"shared_fs {tmp_path / 'runs'}" in message
    assert "hosts gpu-a and gpu-b" in message and "host gpu-b cannot read" in message


def test_the_master_knows_a_folder_it_cannot_list_from_a_deleted_checkpoint(tmp_path):
    storage = {"type": "shared_fs", "host_path": str(tmp_path / "mnt")}
    (tmp_path / "mnt").mkdir()
    assert check.unreadable_message(storage, "abc") is None  # listed, missing: deleted
    os.rmdir(tmp_path / "mnt")
    message = check.unreadable_message(storage, "abc")
    assert message == (
        f"checkpoint abc is on shared_fs {tmp_path / 'mnt'} which this server cannot read: "
        "that folder must be the same file system on the master as on the hosts that train."
    )
    assert check.unreadable_message({"type": "s3", "bucket": "b"}, "abc") is None


@pytest.mark.django_db
def test_downloading_a_checkpoint_from_a_folder_the_server_cannot_list_says_so(api, tmp_path):
    storage = {"type": "shared_fs", "host_path": str(tmp_path / "mounted")}
    trial = trial_on_storage(api, storage)
    storage_id = store_over_rest(api, trial, {"state-dict.pth": b"w" * 10}, 10)
    shutil.rmtree(tmp_path / "mounted")  # as if the folder were not mounted on the master
    response = api.get(f"/api/v1/checkpoints/{storage_id}/download")
    assert response.status_code == 409
    assert response.json()["detail"].startswith(
        f"checkpoint {storage_id} is on shared_fs {tmp_path / 'mounted'} which this server "
        "cannot read"
    )
