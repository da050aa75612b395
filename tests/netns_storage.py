"""A namespaced cluster's checkpoint storage (``tests.netns_cluster.NetnsCluster`` mixes it in):
the admin's storage locations file, and ``checkpoint_storage`` configs on its moto S3 and its
``shared_fs`` folders."""

from __future__ import annotations

import contextlib
from pathlib import Path

from tests.netns_master import S3_KEYS


class ClusterStorage:
    """Needs ``base`` (a folder), ``shared_fs`` (``{name: folder}``) and ``s3_url``."""

    base: Path
    shared_fs: dict[str, str]
    s3_url: str

    def storage_locations(self) -> str:
        """The admin's storage locations file: the ``shared_fs`` folders (``shared`` and those
        given) and the moto server's bucket ``checkpoints`` (location ``s3``)."""
        path = self.base / "storage-locations.yaml"
        lines = ["default: shared", "locations:"]
        for name, folder in self.shared_fs.items():
            Path(folder).mkdir(parents=True, exist_ok=True)
            lines.append(f"  {name}: {{type: shared_fs, host_path: '{folder}'}}")
        lines.append(f"  s3: {{type: s3, bucket: checkpoints, endpoint_url: '{self.s3_url}'}}")
        path.write_text("\n".join(lines) + "\n")
        return str(path)

    def s3_storage(self, prefix: str = "") -> dict:
        """A ``checkpoint_storage`` in the cluster's S3 bucket ``checkpoints`` (created on
        first use), under ``prefix``."""
        import boto3

        client = boto3.client("s3", endpoint_url=self.s3_url, **S3_KEYS)
        with contextlib.suppress(client.exceptions.BucketAlreadyOwnedByYou):
            client.create_bucket(Bucket="checkpoints")
        storage = {"type": "s3", "bucket": "checkpoints", "endpoint_url": self.s3_url}
        return {**storage, "prefix": prefix} if prefix else storage

    def shared_storage(self, name: str = "shared") -> dict:
        """A ``checkpoint_storage`` on the ``shared_fs`` location ``name``."""
        return {"type": "shared_fs", "host_path": self.shared_fs[name]}
