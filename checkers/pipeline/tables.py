"""Writing the pipeline's Parquet tables from Python (driver or executor), laid out as Spark lays them out.

`OUT/tables/<name>/date=D/workload=W/<file>.parquet`, the columns of `schemas.TABLES[name]` but the two
partition columns, so `job.read_table` (Spark, partition discovery) reads them like files Spark wrote. Each
file is written under a temporary name and renamed: a retried task replaces its own file, never adds one.
"""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from checkers.pipeline.schemas import PARTITION_COLUMNS, TABLES

# the characters Spark escapes in a partition directory's value (ExternalCatalogUtils.escapePathName)
_ESCAPED = set("\"#%'*/:=?\\\x7f{[]^")


def _escape(value: str) -> str:
    return "".join(f"%{ord(c):02X}" if c in _ESCAPED or ord(c) < 0x20 else c for c in value)


@cache
def arrow_schema(name: str) -> pa.Schema:
    """The Arrow schema of table `name`'s files (its Spark schema without the partition columns)."""
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import StructType

    fields = [f for f in TABLES[name].fields if f.name not in PARTITION_COLUMNS]
    return to_arrow_schema(StructType(fields))


def columns_table(name: str, n: int, columns: dict[str, Any]) -> pa.Table:
    """`n` rows of table `name` (its file schema) from `columns`: column name → a list, an Arrow array or a
    scalar repeated on every row; columns not given are null."""
    schema = arrow_schema(name)
    arrays = []
    for f in schema:
        value = columns.get(f.name)
        if isinstance(value, (pa.Array, pa.ChunkedArray)):
            arrays.append(value if value.type == f.type else value.cast(f.type))
        elif isinstance(value, list):
            arrays.append(pa.array(value, type=f.type))
        elif value is None:
            arrays.append(pa.nulls(n, type=f.type))
        else:
            arrays.append(pa.array([value] * n, type=f.type))
    return pa.Table.from_arrays(arrays, schema=schema)


def write_tables(
    out: str | os.PathLike[str], name: str, pieces: list[tuple[str, str, pa.Table]], file_name: str
) -> int:
    """Write `pieces` ((date, workload, rows of table `name` without those two columns)) as one Parquet file
    per (date, workload) named `file_name`; returns the number of files written."""
    groups: dict[tuple[str, str], list[pa.Table]] = {}
    for date, workload, table in pieces:
        if table.num_rows:
            groups.setdefault((date, workload), []).append(table)
    for (date, workload), tables in groups.items():
        folder = Path(out) / "tables" / name / f"date={_escape(date)}" / f"workload={_escape(workload)}"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / file_name
        tmp = folder / f".{file_name}.{os.getpid()}.tmp"
        pq.write_table(pa.concat_tables(tables), tmp)
        os.replace(tmp, path)
    return len(groups)


def write_rows(out: str | os.PathLike[str], name: str, rows: list[dict[str, Any]], file_name: str) -> int:
    """Write `rows` (dicts with every column of table `name`, partition columns included) as one Parquet file
    per (date, workload) named `file_name`; returns the number of files written."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault((row["date"], row["workload"]), []).append(row)
    schema = arrow_schema(name)
    pieces = [(d, w, pa.Table.from_pylist(part, schema=schema)) for (d, w), part in groups.items()]
    return write_tables(out, name, pieces, file_name)
