"""Markdown notes render in bounded time and once per text: a note at the 100,000-character limit
made of the input that took Python-Markdown minutes (a run of ``[``) renders, and a second view of
the page takes the HTML from Django's cache instead of parsing again. The parser is markdown-it-py;
the test counts its calls by wrapping it (the real parser still runs)."""

from __future__ import annotations

import pytest
from django.core.cache import cache
from django.urls import reverse

from dashboard import notes
from registry.lifecycle import experiment_create
from registry.models import Experiment
from registry.user_text import NOTES_MAX
from tests.helpers import TINY_CONFIG, TINY_MODEL

pytestmark = pytest.mark.django_db


@pytest.fixture
def experiment(alice) -> Experiment:
    return experiment_create(owner=alice, config_source=TINY_CONFIG, model_definition=TINY_MODEL)


@pytest.fixture
def parser_calls(monkeypatch) -> list[str]:
    """The texts the Markdown parser was given, in order (the parser itself still runs)."""
    cache.clear()
    calls: list[str] = []
    render = notes._PARSER.render

    def counting(text: str, *args, **kwargs) -> str:
        calls.append(text)
        return render(text, *args, **kwargs)

    monkeypatch.setattr(notes._PARSER, "render", counting)
    return calls


def _notes_html(page: str) -> str:
    return page[page.index('id="notes-body"') : page.index('id="notes-edit"')]


def test_pathological_note_at_the_limit_renders_once_for_two_views(
    client_alice, experiment, parser_calls
) -> None:
    text = "[" * NOTES_MAX
    url = reverse("dashboard:experiment-notes", args=[experiment.id])
    assert client_alice.post(url, {"notes": text}).status_code == 302
    page_url = reverse("dashboard:experiment", args=[experiment.id])
    first = client_alice.get(page_url)
    second = client_alice.get(page_url)
    assert first.status_code == second.status_code == 200
    assert "[" * 1000 in _notes_html(first.content.decode())
    assert _notes_html(first.content.decode()) == _notes_html(second.content.decode())
    assert parser_calls == [text]


def test_an_edited_note_is_rendered_anew(client_alice, experiment, parser_calls) -> None:
    url = reverse("dashboard:experiment-notes", args=[experiment.id])
    page_url = reverse("dashboard:experiment", args=[experiment.id])
    client_alice.post(url, {"notes": "**first**"})
    assert "<strong>first</strong>" in _notes_html(client_alice.get(page_url).content.decode())
    client_alice.post(url, {"notes": "**second**"})
    html = _notes_html(client_alice.get(page_url).content.decode())
    assert "<strong>second</strong>" in html and "first" not in html
    assert parser_calls == ["**first**", "**second**"]


def test_github_style_tables_strikethrough_and_fenced_code() -> None:
    cache.clear()
    html = str(
        notes.render_markdown("|a|b|\n|-|-|\n|1|2|\n\n~~old~~\n\n```py\nx = 1\n```\n- no blank\n")
    )
    assert "<table>" in html and "<th>a</th>" in html and "<td>2</td>" in html
    assert "<s>old</s>" in html
    assert "<pre><code>x = 1\n</code></pre>" in html  # the language class is not let through
    assert "<li>no blank</li>" in html


def test_cached_html_is_sanitised_html_not_the_raw_text() -> None:
    cache.clear()
    text = "ok <script>alert(1)</script> [l](javascript:alert(2))"
    first = str(notes.render_markdown(text))
    assert first == str(notes.render_markdown(text))
    # markdown-it-py leaves a javascript: link as text; nh3 would drop its href besides.
    assert "<script" not in first and "href" not in first and "ok" in first
