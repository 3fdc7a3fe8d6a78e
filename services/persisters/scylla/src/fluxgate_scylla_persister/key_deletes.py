"""Deletes by record key, as Stream-Reactor's older Cassandra sinks run them: a tombstone (a record
whose value is null) runs ``connect.cassandra.delete.statement``, bound from its key
(``scylla.delete_statement`` and ``scylla.delete_key_fields``, which fluxgate connect sets).

lensesio/stream-reactor, kafka-connect-cassandra ``sink/CassandraJsonWriter.scala`` (``delete``):
a primitive key is bound as it is; a Struct key by the fields ``connect.cassandra.delete.struct_flds``
names, in order, a dotted name reaching into a nested Struct (``utils/KeyUtils.scala``,
``keysFromStruct``); a STRING key when ``struct_flds`` is set is JSON, read the same way
(``keysFromJson``); a record without a key fails ("Missing key schema.").

Stream-Reactor runs the statement as it is written. We run each form that deletes by the key's
values alone, ``DELETE [<column>, ...] FROM <table> WHERE <column> = ? AND ...``: a row (every
primary-key column named), a partition or a range of its rows (the partition key and a leading
part of the clustering columns, as Cassandra allows), or a row's cells (the columns listed before
FROM, with the whole primary key). It is run by the persister's own statement on the persister's
session (the keyspace of an unqualified table is ``scylla.keyspace``), so a tombstone's delete and
the writes of the rows it covers are ordered as their records are (``grouping``): a partition's or
range's delete is sent alone, after what came before it in the partition is written and before
what comes after. ``USING``, ``IF``, ``IN`` and literals in the WHERE are refused at start: a
conditional delete (a lightweight transaction) cannot be ordered with plain writes by timestamp,
and the others need values a key does not give. Its values are bound as the key holds them: a
text key into a typed column is refused by the driver, as Stream-Reactor's binding refuses it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fluxgate_sink.errors import SinkError
from fluxgate_sink.formats import KEY_FIELD
from fluxgate_sink.sink import SinkItem

_NAME = r'(?:[A-Za-z][A-Za-z0-9_]*|"(?:[^"]|"")+")'
_DELETE = re.compile(
    rf"\s*DELETE\s+(?:(?P<cells>{_NAME}(?:\s*,\s*{_NAME})*)\s+)?FROM\s+(?P<table>{_NAME}(?:\s*\.\s*{_NAME})?)"
    r"\s+WHERE\s+(?P<where>.+?)\s*;?\s*",
    re.I | re.S,
)
_CONDITION = re.compile(rf"\s*(?P<column>{_NAME})\s*=\s*\?\s*", re.S)
_AND = re.compile(r"\s+AND\s+", re.I)
FORM = "DELETE [<column>, ...] FROM <table> WHERE <column> = ? AND ..."


def cql_name(name: str) -> str:
    """A CQL name as the server reads it: unquoted folded to lower case, quoted as written."""
    if name.startswith('"'):
        return name[1:-1].replace('""', '"')
    return name.lower()


@dataclass(frozen=True)
class KeyDelete:
    """A parsed ``scylla.delete_statement``: its keyspace (None: the default one) and table, the
    columns of its WHERE in order, each name as the server reads it, with the key fields bound to
    them, and the columns whose cells it deletes (none: the rows)."""

    keyspace: str | None
    table: str
    columns: tuple[str, ...]
    key_fields: tuple[str, ...]
    cells: tuple[str, ...] = ()

    @classmethod
    def parse(cls, statement: str, key_fields: Sequence[str]) -> KeyDelete:
        """ValueError saying what is wrong when ``statement`` is not of :data:`FORM` or its markers
        and ``key_fields`` do not pair up."""
        found = _DELETE.fullmatch(statement)
        if found is None:
            raise ValueError(f"{statement!r}: only {FORM} is run")
        conditions = [_CONDITION.fullmatch(part) for part in _AND.split(found["where"])]
        if None in conditions:
            raise ValueError(f"{statement!r}: each condition must be <column> = ?; only {FORM} is run")
        columns = tuple(cql_name(c["column"]) for c in conditions if c is not None)
        if len(set(columns)) != len(columns):
            raise ValueError(f"{statement!r}: a column is named twice")
        if key_fields and len(key_fields) != len(columns):
            raise ValueError(
                f"{statement!r} has {len(columns)} markers and delete_key_fields names {len(key_fields)} fields: "
                "one field of the record key per marker, in order"
            )
        if not key_fields and len(columns) != 1:
            raise ValueError(
                f"{statement!r} has {len(columns)} markers: name the record key's field for each in delete_key_fields "
                "(connect.cassandra.delete.struct_flds); without them the key itself fills one marker"
            )
        *keyspace, table = [cql_name(name) for name in re.findall(_NAME, found["table"])]
        cells = tuple(cql_name(name) for name in re.findall(_NAME, found["cells"] or ""))
        return cls(keyspace[0] if keyspace else None, table, columns, tuple(key_fields), cells)

    def scope(self, partition_key: Sequence[str], clustering: Sequence[str]) -> int:
        """How many clustering columns the WHERE names, for a table of that primary key; ValueError
        naming what Cassandra would refuse (or, for cells, what we do) when it is no such delete."""
        named = set(self.columns)
        if outside := [c for c in self.columns if c not in (*partition_key, *clustering)]:
            raise ValueError(f"its WHERE names {', '.join(outside)}, not of the primary key")
        if missing := [c for c in partition_key if c not in named]:
            raise ValueError(
                f"its WHERE leaves out {', '.join(missing)} of the partition key: name each of its columns"
            )
        prefix = 0
        while prefix < len(clustering) and clustering[prefix] in named:
            prefix += 1
        if skipped := [c for c in clustering[prefix:] if c in named]:
            raise ValueError(
                f"its WHERE names {', '.join(skipped)} without {clustering[prefix]}: a range of clustering columns "
                f"is named in their order ({', '.join(clustering)})"
            )
        if self.cells and prefix < len(clustering):
            raise ValueError("a delete of cells names every primary-key column, as Cassandra requires of it")
        if keyed := [c for c in self.cells if c in (*partition_key, *clustering)]:
            raise ValueError(f"it deletes {', '.join(keyed)} of the primary key: a row is deleted by naming no cells")
        return prefix

    def values(self, item: SinkItem) -> list[Any]:
        """The DELETE's values from the tombstone's record key (``_key`` of its document: the router's)."""
        if KEY_FIELD not in item.document:  # kcql_routing: the router reads the key itself for the SELECT
            raise SinkError(
                "the statement selects fields of the record key (_key.<field>), which a tombstone then fills "
                "instead of the key: delete_statement reads the key of a statement that selects none of it",
                retriable=False,
            )
        key = item.document[KEY_FIELD]
        if key is None:
            raise SinkError("the record key is null: a tombstone deletes the row its key names", retriable=False)
        if isinstance(key, str) and self.key_fields:  # a STRING key with struct_flds is JSON
            key = _json_key(key)
        if not isinstance(key, Mapping):  # any other primitive key is bound as it is
            return [key]
        if not self.key_fields:
            raise SinkError(
                f"the record key is a record (fields {', '.join(map(str, key)) or 'none'}): name the field that "
                "fills each marker in delete_key_fields (connect.cassandra.delete.struct_flds)",
                retriable=False,
            )
        return [_field(key, name) for name in self.key_fields]


def _json_key(key: str) -> Mapping[str, Any]:
    try:
        parsed = json.loads(key)
    except ValueError as exc:
        raise SinkError(f"the record key is not JSON, so its fields cannot be read: {exc}", retriable=False) from None
    if not isinstance(parsed, Mapping):
        raise SinkError("the record key is JSON but not an object, so it has no fields to delete by", retriable=False)
    return parsed


def _field(fields: Mapping[str, Any], name: str) -> Any:
    found: Any = fields
    for part in name.split("."):
        if not isinstance(found, Mapping) or part not in found:
            raise SinkError(f"the record key has no field {name}: it names the row to delete", retriable=False)
        found = found[part]
    return found
