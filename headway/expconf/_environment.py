"""``environment``: what the trial process's environment holds (Determined's ``environment``).

Determined runs each trial in a container, so its ``environment`` section also names the image,
pod spec, capabilities and ports of that container. Headway runs a trial as a process on the
worker host (``workers/runner.py``), so only ``environment_variables`` has a meaning here; the
container fields are refused with a message saying so, never accepted and ignored.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from headway.expconf._base import StrictModel, reject_unsupported

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Set by the worker for every trial (workers/runner.py); a config value would be overridden.
RESERVED_PREFIX = "HEADWAY_"

_NO_CONTAINER = (
    "Headway runs a trial as a process on the worker host, not in a container, so there is no "
    "{what} to configure; install packages with a startup-hook.sh at the top of the model "
    "directory (docs/config.md, 'entrypoint') and set variables with "
    "environment.environment_variables"
)
UNSUPPORTED_ENVIRONMENT: dict[str, str] = {
    "image": _NO_CONTAINER.format(what="container image"),
    "force_pull_image": _NO_CONTAINER.format(what="container image"),
    "registry_auth": _NO_CONTAINER.format(what="image registry"),
    "pod_spec": _NO_CONTAINER.format(what="Kubernetes pod"),
    "add_capabilities": _NO_CONTAINER.format(what="container capability"),
    "drop_capabilities": _NO_CONTAINER.format(what="container capability"),
    "proxy_ports": _NO_CONTAINER.format(what="proxied container port"),
    "ports": _NO_CONTAINER.format(what="container port"),
}

_Assignments = list[Annotated[str, Field(min_length=1)]]


def parse_assignments(values: list[str]) -> dict[str, str]:
    """``["NAME=VALUE", ...]`` -> ``{NAME: VALUE}`` (the value may hold ``=``; later wins).

    Raises:
        ValueError: for an entry without ``=``, a name that is not a shell variable name, or a
            name starting with ``HEADWAY_`` (the worker sets those for every trial).
    """
    out: dict[str, str] = {}
    for entry in values:
        name, sep, value = entry.partition("=")
        if not sep or not _NAME.match(name):
            raise ValueError(f"{entry!r}: each entry must be NAME=VALUE with a variable name")
        if name.startswith(RESERVED_PREFIX):
            raise ValueError(
                f"{name}: variables starting with {RESERVED_PREFIX} are set by Headway for "
                "every trial and cannot be overridden"
            )
        out[name] = value
    return out


class EnvironmentVariablesByDevice(StrictModel):
    """Determined's per-device form: ``{cpu: [...], cuda: [...], rocm: [...]}``."""

    cpu: _Assignments = Field(default_factory=list)
    cuda: _Assignments = Field(default_factory=list)
    rocm: _Assignments = Field(default_factory=list)

    @field_validator("cpu", "cuda", "rocm")
    @classmethod
    def _check(cls, value: list[str]) -> list[str]:
        parse_assignments(value)
        return value


class EnvironmentConfig(StrictModel):
    """``environment``: ``environment_variables`` reach every process of every run of a trial.

    Attributes:
        environment_variables (list[str] | EnvironmentVariablesByDevice): ``NAME=VALUE``
            entries, for every host (a list) or per device type (``cpu`` on hosts without GPUs,
            ``cuda`` on GPU hosts; ``rocm`` is accepted as Determined's schema has it, and no
            Headway host is a ROCm host). They are set after the worker's base environment and
            before Headway's own ``HEADWAY_*`` variables, so ``PATH`` and the like can be
            changed; the startup hook and the entrypoint both see them.

    Container fields (``image``, ``pod_spec``, ...) are refused (``UNSUPPORTED_ENVIRONMENT``).
    """

    environment_variables: _Assignments | EnvironmentVariablesByDevice = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _refuse_container_fields(cls, data: Any) -> Any:
        return reject_unsupported(data, UNSUPPORTED_ENVIRONMENT)

    @field_validator("environment_variables")
    @classmethod
    def _check(cls, value: Any) -> Any:
        if isinstance(value, list):
            parse_assignments(value)
        return value

    def variables(self, device: Literal["cpu", "cuda", "rocm"]) -> dict[str, str]:
        """The variables a trial process on a host with ``device`` slots gets (``{NAME: VALUE}``)."""
        values = self.environment_variables
        if isinstance(values, EnvironmentVariablesByDevice):
            return parse_assignments(getattr(values, device))
        return parse_assignments(values)
