"""Pure core logic, no I/O."""

from __future__ import annotations

import itertools

import pytest

from headwater.domain import ids
from headwater.domain.errors import BadRequest
from headwater.domain.pagination import PageRequest, decode_cursor, encode_cursor, page_request, paginate
from headwater.domain.slugs import candidate_slugs, slugify
from headwater.domain.urls import address_allowed, check_http_url


def test_ids_have_prefix_and_entropy() -> None:
    made = {ids.new_id("source") for _ in range(1000)}
    assert len(made) == 1000
    assert all(i.startswith("dc_") and len(i) >= 23 for i in made)
    key = ids.new_api_key()
    assert key.startswith("hw_") and len(key) >= 35
    assert ids.hash_api_key(key) != key and len(ids.hash_api_key(key)) == 64


def test_cursor_round_trip_and_garbage() -> None:
    assert decode_cursor(encode_cursor(42), "after") == 42
    for bad in ("", "!!", encode_cursor(-1), "eyJzIjoieCJ9"):
        with pytest.raises(BadRequest):
            decode_cursor(bad, "after")


def test_paginate_both_ways() -> None:
    rows = [(n, f"item{n}") for n in range(1, 26)]
    first = paginate(rows, PageRequest(limit=10))
    assert first.items == [f"item{n}" for n in range(25, 15, -1)]
    second = paginate(rows, PageRequest(limit=10, after=first.seqs[-1]))
    assert second.items[0] == "item15" and len(second.items) == 10
    newer = paginate(rows, PageRequest(limit=10, before=second.seqs[0]))
    assert newer.items == first.items
    assert paginate(rows, PageRequest(limit=10, before=25)).items == []


def test_page_request_limits() -> None:
    assert page_request(None, None, None).limit == 10
    assert page_request("100", None, None).limit == 100
    for bad in ("0", "101", "-1", "ten"):
        with pytest.raises(BadRequest):
            page_request(bad, None, None)
    with pytest.raises(BadRequest):
        page_request(None, encode_cursor(1), encode_cursor(2))


def test_slugs() -> None:
    assert slugify("My HTTP Source!") == "my-http-source"
    assert slugify("***") == "component"
    assert list(itertools.islice(candidate_slugs("a"), 3)) == ["a", "a-1", "a-2"]


def test_url_checks() -> None:
    assert check_http_url("https://example.com:8443/x?y") is None
    assert check_http_url("ftp://example.com") == "must use http or https"
    assert check_http_url("http://") == "must have a hostname"
    assert address_allowed("127.0.0.1", allow_loopback=True, allow_private=False)
    assert not address_allowed("127.0.0.1", allow_loopback=False, allow_private=False)
    assert not address_allowed("10.0.0.1", allow_loopback=True, allow_private=False)
    assert not address_allowed("169.254.169.254", allow_loopback=True, allow_private=False)
    assert not address_allowed("::ffff:10.0.0.1", allow_loopback=True, allow_private=False)
    assert address_allowed("93.184.216.34", allow_loopback=False, allow_private=False)
