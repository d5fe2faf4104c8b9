"""Paimon / SQL type names (``DECIMAL(12, 2)``, ``ROW<a INT, b ARRAY<STRING>>``) as written by users.

The schema JSON spells atomic types as SQL strings and nested types as JSON objects
(:mod:`paimon_core.types`); a user declaring a table in YAML writes the SQL spelling for both.
:func:`parse_type_name` reads that spelling, and :func:`arrow_field_for` turns it into the Arrow
field that :func:`paimon_core.schema.create_schema` accepts. Arrow cannot hold ``VARCHAR(20)``,
``CHAR(3)``, ``TIMESTAMP(1)`` or ``TIME(3)`` exactly, so the field carries the Paimon type in its
metadata under :data:`PAIMON_TYPE_KEY`, and the schema stores that type rather than the one the
Arrow type implies.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from typing import NoReturn

import pyarrow as pa

from paimon_core.errors import SchemaError, UnsupportedFeatureError
from paimon_core.types import (
    BINARY_ROOTS,
    MAX_LENGTH,
    STRING_ROOTS,
    ArrayType,
    AtomicType,
    DataField,
    DataType,
    MapType,
    RowType,
    parse_type_string,
    to_arrow_type,
    type_to_json,
    type_to_string,
)

PAIMON_TYPE_KEY = b"paimon.type"
"""Arrow field-metadata key holding the exact Paimon type, as schema JSON (``json.dumps``)."""

DESCRIPTION_KEY = b"description"

_EXAMPLES = ("BIGINT NOT NULL", "DECIMAL(12, 2)", "VARCHAR(20)", "TIMESTAMP(3)", "ARRAY<STRING>",
             "MAP<STRING, BIGINT>", "ROW<a INT, b STRING>")
_UNSUPPORTED = frozenset({"VARIANT", "BLOB", "GEOMETRY", "GEOGRAPHY", "VECTOR", "MULTISET"})
_NESTED = frozenset({"ARRAY", "MAP", "ROW"})
# Words allowed after an atomic type's root and parameters, before the nullability.
_TIME_ZONE_WORDS = frozenset({"WITH", "WITHOUT", "LOCAL", "TIME", "ZONE"})
# Most parameters each root takes (all optional); other roots take none.
_MAX_PARAMS = {"CHAR": 1, "VARCHAR": 1, "BINARY": 1, "VARBINARY": 1, "DECIMAL": 2, "NUMERIC": 2,
               "DEC": 2, "TIME": 1, "TIMESTAMP": 1, "TIMESTAMP_LTZ": 1}
_TOKEN = re.compile(
    r"(?P<space>\s+)|(?P<word>[A-Za-z_][A-Za-z0-9_]*)|(?P<number>\d+)"
    r"|(?P<quoted>`(?:[^`]|``)*`)|(?P<literal>'(?:[^']|'')*')|(?P<punct>[<>(),])"
)


@dataclass(frozen=True, slots=True)
class _Token:
    kind: str  # word, number, quoted, literal, punct, end
    text: str
    pos: int

    @property
    def upper(self) -> str:
        return self.text.upper() if self.kind == "word" else self.text


def parse_type_name(text: str) -> DataType:
    """Parse a Paimon / Flink SQL type name into a :mod:`paimon_core.types` data type.

    Accepts every atomic spelling of :func:`~paimon_core.types.parse_type_string` (``BIGINT``,
    ``DECIMAL(12, 2)``, ``TIMESTAMP(6) WITH LOCAL TIME ZONE``, ``TIMESTAMP_LTZ(6)``, ``STRING``...)
    and the nested forms ``ARRAY<T>``, ``MAP<K, V>``, ``ROW<name T, ...>`` and ``ROW(name T, ...)``,
    with optional backquoted field names, ``'description'`` literals after a ROW field type and
    ``NOT NULL`` at any level; keywords are case-insensitive. ROW fields get placeholder ids
    ``0..n-1`` per ROW: the table schema assigns the real ones.

    Raises:
        SchemaError: the text is not a type name, or a parameter is out of Paimon's range
            (DECIMAL precision 1..38 and scale 0..precision, TIME/TIMESTAMP precision 0..9,
            CHAR/VARCHAR/BINARY/VARBINARY length at least 1); the message quotes the text and
            gives the 0-based character position.
        UnsupportedFeatureError: a Paimon type this implementation does not provide (VARIANT,
            MULTISET, BLOB...).
    """
    if not isinstance(text, str):
        raise SchemaError(f"type name must be a string, got {type(text).__name__} {text!r}")
    parser = _Parser(text)
    data_type = parser.parse_type()
    parser.expect_end()
    return data_type


def arrow_field_for(name: str, type_name: str, *, description: str | None = None) -> pa.Field:
    """The Arrow field to declare column ``name`` of Paimon type ``type_name`` with.

    The field has the Arrow type the table stores for that Paimon type, is nullable unless the
    type says ``NOT NULL``, and carries the exact Paimon type under ``b"paimon.type"`` (plus
    ``b"description"`` when given) so that ``create_schema`` keeps ``VARCHAR(20)`` rather than
    the ``STRING`` a plain ``pa.string()`` column would become.

    Raises:
        SchemaError / UnsupportedFeatureError: as :func:`parse_type_name`.
    """
    data_type = parse_type_name(type_name)
    metadata = {PAIMON_TYPE_KEY: json.dumps(type_to_json(data_type)).encode()}
    if description is not None:
        metadata[DESCRIPTION_KEY] = description.encode()
    return pa.field(name, to_arrow_type(data_type), data_type.nullable, metadata=metadata)


def check_type_parameters(data_type: DataType) -> None:
    """Check every atomic type inside ``data_type`` against Paimon's parameter ranges.

    For types that did not come through :func:`parse_type_name` (schema JSON in field metadata).

    Raises:
        SchemaError: a parameter out of range, naming the type.
    """
    if isinstance(data_type, AtomicType):
        problem = _parameter_problem(data_type)
        if problem is not None:
            raise SchemaError(f"data type {type_to_string(data_type)!r}: {problem}")
    elif isinstance(data_type, ArrayType):
        check_type_parameters(data_type.element)
    elif isinstance(data_type, MapType):
        check_type_parameters(data_type.key)
        check_type_parameters(data_type.value)
    else:
        for data_field in data_type.fields:
            check_type_parameters(data_field.type)


def _parameter_problem(data_type: AtomicType) -> str | None:
    """Why Paimon would refuse this atomic type's parameters, or None."""
    root, params = data_type.root, data_type.params
    if root == "DECIMAL":
        if len(params) != 2:
            return f"DECIMAL needs a precision and a scale, not {list(params)}"
        precision, scale = params
        if not 1 <= precision <= 38:
            return f"DECIMAL precision must be between 1 and 38, not {precision}"
        if not 0 <= scale <= precision:
            return f"DECIMAL scale must be between 0 and the precision {precision}, not {scale}"
        return None
    if root in ("TIME", "TIMESTAMP", "TIMESTAMP_LTZ") and not 0 <= params[0] <= 9:
        kind = "TIME" if root == "TIME" else "TIMESTAMP"
        return f"{kind} precision must be between 0 and 9, not {params[0]}"
    if root in (*STRING_ROOTS, *BINARY_ROOTS) and not 1 <= params[0] <= MAX_LENGTH:
        return f"{root} length must be between 1 and {MAX_LENGTH}, not {params[0]}"
    return None


