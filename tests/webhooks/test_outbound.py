"""The shared outbound-URL rules (``config.outbound``) and the signature (``webhooks.signing``)."""

from __future__ import annotations

import pytest

from config.outbound import endpoint_keys, outbound_url_error, url_origin
from webhooks.signing import signature, verify


def test_url_origin():
    assert url_origin("https://Hooks.Example.com/a/b?c=1") == ("https", "hooks.example.com", 443)
    assert url_origin("http://h:8080") == ("http", "h", 8080)
    for bad in ("ftp://h/x", "http://u:p@h/", "http:///x", "http://h/#frag", "http://h:99999/"):
        assert url_origin(bad) is None, bad


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1/",
        "http://[::1]/",
        "http://10.0.0.1/",
        "http://172.16.0.1/",
        "http://169.254.169.254/",
        "http://[fe80::1]/",
        "http://224.0.0.1/",
        "http://0.0.0.0/",
        "http://[::ffff:127.0.0.1]/",
        "http://localhost:9000/",
    ],
)
def test_non_global_addresses_are_refused(url):
    assert "address the master does not call" in str(outbound_url_error(url, allowed=set()))


def test_allowed_endpoints_pass_and_only_them():
    allowed = endpoint_keys(["http://127.0.0.1:9000", "not a url"])
    assert allowed == {("http", "127.0.0.1", 9000)}
    assert outbound_url_error("http://127.0.0.1:9000/hook?x=1", allowed=allowed) is None
    assert outbound_url_error("http://127.0.0.1:9001/hook", allowed=allowed) is not None
    assert outbound_url_error("https://127.0.0.1:9000/hook", allowed=allowed) is not None


def test_global_addresses_pass():
    assert outbound_url_error("https://93.184.215.14/x", allowed=set()) is None


def test_signature_verifies_and_refuses_tampering_and_old_timestamps():
    body = b'{"id":"e1"}'
    header = signature("secret-of-the-hook", body, 1_700_000_000)
    assert header.startswith("t=1700000000,v1=")
    assert verify("secret-of-the-hook", body, header, now=1_700_000_100)
    assert not verify("secret-of-the-hook", body + b" ", header, now=1_700_000_100)
    assert not verify("another-secret", body, header, now=1_700_000_100)
    assert not verify("secret-of-the-hook", body, header, now=1_700_000_000 + 301)
    assert not verify("secret-of-the-hook", body, "v1=abc", now=1_700_000_000)
