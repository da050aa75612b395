"""Markdown notes (experiments, trials) rendered to safe HTML on the server.

The text is converted with Python-Markdown and the result sanitised with ``nh3`` (ammonia), so
nothing a note says runs in the page: raw HTML other than the formatting tags below is dropped
(``<script>`` and ``<style>`` with their content), event attributes (``onerror=``) never pass,
links keep only ``http``, ``https`` and ``mailto`` targets (``javascript:`` is removed) and get
``rel="noopener noreferrer"``. Images are not allowed: the page's CSP would block most of them and
a remote image would tell its server who read the note.
"""

from __future__ import annotations

import markdown
import nh3
from django.utils.safestring import SafeString, mark_safe

ALLOWED_TAGS = {
    "a", "abbr", "b", "blockquote", "br", "code", "del", "em", "h1", "h2", "h3", "h4", "h5",
    "h6", "hr", "i", "li", "ol", "p", "pre", "strong", "sub", "sup", "table", "tbody", "td",
    "th", "thead", "tr", "ul",
}  # fmt: skip
ALLOWED_ATTRIBUTES = {"a": {"href", "title"}, "abbr": {"title"}, "th": {"align"}, "td": {"align"}}
URL_SCHEMES = {"http", "https", "mailto"}
# GitHub-like Markdown: ``` code blocks, tables, lists that do not need a blank line before.
EXTENSIONS = ["fenced_code", "tables", "sane_lists"]


def render_markdown(text: str) -> SafeString:
    """``text`` (Markdown; may hold raw HTML) as sanitised HTML, safe to insert into a page.

    Empty or whitespace-only text renders as ``""``.
    """
    if not text or not text.strip():
        return mark_safe("")
    html = markdown.markdown(text, extensions=EXTENSIONS, output_format="html")
    clean = nh3.clean(
        html,
        tags=ALLOWED_TAGS,
        attributes=ALLOWED_ATTRIBUTES,
        url_schemes=URL_SCHEMES,
        link_rel="noopener noreferrer",
    )
    return mark_safe(clean)  # sanitised by nh3 just above
