"""The calls to an identity provider (services/oidc_http.py) end within their deadline
whatever part of the exchange hangs, the name lookup included (getaddrinfo has no
timeout of its own)."""

import socket
import threading
import types

import pytest

from services import oidc_http

PRIVATE_OK = types.SimpleNamespace(oidc_allow_private_issuers=True)


def test_a_name_lookup_that_hangs_ends_in_a_timeout(monkeypatch):
    released = threading.Event()
    real = socket.getaddrinfo

    def hanging(host, *args, **kwargs):
        if host == 'hangs.example':
            released.wait(30)
        return real('127.0.0.1', *args, **kwargs)

    monkeypatch.setattr(socket, 'getaddrinfo', hanging)
    monkeypatch.setattr(oidc_http, 'TIMEOUT_SECONDS', 0.3)
    try:
        with pytest.raises(oidc_http.ProviderError) as refused:
            oidc_http.request_json(PRIVATE_OK, 'GET', 'http://hangs.example/x')
        assert refused.value.reason == 'timeout'
        assert 'did not resolve' in refused.value.message
    finally:
        released.set()


def test_a_name_that_does_not_resolve_is_unreachable():
    with pytest.raises(oidc_http.ProviderError) as refused:
        oidc_http.request_json(PRIVATE_OK, 'GET', 'http://no-such-host.invalid/x')
    assert refused.value.reason == 'unreachable'
