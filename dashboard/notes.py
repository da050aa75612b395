"""Markdown notes (experiments, trials) rendered to safe HTML on the server, once per text.

The text is converted with markdown-it-py (CommonMark plus GitHub's tables and ``~~strikethrough~~``)
and the result sanitised with ``nh3`` (ammonia), so nothing a note says runs in the page: raw HTML
other than the formatting tags below is dropped (``<script>`` and ``<style>`` with their content),
event attributes (``onerror=``) never pass, links keep only ``http``, ``https`` and ``mailto``
targets (``javascript:`` is removed) and get ``rel="noopener noreferrer"``. Images are not allowed:
the page's CSP would block most of them and a remote image would tell its server who read the note.

Time is bounded twice. markdown-it-py parses in time linear in the text (CommonMark's delimiter
and bracket algorithms; nesting stops at 20 levels), so a note at the 100,000-character limit
(``registry.user_text.NOTES_MAX``) renders in about a second whatever it holds; Python-Markdown,
used before, took minutes on a run of ``[`` characters. And the HTML is kept in Django's cache
under a hash of the text, so each note is rendered once, not on every view.
"""

from __future__ import annotations

import hashlib

import nh3
from django.core.cache import cache
from django.utils.safestring import SafeString, mark_safe
from markdown_it import MarkdownIt

ALLOWED_TAGS = {
    "a", "abbr", "b", "blockquote", "br", "code", "del", "em", "h1", "h2", "h3", "h4", "h5",
    "h6", "hr", "i", "li", "ol", "p", "pre", "s", "strong", "sub", "sup", "table", "tbody", "td",
    "th", "thead", "tr", "ul",
}  # fmt: skip
ALLOWED_ATTRIBUTES = {"a": {"href", "title"}, "abbr": {"title"}, "th": {"align"}, "td": {"align"}}
URL_SCHEMES = {"http", "https", "mailto"}
# GitHub-like Markdown: CommonMark (``` code blocks, lists, raw HTML, which nh3 then filters)
# with tables and strikethrough.
_PARSER = MarkdownIt("commonmark").enable(["table", "strikethrough"])
# Part of the cache key: bump it when the parser, its options or the sanitiser's rules change,
# so no page shows HTML made under the old rules.
RENDER_VERSION = 2
CACHE_SECONDS = 7 * 24 * 3600


def _cache_key(text: str) -> str:
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
    return f"notes-html:v{RENDER_VERSION}:{digest}"


def render_markdown(text: str) -> SafeString:
    """``text`` (Markdown; may hold raw HTML) as sanitised HTML, safe to insert into a page.

    Empty or whitespace-only text renders as ``""``. The HTML comes from Django's cache when this
    text was rendered before (key: a SHA-256 of the text), else it is rendered (linear time; about
    a second at the 100,000-character limit in the worst case) and cached for a week.
    """
    if not text or not text.strip():
        return mark_safe("")
    key = _cache_key(text)
    clean = cache.get(key)
    if not isinstance(clean, str):
        clean = nh3.clean(
            _PARSER.render(text),
            tags=ALLOWED_TAGS,
            attributes=ALLOWED_ATTRIBUTES,
            url_schemes=URL_SCHEMES,
            link_rel="noopener noreferrer",
        )
        cache.set(key, clean, CACHE_SECONDS)
    return mark_safe(clean)  # sanitised by nh3 (before it was cached)
