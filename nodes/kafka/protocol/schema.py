"""Declarative message schemas: dataclass fields annotated with their Kafka wire layout.

A message is a dataclass whose fields, in wire order, are declared with `kf(type, versions, …)`
(the same information as the `fields` of Kafka's message JSON: versions, nullable versions,
tag). The codec for one (struct, version) pair is compiled once into a flat list of reader and
writer callables built on `nodes.runtime.primitives`, then cached.

Rules, as in Kafka's generated code:

* a field outside its versions is not on the wire; decoding gives its default, encoding ignores it;
* flexible versions use compact strings/bytes/arrays, and every struct ends with a tagged-field
  block; tagged fields are written only when they differ from their default; unknown tags are kept
  in `unknown_tags` and written back (flexible versions only);
* `None` is only legal where the field is nullable in that version (else `ValueError` on encode).

Decoding raises only `DecodeError` subclasses: `ProtocolError` for malformed bodies,
`UnsupportedVersionError` for versions outside the supported range.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import MISSING, dataclass, field
from typing import Any, ClassVar, TypeVar

from nodes.runtime.primitives import NULL_UUID, DecodeError, Reader, Writer

from ..errors import ErrorCode
from ..versions import FIRST_FLEXIBLE, SUPPORTED

__all__ = [
    "ANY",
    "Array",
    "BOOL",
    "BYTES",
    "FLOAT64",
    "INT8",
    "INT16",
    "INT32",
    "INT64",
    "Message",
    "ProtocolError",
    "RECORDS",
    "STRING",
    "Struct",
    "StructType",
    "UUID",
    "UnsupportedVersionError",
    "WireType",
    "decode_message",
    "decode_struct",
    "encode_struct",
    "field_specs",
    "kf",
    "parse_versions",
]

ANY = 0x7FFF  # "no upper bound" in a version range

Read = Callable[[Reader], Any]
Write = Callable[[Writer, Any], Any]
S = TypeVar("S", bound="Struct")


class ProtocolError(DecodeError):
    """A request or response body is malformed for its API and version."""

    error_code = ErrorCode.INVALID_REQUEST
    header: Any = None  # the request header, when known (set by `protocol.decode_request_frame`)


class UnsupportedVersionError(ProtocolError):
    """The API version is outside the range we support (or the API is unknown)."""

    error_code = ErrorCode.UNSUPPORTED_VERSION


def parse_versions(spec: str | None) -> tuple[int, int] | None:
    """Kafka version-range syntax: "3+", "2-5", "4", "none" (→ None)."""
    if spec is None or spec == "none":
        return None
    if spec.endswith("+"):
        return int(spec[:-1]), ANY
    if "-" in spec:
        lo, hi = spec.split("-", 1)
        return int(lo), int(hi)
    v = int(spec)
    return v, v


def _in(rng: tuple[int, int] | None, version: int) -> bool:
    return rng is not None and rng[0] <= version <= rng[1]


# --- wire types -----------------------------------------------------------------------------------


class WireType:
    """A field type: knows its default and builds reader/writer callables for one version."""

    name = "?"

    def default(self) -> Any:
        raise NotImplementedError

    def reader(self, version: int, flexible: bool, nullable: bool) -> Read:
        raise NotImplementedError

    def writer(self, version: int, flexible: bool, nullable: bool) -> Write:
        raise NotImplementedError

    def __repr__(self) -> str:
        return self.name


class _Fixed(WireType):
    def __init__(self, name: str, read: Read, write: Write, default: Any) -> None:
        self.name = name
        self._read = read
        self._write = write
        self._default = default

    def default(self) -> Any:
        return self._default

    def reader(self, version: int, flexible: bool, nullable: bool) -> Read:
        return self._read

    def writer(self, version: int, flexible: bool, nullable: bool) -> Write:
        return self._write


INT8 = _Fixed("int8", Reader.read_int8, Writer.write_int8, 0)
INT16 = _Fixed("int16", Reader.read_int16, Writer.write_int16, 0)
INT32 = _Fixed("int32", Reader.read_int32, Writer.write_int32, 0)
INT64 = _Fixed("int64", Reader.read_int64, Writer.write_int64, 0)
FLOAT64 = _Fixed("float64", Reader.read_float64, Writer.write_float64, 0.0)
BOOL = _Fixed("bool", Reader.read_boolean, Writer.write_boolean, False)
UUID = _Fixed("uuid", Reader.read_uuid, Writer.write_uuid, NULL_UUID)


class _Variable(WireType):
    """Strings and byte strings: four encodings (classic/compact × nullable or not)."""

    def __init__(self, name: str, default: Any, readers: tuple[Read, Read, Read, Read], writers: tuple) -> None:
        self.name = name
        self._default = default
        self._readers = readers  # (classic, classic nullable, compact, compact nullable)
        self._writers = writers

    def default(self) -> Any:
        return self._default

    def reader(self, version: int, flexible: bool, nullable: bool) -> Read:
        return self._readers[2 * flexible + nullable]

    def writer(self, version: int, flexible: bool, nullable: bool) -> Write:
        return self._writers[2 * flexible + nullable]


STRING = _Variable(
    "string",
    "",
    (
        Reader.read_string,
        Reader.read_nullable_string,
        Reader.read_compact_string,
        Reader.read_compact_nullable_string,
    ),
    (
        Writer.write_string,
        Writer.write_nullable_string,
        Writer.write_compact_string,
        Writer.write_compact_nullable_string,
    ),
)
BYTES = _Variable(
    "bytes",
    b"",
    (
        Reader.read_bytes,
        Reader.read_nullable_bytes,
        Reader.read_compact_bytes,
        Reader.read_compact_nullable_bytes,
    ),
    (
        Writer.write_bytes,
        Writer.write_nullable_bytes,
        Writer.write_compact_bytes,
        Writer.write_compact_nullable_bytes,
    ),
)


class _Records(WireType):
    """A record set (concatenated record batches) carried as (nullable) bytes. Encoding also
    accepts a list/tuple of buffers, written back to back without joining them first."""

    name = "records"

    def default(self) -> Any:
        return b""

    def reader(self, version: int, flexible: bool, nullable: bool) -> Read:
        return BYTES.reader(version, flexible, nullable)

    def writer(self, version: int, flexible: bool, nullable: bool) -> Write:
        plain = BYTES.writer(version, flexible, nullable)

        def write(w: Writer, value: Any) -> None:
            if isinstance(value, list | tuple):
                total = sum(len(part) for part in value)
                if flexible:
                    w.write_uvarint(total + 1)
                else:
                    w.write_int32(total)
                for part in value:
                    w.write_raw(part)
            else:
                plain(w, value)

        return write


RECORDS = _Records()


class Array(WireType):
    """`[]T`: int32 count (classic) or uvarint count + 1 (compact); -1 / 0 is null."""

    def __init__(self, item: WireType | type[Struct]) -> None:
        self.item = item
        self.name = f"[]{getattr(item, 'name', None) or item.__name__}"

    def default(self) -> Any:
        return []

    def _item_type(self) -> WireType:
        return StructType(self.item) if isinstance(self.item, type) else self.item

    def reader(self, version: int, flexible: bool, nullable: bool) -> Read:
        item = self._item_type().reader(version, flexible, False)
        if flexible:
            if nullable:
                return lambda r: r.read_compact_nullable_array(item)
            return lambda r: r.read_compact_array(item)
        if nullable:
            return lambda r: r.read_nullable_array(item)
        return lambda r: r.read_array(item)

    def writer(self, version: int, flexible: bool, nullable: bool) -> Write:
        item = self._item_type().writer(version, flexible, False)
        if flexible:
            if nullable:
                return lambda w, v: w.write_compact_nullable_array(v, item)
            return lambda w, v: w.write_compact_array(v, item)
        if nullable:
            return lambda w, v: w.write_nullable_array(v, item)
        return lambda w, v: w.write_array(v, item)


class StructType(WireType):
    """A nested struct (not nullable on the wire; tagged struct fields default to None)."""

    def __init__(self, cls: type[Struct]) -> None:
        self.cls = cls
        self.name = cls.__name__

    def default(self) -> Any:
        return None

    def reader(self, version: int, flexible: bool, nullable: bool) -> Read:
        codec = _codec(self.cls, version, flexible)
        return codec.read

    def writer(self, version: int, flexible: bool, nullable: bool) -> Write:
        codec = _codec(self.cls, version, flexible)
        return codec.write


# --- field declarations ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FieldSpec:
    name: str
    type: WireType
    versions: tuple[int, int] | None
    nullable: tuple[int, int] | None
    tag: int | None
    tagged_versions: tuple[int, int] | None
    default: Any  # the value that is not written for tagged fields

    def present(self, version: int) -> bool:
        return _in(self.versions, version)

    def nullable_in(self, version: int) -> bool:
        return _in(self.nullable, version)

    def tagged_in(self, version: int) -> bool:
        return self.tag is not None and _in(self.tagged_versions, version)


def kf(
    type_: WireType | type[Struct],
    versions: str = "0+",
    *,
    nullable: str | None = None,
    tag: int | None = None,
    tagged: str | None = None,
    default: Any = MISSING,
) -> Any:
    """Declare a dataclass field with its wire spec (versions in Kafka's "3+" / "2-5" syntax)."""
    wire = StructType(type_) if isinstance(type_, type) else type_
    if default is MISSING:
        default = wire.default()
    spec = {
        "type": wire,
        "versions": parse_versions(versions),
        "nullable": parse_versions(nullable),
        "tag": tag,
        "tagged_versions": parse_versions(tagged or versions) if tag is not None else None,
        "default": default,
    }
    if isinstance(default, list):
        if default:
            raise ValueError("list defaults must be empty")
        return field(default_factory=list, metadata={"kafka": spec})
    if isinstance(wire, StructType) and default is not None:
        cls = wire.cls
        return field(default_factory=cls, metadata={"kafka": spec})
    return field(default=default, metadata={"kafka": spec})


_SPECS: dict[type, tuple[FieldSpec, ...]] = {}


def field_specs(cls: type[Struct]) -> tuple[FieldSpec, ...]:
    """The wire fields of a struct class, in wire order."""
    specs = _SPECS.get(cls)
    if specs is None:
        specs = tuple(
            FieldSpec(name=f.name, **f.metadata["kafka"]) for f in dataclasses.fields(cls) if "kafka" in f.metadata
        )
        _SPECS[cls] = specs
    return specs


@dataclass(slots=True)
class Struct:
    """Base of every message struct; `unknown_tags` keeps tagged fields we do not know."""

    unknown_tags: dict[int, bytes] = field(default_factory=dict, kw_only=True, repr=False)


# --- compiled codecs ------------------------------------------------------------------------------


class _Codec:
    __slots__ = ("cls", "version", "flexible", "reads", "tag_reads", "writes", "tag_writes")

    def __init__(self, cls: type[Struct], version: int, flexible: bool) -> None:
        self.cls = cls
        self.version = version
        self.flexible = flexible
        self.reads: list[tuple[str, Read]] = []
        self.tag_reads: dict[int, tuple[str, Read]] = {}
        self.writes: list[tuple[str, Write, bool]] = []
        self.tag_writes: list[tuple[int, str, Write, Any]] = []

    def build(self) -> None:
        v, flex = self.version, self.flexible
        for spec in field_specs(self.cls):
            if spec.tagged_in(v):
                if not flex:
                    continue
                nullable = spec.nullable_in(v)
                self.tag_reads[spec.tag] = (spec.name, spec.type.reader(v, True, nullable))
                self.tag_writes.append((spec.tag, spec.name, spec.type.writer(v, True, nullable), spec.default))
            elif spec.present(v):
                nullable = spec.nullable_in(v)
                self.reads.append((spec.name, spec.type.reader(v, flex, nullable)))
                self.writes.append((spec.name, spec.type.writer(v, flex, nullable), nullable))
        self.tag_writes.sort(key=lambda t: t[0])

    def read(self, r: Reader) -> Any:
        kwargs: dict[str, Any] = {}
        for name, read in self.reads:
            kwargs[name] = read(r)
        if self.flexible:
            tags = r.read_tagged_fields()
            if tags:
                unknown: dict[int, bytes] = {}
                for tag, raw in tags.items():
                    known = self.tag_reads.get(tag)
                    if known is None:
                        unknown[tag] = raw
                        continue
                    sub = Reader(raw)
                    kwargs[known[0]] = known[1](sub)
                    sub.expect_end(f"tagged field {tag} of {self.cls.__name__}")
                if unknown:
                    kwargs["unknown_tags"] = unknown
        return self.cls(**kwargs)

    def write(self, w: Writer, obj: Any) -> None:
        if type(obj) is not self.cls and not isinstance(obj, self.cls):
            raise TypeError(f"expected {self.cls.__name__}, got {type(obj).__name__}")
        name = ""
        try:
            for name, write, nullable in self.writes:
                value = getattr(obj, name)
                if value is None and not nullable:
                    raise ValueError("None is not allowed (field not nullable in this version)")
                write(w, value)
            if self.flexible:
                name = "tagged fields"
                tagged: dict[int, bytes] = {}
                for tag, name, write, default in self.tag_writes:
                    value = getattr(obj, name)
                    if value != default:
                        sub = Writer()
                        write(sub, value)
                        tagged[tag] = sub.getvalue()
                for tag, raw in obj.unknown_tags.items():
                    if tag in tagged:
                        raise ValueError(f"unknown tag {tag} collides with a known tagged field")
                    tagged[tag] = raw
                w.write_tagged_fields(tagged)
        except (ValueError, TypeError, AttributeError, OverflowError) as e:
            raise ValueError(f"cannot encode {self.cls.__name__}.{name} at version {self.version}: {e}") from e


_CODECS: dict[tuple[type, int, bool], _Codec] = {}


def _codec(cls: type[Struct], version: int, flexible: bool) -> _Codec:
    key = (cls, version, flexible)
    codec = _CODECS.get(key)
    if codec is None:
        codec = _Codec(cls, version, flexible)
        _CODECS[key] = codec  # registered before building: recursive structs resolve to it
        codec.build()
    return codec


def encode_struct(obj: Struct, version: int, flexible: bool, w: Writer | None = None) -> Writer:
    """Append `obj` encoded at `version` to `w` (a new Writer if None) and return the writer."""
    w = Writer() if w is None else w
    _codec(type(obj), version, flexible).write(w, obj)
    return w


def decode_struct(cls: type[S], r: Reader, version: int, flexible: bool) -> S:
    """Read one `cls` at `version` from `r`; malformed input raises `ProtocolError`."""
    try:
        return _codec(cls, version, flexible).read(r)
    except ProtocolError:
        raise
    except DecodeError as e:
        raise ProtocolError(f"malformed {cls.__name__} v{version}: {e}") from None


# --- messages -------------------------------------------------------------------------------------


@dataclass(slots=True)
class Message(Struct):
    """A top-level request or response body. Subclasses set API_KEY and IS_REQUEST."""

    API_KEY: ClassVar[int] = -1
    IS_REQUEST: ClassVar[bool] = True

    @classmethod
    def versions(cls) -> tuple[int, int]:
        """Supported (min, max) versions."""
        return SUPPORTED[cls.API_KEY]

    @classmethod
    def is_flexible(cls, version: int) -> bool:
        return version >= FIRST_FLEXIBLE[cls.API_KEY]

    @classmethod
    def check_version(cls, version: int) -> None:
        lo, hi = cls.versions()
        if not lo <= version <= hi:
            raise UnsupportedVersionError(f"{cls.__name__} version {version} is not supported (supported: {lo}-{hi})")

    def encode(self, version: int) -> bytes:
        """The body (no header, no size prefix) at `version`."""
        return self.encode_into(Writer(), version).getvalue()

    def encode_into(self, w: Writer, version: int) -> Writer:
        self.check_version(version)
        return encode_struct(self, version, self.is_flexible(version), w)

    @classmethod
    def decode(cls: type[S], data: bytes | bytearray | memoryview, version: int) -> S:
        """Parse a whole body at `version`; trailing bytes are an error."""
        return decode_message(cls, data, version)


def decode_message(cls: type[S], data: bytes | bytearray | memoryview, version: int, trailing_ok: bool = False) -> S:
    """`cls.decode` without subclass overrides: the whole of `data` as one `cls` at `version`
    (``trailing_ok``: bytes after it are ignored, as Kafka's broker ignores them after a request)."""
    cls.check_version(version)  # type: ignore[attr-defined]
    r = Reader(data)
    msg = decode_struct(cls, r, version, cls.is_flexible(version))  # type: ignore[attr-defined]
    if not r.at_end() and not trailing_ok:
        raise ProtocolError(f"{r.remaining} trailing byte(s) after {cls.__name__} v{version}")
    return msg
