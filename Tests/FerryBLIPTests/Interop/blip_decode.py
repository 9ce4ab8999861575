#!/usr/bin/env python3
"""An independent BLIP 3 decoder, written from Protocol/blip.md with only the standard library
(zlib, binascii). Reads one direction's frames, one hex WebSocket message per line, on stdin;
checks the running CRC32, inflates compressed frames with one shared raw-deflate stream, and
reassembles messages. Prints one JSON object per complete message, or `ERROR <why>` and exit 1.
With --encode, reads JSON message specs instead and prints frames (hex) that Ferry must accept."""
import binascii
import json
import sys
import zlib


def varint(buf, i):
    value = shift = 0
    while True:
        if i >= len(buf):
            raise ValueError("truncated varint")
        b = buf[i]
        value |= (b & 0x7F) << shift
        i += 1
        if not b & 0x80:
            return value, i
        shift += 7


def put_varint(n):
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def decode(lines):
    crc = 0
    inflater = zlib.decompressobj(-15)
    partial = {}
    for line in lines:
        frame = bytes.fromhex(line.strip())
        number, i = varint(frame, 0)
        flags, i = varint(frame, i)
        kind = flags & 7
        if kind in (4, 5):
            count, _ = varint(frame, i)
            print(json.dumps({"ack": kind, "number": number, "bytes": count}))
            continue
        payload, sent = frame[i:-4], int.from_bytes(frame[-4:], "big")
        if flags & 0x08:
            payload = inflater.decompress(payload + b"\x00\x00\xff\xff")
        crc = binascii.crc32(payload, crc)
        if crc != sent:
            raise ValueError(f"CRC mismatch on #{number}: {crc:08x} != {sent:08x}")
        key = (kind, number)
        partial[key] = partial.get(key, b"") + payload
        if flags & 0x40:
            continue
        stream = partial.pop(key)
        plen, j = varint(stream, 0)
        props = stream[j:j + plen].split(b"\x00")[:-1]
        body = stream[j + plen:]
        print(json.dumps({
            "type": kind, "number": number,
            "urgent": bool(flags & 0x10), "compressed": bool(flags & 0x08), "noreply": bool(flags & 0x20),
            "properties": [[props[k].decode(), props[k + 1].decode()] for k in range(0, len(props), 2)],
            "body_len": len(body), "body_crc": binascii.crc32(body),
        }), flush=True)


def encode(specs):
    """Each spec: {"number", "type", "properties": [[k, v]...], "body": str, "compress": bool,
    "frame": max payload bytes per frame}. Frames are written in spec order, one message after another."""
    crc = 0
    deflater = zlib.compressobj(6, zlib.DEFLATED, -15)
    for line in specs:
        s = json.loads(line)
        props = b"".join(k.encode() + b"\0" + v.encode() + b"\0" for k, v in s["properties"])
        stream = put_varint(len(props)) + props + s["body"].encode()
        size = s.get("frame", 1000)
        for off in range(0, len(stream), size):
            chunk = stream[off:off + size]
            more = off + size < len(stream)
            flags = s.get("type", 0) | (0x40 if more else 0) | (0x08 if s.get("compress") else 0)
            crc = binascii.crc32(chunk, crc)
            if s.get("compress"):
                data = deflater.compress(chunk) + deflater.flush(zlib.Z_SYNC_FLUSH)
                assert data.endswith(b"\x00\x00\xff\xff")
                data = data[:-4]
            else:
                data = chunk
            print((put_varint(s["number"]) + bytes([flags]) + data + crc.to_bytes(4, "big")).hex(), flush=True)


try:
    if "--encode" in sys.argv:
        encode([l for l in sys.stdin if l.strip()])
    else:
        decode([l for l in sys.stdin if l.strip()])
except Exception as e:  # any failure is the test's failure, said plainly
    print(f"ERROR {e}", flush=True)
    sys.exit(1)
