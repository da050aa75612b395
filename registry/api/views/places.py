"""``?project=`` and ``?workspace=`` on experiment lists: where the experiments live.

One definition for the REST list and the dashboard's list (which reads the same parameters).
"""

from __future__ import annotations

from django.db.models import QuerySet

from registry.api.params import int_query_parameter, optional_int_param
from registry.models import Experiment

_ID_MAX = 2**63 - 1

PLACE_PARAMETERS = [
    int_query_parameter("project", lo=1, hi=_ID_MAX, description="Only this project's."),
    int_query_parameter("workspace", lo=1, hi=_ID_MAX, description="Only this workspace's."),
]


def filter_by_place(request, qs: QuerySet[Experiment]) -> QuerySet[Experiment]:
    """``qs`` narrowed to ``?project=`` and ``?workspace=`` (ids; both may be given).

    Raises:
        InvalidInput: naming the parameter when it is not an id (or repeated).
    """
    project = optional_int_param(request, "project", lo=1, hi=_ID_MAX)
    if project is not None:
        qs = qs.filter(project_id=project)
    workspace = optional_int_param(request, "workspace", lo=1, hi=_ID_MAX)
    if workspace is not None:
        qs = qs.filter(project__workspace_id=workspace)
    return qs
