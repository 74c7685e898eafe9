"""Writing the pipeline's Parquet tables from Python (driver or executor), laid out as Spark lays them out.

`OUT/tables/<name>/date=D/workload=W/<file>.parquet`, the columns of `schemas.TABLES[name]` but the two
partition columns, so `job.read_table` (Spark, partition discovery) reads them like files Spark wrote. Each
file is written under a temporary name and renamed: a retried task replaces its own file, never adds one.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from checkers.pipeline.schemas import PARTITION_COLUMNS, TABLES

# the characters Spark escapes in a partition directory's value (ExternalCatalogUtils.escapePathName)
_ESCAPED = set("\"#%'*/:=?\\\x7f{[]^")


def _escape(value: str) -> str:
    return "".join(f"%{ord(c):02X}" if c in _ESCAPED or ord(c) < 0x20 else c for c in value)


def arrow_schema(name: str) -> pa.Schema:
    """The Arrow schema of table `name`'s files (its Spark schema without the partition columns)."""
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import StructType

    fields = [f for f in TABLES[name].fields if f.name not in PARTITION_COLUMNS]
    return to_arrow_schema(StructType(fields))


def write_rows(out: str | os.PathLike[str], name: str, rows: list[dict[str, Any]], file_name: str) -> int:
    """Write `rows` (dicts with every column of table `name`, partition columns included) as one Parquet file
    per (date, workload) named `file_name`; returns the number of files written."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault((row["date"], row["workload"]), []).append(row)
    schema = arrow_schema(name)
    for (date, workload), part in groups.items():
        folder = Path(out) / "tables" / name / f"date={_escape(date)}" / f"workload={_escape(workload)}"
        folder.mkdir(parents=True, exist_ok=True)
        table = pa.Table.from_pylist(part, schema=schema)
        path = folder / file_name
        tmp = folder / f".{file_name}.{os.getpid()}.tmp"
        pq.write_table(table, tmp)
        os.replace(tmp, path)
    return len(groups)
