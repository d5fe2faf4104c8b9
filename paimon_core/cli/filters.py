"""``--filter`` text to the DNF tuples :meth:`paimon_core.Table.read` takes.

Two spellings: the API's own DNF as JSON (``[["dt", "=", "2024-01-01"], ["id", ">", 5]]``, or a
list of such lists for OR), or SQL-ish conditions joined by AND / OR (AND binds tighter, as in SQL;
no parentheses, so every filter is already in disjunctive normal form)::

    dt = '2024-01-01' AND id > 5 OR status IN ('new', 'open') AND note IS NOT NULL

Values are passed on as typed (numbers and bare words as text); the table converts each to its
column's type and names the column when a value does not fit.
"""

from __future__ import annotations

import json
import re
from typing import Any

DNF = list[list[tuple[str, str, Any]]]

_TOKEN = re.compile(r"""
    \s*(?:
      (?P<string>'(?:[^']|'')*')            # 'text', '' for a quote
    | (?P<quoted>`[^`]+`|"[^"]+")           # `column` or "column"
    | (?P<op><=|>=|!=|<>|==|=|<|>)
    | (?P<punct>[(),])
    | (?P<word>[^\s(),'=<>!]+)
    )""", re.VERBOSE)


class FilterSyntaxError(ValueError):
    """A ``--filter`` that is neither DNF JSON nor ``col op value [AND|OR ...]``."""


def parse_filter_text(text: str) -> DNF:
    """The DNF of a ``--filter`` argument (see the module docstring for the grammar)."""
    stripped = text.strip()
    if not stripped:
        raise FilterSyntaxError("--filter is empty")
    if stripped.startswith("["):
        return _from_json(stripped)
    tokens = _tokens(stripped)
    disjunction: DNF = []
    for conjunction in _split(tokens, "or"):
        disjunction.append([_condition(part) for part in _split(conjunction, "and")])
    return disjunction


def _from_json(text: str) -> DNF:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise FilterSyntaxError(f"--filter {text!r} is not valid JSON: {exc.msg}") from None
    if not isinstance(value, list) or not value:
        raise FilterSyntaxError(f"--filter {text!r}: want a list of [column, op, value] triples")
    conjunctions = value if all(isinstance(c, list) and c and isinstance(c[0], list) for c in value) else [value]
    out: DNF = []
    for conjunction in conjunctions:
        terms = []
        for term in conjunction:
            if not isinstance(term, list) or len(term) != 3 or not isinstance(term[0], str):
                raise FilterSyntaxError(f"--filter term {json.dumps(term)} is not [column, op, value]")
            terms.append((term[0], str(term[1]).lower(), tuple(term[2]) if isinstance(term[2], list) else term[2]))
        out.append(terms)
    return out


def _tokens(text: str) -> list[tuple[str, str]]:
    """(kind, text) pairs; kind is string, name, op, punct or word."""
    tokens: list[tuple[str, str]] = []
    position = 0
    while position < len(text):
        match = _TOKEN.match(text, position)
        if not match or match.end() == position:
            if text[position:].strip() == "":
                break
            raise FilterSyntaxError(f"--filter: cannot read {text[position:].strip()!r} in {text!r}")
        kind = match.lastgroup or "word"
        value = match.group(kind)
        if kind == "string":
            value = value[1:-1].replace("''", "'")
        elif kind == "quoted":
            kind, value = "name", value[1:-1]
        tokens.append((kind, value))
        position = match.end()
    return tokens


def _split(tokens: list[tuple[str, str]], keyword: str) -> list[list[tuple[str, str]]]:
    """Split at a bare AND / OR keyword (not inside an IN list)."""
    parts: list[list[tuple[str, str]]] = [[]]
    depth = 0
    for kind, value in tokens:
        if kind == "punct" and value == "(":
            depth += 1
        elif kind == "punct" and value == ")":
            depth -= 1
        if depth == 0 and kind == "word" and value.lower() == keyword:
            parts.append([])
        else:
            parts[-1].append((kind, value))
    if any(not part for part in parts):
        raise FilterSyntaxError(f"--filter: {keyword.upper()} without a condition on each side")
    return parts


def _condition(tokens: list[tuple[str, str]]) -> tuple[str, str, Any]:
    shown = " ".join(value for _, value in tokens)
    if tokens[0][0] not in ("word", "name"):
        raise FilterSyntaxError(f"--filter condition {shown!r} does not start with a column name")
    column, rest = tokens[0][1], tokens[1:]
    words = [value.lower() if kind == "word" else None for kind, value in rest]
    if words in (["is", "null"], ["is", "not", "null"]):
        return column, " ".join(w for w in words if w), None
    if len(rest) == 2 and rest[0][0] == "op" and rest[1][0] in ("string", "word"):
        op = {"<>": "!=", "==": "="}.get(rest[0][1], rest[0][1])
        return column, op, rest[1][1]
    negated = words[:1] == ["not"]
    body = rest[1:] if negated else rest
    if body and body[0][0] == "word" and body[0][1].lower() == "in":
        return column, "not in" if negated else "in", _value_list(body[1:], shown)
    raise FilterSyntaxError(f"--filter condition {shown!r} is not 'column op value', 'column [NOT] IN (a, b)' "
                            "or 'column IS [NOT] NULL' (op: = != < <= > >=)")


def _value_list(tokens: list[tuple[str, str]], shown: str) -> tuple[Any, ...]:
    if len(tokens) < 3 or tokens[0] != ("punct", "(") or tokens[-1] != ("punct", ")"):
        raise FilterSyntaxError(f"--filter condition {shown!r}: IN wants a list such as ('a', 'b')")
    values = [value for kind, value in tokens[1:-1] if kind != "punct"]
    separators = [value for kind, value in tokens[1:-1] if kind == "punct"]
    if not values or separators != [","] * (len(values) - 1):
        raise FilterSyntaxError(f"--filter condition {shown!r}: IN wants values separated by commas")
    return tuple(values)
