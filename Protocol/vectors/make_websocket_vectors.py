#!/usr/bin/env python3
"""Writes websocket.hex: golden vectors for Ferry's WebSocket codec, computed here from
RFC 6455 (sections 1.3, 5.2, 5.3, 5.7) independently of Ferry's Swift code. Each line is
`name: hex`; the Swift tests encode and decode every vector byte for byte."""
import base64, hashlib, struct

KEY = bytes.fromhex("37fa213d")  # the RFC 6455 §5.7 example masking key

def frame(fin, opcode, payload, key=None, rsv=0):
    b0 = (0x80 if fin else 0) | (rsv << 4) | opcode
    n = len(payload)
    mask = 0x80 if key else 0
    if n < 126: head = bytes([b0, mask | n])
    elif n <= 0xFFFF: head = bytes([b0, mask | 126]) + struct.pack(">H", n)
    else: head = bytes([b0, mask | 127]) + struct.pack(">Q", n)
    if key:
        head += key
        payload = bytes(c ^ key[i % 4] for i, c in enumerate(payload))
    return head + payload

def pattern(n):
    return bytes(i % 251 for i in range(n))

vectors = [
    ("text-unmasked-hello", frame(True, 1, b"Hello")),
    ("text-masked-hello", frame(True, 1, b"Hello", KEY)),
    ("text-fragment-1-unmasked", frame(False, 1, b"Hel")),
    ("text-fragment-2-unmasked", frame(True, 0, b"lo")),
    ("ping-unmasked-hello", frame(True, 9, b"Hello")),
    ("pong-masked-hello", frame(True, 10, b"Hello", KEY)),
    ("binary-16bit-256-unmasked", frame(True, 2, pattern(256))),
    ("binary-16bit-256-masked", frame(True, 2, pattern(256), KEY)),
    ("binary-64bit-65536-unmasked", frame(True, 2, pattern(65536))),
    ("close-1000-bye-unmasked", frame(True, 8, struct.pack(">H", 1000) + b"bye")),
    ("close-1001-going-away-masked", frame(True, 8, struct.pack(">H", 1001) + "going away — bye".encode(), KEY)),
    ("close-empty-unmasked", frame(True, 8, b"")),
]

# RFC 7692 §7.2.3 (permessage-deflate): the RFC's example bytes, each checked here against
# Python's zlib (inflated with the stripped 00 00 ff ff appended; the first two also deflated).
import zlib

def inflate(*messages):
    d = zlib.decompressobj(-15)
    out = []
    for m in messages:
        out.append(d.decompress(m + b"\x00\x00\xff\xff"))
        if d.eof:  # a BFINAL block ends the stream; the next message starts a new one
            d = zlib.decompressobj(-15)
    return out

def deflate_messages(*messages):
    c = zlib.compressobj(6, zlib.DEFLATED, -15)
    out = []
    for m in messages:
        data = c.compress(m) + c.flush(zlib.Z_SYNC_FLUSH)
        assert data.endswith(b"\x00\x00\xff\xff")
        out.append(data[:-4])
    return out

HELLO = bytes.fromhex("f248cdc9c90700")           # §7.2.3.1
HELLO_AGAIN = bytes.fromhex("f200110000")         # §7.2.3.2, second message sharing the window
STORED = bytes.fromhex("000500faff48656c6c6f00")    # §7.2.3.3, no compression
BFINAL = bytes.fromhex("f348cdc9c9070000")          # §7.2.3.4, a final block
TWO_BLOCKS = bytes.fromhex("f24805000000ffffcac9c90700")  # §7.2.3.5
EMPTY = bytes.fromhex("00")                         # §7.2.3.6, an empty message
assert deflate_messages(b"Hello", b"Hello") == [HELLO, HELLO_AGAIN]
assert inflate(HELLO, HELLO_AGAIN) == [b"Hello", b"Hello"]
assert inflate(STORED) == [b"Hello"] and inflate(TWO_BLOCKS) == [b"Hello"] and inflate(EMPTY) == [b""]
assert inflate(BFINAL, HELLO) == [b"Hello", b"Hello"]
RSV1 = 4
vectors += [
    ("deflate-hello-unmasked", frame(True, 1, HELLO, rsv=RSV1)),
    ("deflate-hello-masked", frame(True, 1, HELLO, KEY, rsv=RSV1)),
    ("deflate-hello-again-unmasked", frame(True, 1, HELLO_AGAIN, rsv=RSV1)),
    ("deflate-hello-fragment-1-unmasked", frame(False, 1, HELLO[:3], rsv=RSV1)),  # RSV1 on the first frame only
    ("deflate-hello-fragment-2-unmasked", frame(True, 0, HELLO[3:])),
    ("deflate-hello-stored-unmasked", frame(True, 1, STORED, rsv=RSV1)),
    ("deflate-hello-bfinal-unmasked", frame(True, 1, BFINAL, rsv=RSV1)),
    ("deflate-hello-two-blocks-unmasked", frame(True, 1, TWO_BLOCKS, rsv=RSV1)),
    ("deflate-empty-unmasked", frame(True, 2, EMPTY, rsv=RSV1)),
]
assert vectors[-9][1] == bytes.fromhex("c107f248cdc9c90700")  # the RFC's own frame bytes
assert vectors[-7][1] == bytes.fromhex("c105f200110000")
assert vectors[-6][1] + vectors[-5][1] == bytes.fromhex("4103f248cd") + bytes.fromhex("8004c9c90700")

key = "dGhlIHNhbXBsZSBub25jZQ=="
accept = base64.b64encode(hashlib.sha1((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest()).decode()
assert accept == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="  # RFC 6455 §1.3
request = ("GET /chat HTTP/1.1\r\nHost: server.example.com\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
           f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
           "Sec-WebSocket-Protocol: chat,superchat\r\n\r\n").encode()
response = ("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Accept: {accept}\r\nSec-WebSocket-Protocol: chat\r\n\r\n").encode()
vectors += [("handshake-request-chat", request), ("handshake-response-chat", response)]

# permessage-deflate negotiation (RFC 7692 §5, §7.1): Ferry's default client offer and a server
# answer that accepts it with its client_max_window_bits and no context takeover for the server.
request_deflate = ("GET /chat HTTP/1.1\r\nHost: server.example.com\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                   f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
                   "Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits\r\n\r\n").encode()
response_deflate = ("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                    f"Sec-WebSocket-Accept: {accept}\r\n"
                    "Sec-WebSocket-Extensions: permessage-deflate; server_no_context_takeover; client_max_window_bits=10\r\n\r\n").encode()
vectors += [("handshake-request-deflate", request_deflate), ("handshake-response-deflate", response_deflate)]

with open("websocket.hex", "w") as f:
    f.write("# Golden vectors for Protocol/websocket.md, generated by make_websocket_vectors.py.\n")
    f.write("# Masked frames use the RFC 6455 §5.7 key 37fa213d; pattern payloads are byte i = i % 251.\n")
    for name, data in vectors:
        f.write(f"{name}: {data.hex()}\n")
