"""The rules for the tar archives Headway makes and accepts, in one place.

Two kinds of archive cross a trust boundary:

* **Model definitions.** ``headway experiment create`` packs a directory with
  ``pack_model_definition``; the registry checks the upload with ``check_model_definition`` before
  storing it, and workers unpack it with ``extract_model_definition``. The packer and the checker
  share the rules and the messages below, so the CLI refuses, before anything is sent, what the
  registry would refuse, in the registry's words.
* **Checkpoint tars** streamed by ``headway.storage.iter_tar_chunks``: every member name passes
  ``check_member_path``, as every checkpoint file path in storage does.

A model definition (docs/decisions/checkpoints.md, "Model-definition archives"):

- member paths are relative, without ``..``, backslashes or NUL characters (``check_member_path``);
- members are regular files and folders only: no symbolic or hard links, devices or FIFOs. The
  packer stores a copy of the file that a symbolic link inside the directory points to, under the
  link's name; it refuses links that leave the directory, broken links and links to folders with
  the message the registry gives for the same link;
- the archive is at most ``max_bytes`` packed (``MAX_MODEL_DEF_BYTES`` unless the registry's
  ``HEADWAY_MAX_MODEL_DEF_BYTES`` says otherwise), ``UNPACKED_FACTOR * max_bytes`` unpacked, and
  holds at most ``MAX_MEMBERS`` files and folders;
- the packer leaves out ``SKIP_NAMES`` (``.git``, ``__pycache__``), ``*.pyc`` files and anything
  that is neither a file, a folder nor a symbolic link (sockets, FIFOs, devices).

When an archive breaks several rules, the first problem found is reported. Never imports Django.
"""

from headway.archive._check import (
    check_entrypoint_class,
    check_member,
    check_model_definition,
    extract_model_definition,
)
from headway.archive._extract import UnsafeTarMember, safe_extractall
from headway.archive._isolated import (
    CHECK_MEMORY_BYTES,
    CHECK_TIMEOUT_SECONDS,
    check_model_definition_isolated,
    clip_message,
)
from headway.archive._pack import pack_model_definition
from headway.archive._rules import (
    MAX_MEMBERS,
    MAX_MODEL_DEF_BYTES,
    SKIP_NAMES,
    SKIP_SUFFIXES,
    UNPACKED_FACTOR,
    EntrypointNotFound,
    ModelDefinitionError,
    ModelDefinitionTooLarge,
    UnsafeArchivePath,
    check_member_path,
)
from headway.archive._scan import MAX_EXTENDED_HEADER_BYTES, prescan_tar_gz

__all__ = [
    "CHECK_MEMORY_BYTES",
    "CHECK_TIMEOUT_SECONDS",
    "MAX_EXTENDED_HEADER_BYTES",
    "MAX_MEMBERS",
    "MAX_MODEL_DEF_BYTES",
    "SKIP_NAMES",
    "SKIP_SUFFIXES",
    "UNPACKED_FACTOR",
    "EntrypointNotFound",
    "ModelDefinitionError",
    "ModelDefinitionTooLarge",
    "UnsafeArchivePath",
    "UnsafeTarMember",
    "check_entrypoint_class",
    "check_member",
    "check_member_path",
    "check_model_definition",
    "check_model_definition_isolated",
    "clip_message",
    "extract_model_definition",
    "pack_model_definition",
    "prescan_tar_gz",
    "safe_extractall",
]
