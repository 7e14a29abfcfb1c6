"""HTTP content codings of the ClickHouse interface: decode request bodies, encode responses.

Request bodies arrive with ``Content-Encoding`` gzip, deflate, zstd, lz4 (LZ4 *frame* format;
clickhouse-connect compresses each insert block as its own frame, so a body is a sequence of
frames) or br when the brotli module is installed. Decoding is incremental so a large insert is
never held twice in memory. Responses are encoded with the first coding in the client's
``Accept-Encoding`` list that this side supports, as ClickHouse does when
``enable_http_compression`` is on.
"""

from __future__ import annotations

import importlib
import zlib
from types import ModuleType
from typing import Protocol

import lz4.frame
import zstandard

from infra.clickhouse.errors import CANNOT_DECOMPRESS, UNKNOWN_COMPRESSION, ClickHouseError


def _optional(name: str) -> ModuleType | None:
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


_brotli = _optional("brotli")

SUPPORTED = ("gzip", "deflate", "zstd", "lz4") + (("br",) if _brotli is not None else ())


class Decoder(Protocol):
    def feed(self, data: bytes) -> bytes: ...

    def finish(self) -> bytes: ...


class _Identity:
    def feed(self, data: bytes) -> bytes:
        return data

    def finish(self) -> bytes:
        return b""


class _Zlib:
    """gzip (possibly several members) or deflate (zlib-wrapped, raw deflate as a fallback)."""

    def __init__(self, gzip: bool) -> None:
        self._wbits = 16 + zlib.MAX_WBITS if gzip else zlib.MAX_WBITS
        self._obj = zlib.decompressobj(self._wbits)
        self._started = False

    def feed(self, data: bytes) -> bytes:
        out = []
        while data:
            try:
                out.append(self._obj.decompress(data))
            except zlib.error:
                if self._started or self._wbits != zlib.MAX_WBITS:
                    raise
                self._wbits = -zlib.MAX_WBITS  # a bare deflate stream without the zlib header
                self._obj = zlib.decompressobj(self._wbits)
                continue
            self._started = True
            data = self._obj.unused_data if self._obj.eof else b""
            if self._obj.eof:
                self._obj = zlib.decompressobj(self._wbits)
        return b"".join(out)

    def finish(self) -> bytes:
        return self._obj.flush()


class _Frames:
    """A sequence of self-contained frames (lz4 frame or zstd), decoded one after another."""

    def __init__(self, kind: str) -> None:
        self._kind = kind
        self._obj = self._new()

    def _new(self) -> lz4.frame.LZ4FrameDecompressor | zstandard.ZstdDecompressionObj:
        if self._kind == "lz4":
            return lz4.frame.LZ4FrameDecompressor()
        return zstandard.ZstdDecompressor().decompressobj()

    def feed(self, data: bytes) -> bytes:
        out = []
        while data:
            out.append(self._obj.decompress(data))
            if not self._obj.eof:
                break
            data = self._obj.unused_data
            self._obj = self._new()
        return b"".join(out)

    def finish(self) -> bytes:
        return b""


class _Brotli:
    def __init__(self) -> None:
        assert _brotli is not None
        self._obj = _brotli.Decompressor()

    def feed(self, data: bytes) -> bytes:
        return bytes(self._obj.process(data))

    def finish(self) -> bytes:
        return b""


class _Checked:
    """Turns any codec failure into ClickHouse's CANNOT_DECOMPRESS error."""

    def __init__(self, inner: Decoder, name: str) -> None:
        self._inner = inner
        self._name = name

    def _fail(self, exc: Exception) -> ClickHouseError:
        return ClickHouseError(
            CANNOT_DECOMPRESS, f"Cannot decompress {self._name} request body: {exc} (CANNOT_DECOMPRESS)"
        )

    def feed(self, data: bytes) -> bytes:
        try:
            return self._inner.feed(data)
        except Exception as exc:
            raise self._fail(exc) from exc

    def finish(self) -> bytes:
        try:
            return self._inner.finish()
        except Exception as exc:
            raise self._fail(exc) from exc


def decoder(content_encoding: str | None) -> Decoder:
    """An incremental decoder for a request's Content-Encoding header value."""
    name = (content_encoding or "").strip().lower()
    if name in ("", "identity", "none"):
        return _Identity()
    if name in ("gzip", "x-gzip", "deflate"):
        return _Checked(_Zlib(gzip=name != "deflate"), name)
    if name in ("zstd", "lz4"):
        return _Checked(_Frames(name), name)
    if name == "br" and _brotli is not None:
        return _Checked(_Brotli(), name)
    raise ClickHouseError(UNKNOWN_COMPRESSION, f"Unknown HTTP content encoding '{name}' (UNKNOWN_COMPRESSION_METHOD)")


def choose_encoding(accept_encoding: str | None) -> str | None:
    """The first coding of Accept-Encoding (in the client's order, q=0 excluded) that is supported."""
    for item in (accept_encoding or "").split(","):
        name, _, params = item.strip().partition(";")
        name = name.strip().lower()
        if params.replace(" ", "").lower() in ("q=0", "q=0.0"):
            continue
        if name in SUPPORTED:
            return name
    return None


def encode(data: bytes | memoryview, coding: str) -> bytes:
    """Compress a whole response body with one of SUPPORTED."""
    if coding == "gzip":
        obj = zlib.compressobj(3, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
        return obj.compress(data) + obj.flush()
    if coding == "deflate":
        return zlib.compress(data, 3)
    if coding == "zstd":
        return zstandard.ZstdCompressor(level=1).compress(data)
    if coding == "lz4":
        return lz4.frame.compress(data)
    if coding == "br" and _brotli is not None:
        return bytes(_brotli.compress(bytes(data), quality=4))
    raise ValueError(f"unsupported coding {coding!r}")
