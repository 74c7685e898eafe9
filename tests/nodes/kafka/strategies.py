"""Hypothesis strategies driven by the message schemas, and for record batches."""

from __future__ import annotations

from hypothesis import strategies as st

from nodes.kafka import records as R
from nodes.kafka.protocol import REQUEST_TYPES, RESPONSE_TYPES, Message
from nodes.kafka.protocol import schema as S
from nodes.runtime.primitives import NULL_UUID


def small_ints(bits: int) -> st.SearchStrategy[int]:
    """Mostly small values (realistic), sometimes the extremes."""
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    return st.one_of(st.integers(max(lo, -2), min(hi, 300)), st.sampled_from([lo, hi]), st.integers(lo, hi))


def value_strategy(wire: S.WireType, version: int, flexible: bool, nullable: bool) -> st.SearchStrategy:
    if wire is S.INT8:
        base = small_ints(8)
    elif wire is S.INT16:
        base = small_ints(16)
    elif wire is S.INT32:
        base = small_ints(32)
    elif wire is S.INT64:
        base = small_ints(64)
    elif wire is S.BOOL:
        base = st.booleans()
    elif wire is S.UUID:
        base = st.one_of(st.just(NULL_UUID), st.uuids())
    elif wire is S.STRING:
        base = st.text(max_size=8)
    elif wire is S.BYTES or wire is S.RECORDS:
        base = st.binary(max_size=24)
    elif isinstance(wire, S.Array):
        item = wire._item_type()
        base = st.lists(value_strategy(item, version, flexible, False), max_size=3)
    elif isinstance(wire, S.StructType):
        base = instances(wire.cls, version, flexible)
    else:  # pragma: no cover - a new wire type needs a strategy here
        raise AssertionError(f"no strategy for {wire!r}")
    return st.one_of(st.none(), base) if nullable else base


def instances(cls: type[S.Struct], version: int, flexible: bool) -> st.SearchStrategy:
    """Instances of `cls` that are representable at `version` (so they round-trip exactly)."""
    kwargs: dict[str, st.SearchStrategy] = {}
    known_tags = set()
    for spec in S.field_specs(cls):
        if spec.tagged_in(version):
            known_tags.add(spec.tag)
            if flexible:
                kwargs[spec.name] = st.one_of(
                    st.just(spec.default), value_strategy(spec.type, version, flexible, spec.nullable_in(version))
                )
        elif spec.present(version):
            kwargs[spec.name] = value_strategy(spec.type, version, flexible, spec.nullable_in(version))
    if flexible:
        kwargs["unknown_tags"] = st.dictionaries(
            st.integers(0, 300).filter(lambda t: t not in known_tags), st.binary(max_size=6), max_size=2
        )
    return st.builds(cls, **kwargs)


def message_instances(cls: type[Message], version: int) -> st.SearchStrategy:
    return instances(cls, version, cls.is_flexible(version))


def all_message_versions() -> list[tuple[type[Message], int]]:
    """(class, version) for every request and response class and every supported version."""
    out = []
    for table in (REQUEST_TYPES, RESPONSE_TYPES):
        for cls in table.values():
            lo, hi = cls.versions()
            out.extend((cls, v) for v in range(lo, hi + 1))
    return out


# --- records --------------------------------------------------------------------------------------

headers = st.lists(st.tuples(st.text(max_size=6), st.one_of(st.none(), st.binary(max_size=8))), max_size=3).map(tuple)


@st.composite
def record_lists(draw: st.DrawFn, min_size: int = 1, max_size: int = 6) -> list[R.Record]:
    n = draw(st.integers(min_size, max_size))
    return [
        R.Record(
            offset_delta=i,
            timestamp_delta=draw(st.integers(-(1 << 40), 1 << 40) | st.integers(0, 1000)),
            key=draw(st.none() | st.binary(max_size=12)),
            value=draw(st.none() | st.binary(max_size=40)),
            headers=draw(headers),
        )
        for i in range(n)
    ]


@st.composite
def batches(draw: st.DrawFn, compression: st.SearchStrategy[int] | None = None) -> R.RecordBatch:
    """Client-valid batches (offset deltas 0..n-1, sequence set when there is a producer id)."""
    recs = draw(record_lists())
    producer_id = draw(st.sampled_from([-1, 0, 7]) | st.integers(0, (1 << 63) - 1))
    codec = draw(compression if compression is not None else st.sampled_from([R.Compression.NONE, R.Compression.GZIP]))
    attributes = int(codec) | (0x10 if producer_id >= 0 and draw(st.booleans()) else 0)
    return R.RecordBatch(
        base_offset=draw(st.integers(0, 1 << 40)),
        partition_leader_epoch=draw(st.integers(-1, 1 << 20)),
        attributes=attributes,
        last_offset_delta=len(recs) - 1,
        base_timestamp=draw(st.integers(-1, 1 << 42)),
        max_timestamp=draw(st.integers(-1, 1 << 42)),
        producer_id=producer_id,
        producer_epoch=draw(st.integers(0, 32767)) if producer_id >= 0 else -1,
        base_sequence=draw(st.integers(0, (1 << 31) - 1)) if producer_id >= 0 else -1,
        records=recs,
    )


__all__ = [
    "all_message_versions",
    "batches",
    "headers",
    "instances",
    "message_instances",
    "record_lists",
    "value_strategy",
]
