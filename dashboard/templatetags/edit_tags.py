"""Template helpers of the edit forms and notes: rendered Markdown, who may edit, label lines."""

from __future__ import annotations

from typing import Any

from django import template
from django.utils.safestring import SafeString

from dashboard.notes import render_markdown
from registry.authz import can_change

register = template.Library()


@register.filter
def markdown_notes(text: str | None) -> SafeString:
    """Markdown ``text`` as sanitised HTML (``dashboard.notes.render_markdown``)."""
    return render_markdown(text or "")


@register.simple_tag(takes_context=True)
def can_edit(
    context: template.Context, owner_id: int | None, workspace_id: int | None = None
) -> bool:
    """True when the page's user may change the object (``owner_id``, in ``workspace_id``):
    the rule the edit views and the REST API apply (``registry.authz.can_change``), so only
    they see the edit controls."""
    request = context.get("request")
    return can_change(getattr(request, "user", None), owner_id, workspace_id)


@register.filter
def label_line(labels: Any) -> str:
    """A list of labels as the comma-separated line the labels box edits."""
    return ", ".join(str(label) for label in labels or ())
