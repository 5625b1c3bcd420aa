"""The one JSON parser of every reader: what json.loads accepts silently or dies on is an error
that names the line."""

from __future__ import annotations

import json

import pytest

from zrodlo.storage.jsonfile import JSONLimit, loads


def test_valid_json_parses_as_json_loads_parses_it():
    text = '{"a": [1, -2, 3.5, "x\\"y", {"b": null}], "c": true, "d": 1e3}'
    assert loads(text) == json.loads(text)
    assert loads(text.encode()) == json.loads(text)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{\n"a": 1,\n"b": {"c": 2, "c": 3}}', 'an object repeats the key "c" on line 3'),
        ('{"a": 1,\n\n "a": 2}', 'an object repeats the key "a" on line 3'),
        ("[1,\n" + "7" * 4301 + "]", "an integer has more than 4300 digits on line 2"),
        ("\n" + "[" * 100_000 + "]" * 100_000, "values nest more than 500 levels deep on line 2"),
    ],
)
def test_a_repeated_key_a_huge_integer_and_deep_nesting_name_their_line(text, message):
    with pytest.raises(JSONLimit) as refused:
        loads(text)
    assert str(refused.value) == message
    assert isinstance(refused.value, json.JSONDecodeError)


def test_keys_repeat_freely_in_different_objects():
    assert loads('[{"a": 1}, {"a": 2}, {"b": {"a": 3}}]') == [{"a": 1}, {"a": 2}, {"b": {"a": 3}}]