class _Parser:
    """Recursive descent over the tokens of one type name; ``pos`` indexes ``tokens``."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = self._tokenize(text)
        self.pos = 0

    # ---- tokens ------------------------------------------------------------------------

    def _tokenize(self, text: str) -> list[_Token]:
        tokens: list[_Token] = []
        at = 0
        while at < len(text):
            match = _TOKEN.match(text, at)
            if match is None:
                self.fail(at, f"unexpected character {text[at]!r}")
            kind = match.lastgroup or "space"
            if kind != "space":
                tokens.append(_Token(kind, match.group(), at))
            at = match.end()
        tokens.append(_Token("end", "", len(text)))
        return tokens

    @property
    def peek(self) -> _Token:
        return self.tokens[self.pos]

    def advance(self) -> _Token:
        token = self.tokens[self.pos]
        if token.kind != "end":
            self.pos += 1
        return token

    def accept(self, text: str) -> bool:
        """Consume the next token if it is the punctuation or keyword ``text``."""
        if self.peek.upper == text and self.peek.kind in ("punct", "word"):
            self.pos += 1
            return True
        return False

    def expect(self, *texts: str) -> str:
        token = self.peek
        for text in texts:
            if self.accept(text):
                return text
        self.fail(token.pos, f"expected {' or '.join(repr(t) for t in texts)}{self._found(token)}")

    def expect_end(self) -> None:
        token = self.peek
        if token.kind != "end":
            self.fail(token.pos, f"unexpected {token.text!r} after a complete type")

    @staticmethod
    def _found(token: _Token) -> str:
        return " but the text ended" if token.kind == "end" else f", found {token.text!r}"

    def fail(self, at: int, problem: str) -> NoReturn:
        raise SchemaError(f"cannot parse type name {self.text!r} at position {at}: {problem}; "
                          f"valid spellings include {', '.join(_EXAMPLES)}")

    # ---- grammar -----------------------------------------------------------------------

    def parse_type(self) -> DataType:
        """type := ARRAY<type> | MAP<type, type> | ROW<fields> | ROW(fields) | atomic, [NOT NULL]."""
        token = self.peek
        if token.kind != "word":
            self.fail(token.pos, f"expected a type{self._found(token)}")
        keyword = token.upper
        if keyword in _UNSUPPORTED:
            raise UnsupportedFeatureError(f"data type {self.text!r} is not supported: {keyword} at "
                                          f"position {token.pos}")
        if keyword not in _NESTED:
            return self.parse_atomic()
        self.advance()
        data_type: DataType
        if keyword == "ARRAY":
            self.expect("<")
            data_type = ArrayType(self.parse_type())
            self.expect(">")
        elif keyword == "MAP":
            self.expect("<")
            key = self.parse_type()
            self.expect(",")
            value = self.parse_type()
            self.expect(">")
            data_type = MapType(key, value)
        else:
            close = ">" if self.expect("<", "(") == "<" else ")"
            data_type = RowType(self.parse_fields(close))
        return replace(data_type, nullable=self.parse_nullability())

    def parse_nullability(self) -> bool:
        if self.accept("NOT"):
            self.expect("NULL")
            return False
        self.accept("NULL")
        return True

    def parse_fields(self, close: str) -> tuple[DataField, ...]:
        """fields := name type ['description'] (, name type ['description'])* close."""
        fields: list[DataField] = []
        while True:
            token = self.advance()
            if token.kind == "word":
                name = token.text
            elif token.kind == "quoted":
                name = token.text[1:-1].replace("``", "`")
            else:
                self.fail(token.pos, f"expected a ROW field name{self._found(token)}")
            if any(f.name == name for f in fields):
                self.fail(token.pos, f"duplicate ROW field name {name!r}")
            data_type = self.parse_type()
            description = None
            if self.peek.kind == "literal":
                description = self.advance().text[1:-1].replace("''", "'")
            fields.append(DataField(len(fields), name, data_type, description))
            if self.expect(",", close) == close:
                return tuple(fields)

    def parse_atomic(self) -> AtomicType:
        """atomic := WORD [PRECISION] ['(' NUMBER (, NUMBER)* ')'] [time-zone words] [NOT NULL]."""
        start = self.advance()
        root = start.upper
        if root == "DOUBLE" and self.peek.upper == "PRECISION":
            self.advance()
        params: list[int] = []
        if self.peek.text == "(":
            self.advance()
            while True:
                token = self.advance()
                if token.kind != "number":
                    self.fail(token.pos, f"expected a number as parameter of {root}{self._found(token)}")
                params.append(int(token.text))
                if self.expect(",", ")") == ")":
                    break
        while self.peek.kind == "word" and self.peek.upper in _TIME_ZONE_WORDS:
            self.advance()
        end = self.tokens[self.pos - 1]
        spelling = self.text[start.pos:end.pos + len(end.text)]
        nullable = self.parse_nullability()
        most = _MAX_PARAMS.get(root, 0)
        if len(params) > most:
            allowed = "no parameters" if most == 0 else f"at most {most} parameter{'s' * (most > 1)}"
            self.fail(start.pos, f"{root} takes {allowed}, not {len(params)}")
        try:
            data_type = parse_type_string(spelling)
        except SchemaError:
            self.fail(start.pos, f"{spelling!r} is not a known atomic type")
        if root == "TIMESTAMP" and data_type.root == "TIMESTAMP" and re.search(
                r"\bWITH\s+TIME\b", spelling, re.IGNORECASE):
            self.fail(start.pos, "TIMESTAMP WITH TIME ZONE is not a Paimon type; use TIMESTAMP WITH LOCAL "
                                 "TIME ZONE (TIMESTAMP_LTZ)")
        if data_type.root == "DECIMAL" and len(data_type.params) == 1:
            data_type = replace(data_type, params=(data_type.params[0], 0))  # DECIMAL(p) is DECIMAL(p, 0)
        problem = _parameter_problem(data_type)
        if problem is not None:
            self.fail(start.pos, problem)
        return replace(data_type, nullable=nullable)


def type_name(data_type: DataType) -> str:
    """The SQL name of a type, as :func:`parse_type_name` reads it back (``DECIMAL(12, 2) NOT NULL``,
    ``ARRAY<STRING>``, ``MAP<STRING NOT NULL, BIGINT>``, ``ROW<`a` INT, `b` STRING>``)."""
    suffix = "" if data_type.nullable else " NOT NULL"
    if isinstance(data_type, AtomicType):
        return type_to_string(data_type)
    if isinstance(data_type, ArrayType):
        return f"ARRAY<{type_name(data_type.element)}>{suffix}"
    if isinstance(data_type, MapType):
        return f"MAP<{type_name(data_type.key)}, {type_name(data_type.value)}>{suffix}"
    fields = ", ".join(f"`{f.name.replace('`', '``')}` {type_name(f.type)}" for f in data_type.fields)
    return f"ROW<{fields}>{suffix}"
