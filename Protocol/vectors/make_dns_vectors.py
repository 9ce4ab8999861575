#!/usr/bin/env python3
"""Writes dns.hex: golden vectors for Protocol/dns-sd.md. Each line is name: hex of the exact
bytes of one Multicast DNS message. Made without Ferry's code: by dnspython (pip install
dnspython; 2.9.2 was used), and the full DNS-SD response also by hand, field by field below.

dnspython speaks unicast DNS, so two things are added for Multicast DNS:
- the top bit of the class (QU in a question, cache-flush in a record, RFC 6762 §5.4 and
  §10.2): dnspython takes any 16-bit class, but looks the rdata type up by class, so the IN
  types are registered under class 0x8001 too;
- compression of the names inside SRV and NSEC data, which RFC 6762 §18.14 asks for and
  unicast DNS forbids (RFC 2782, RFC 4034 §4.1.1): `mdns_wire` passes dnspython's own
  compression table into those two types; `unicast_wire` is dnspython as it ships.

Run from anywhere: .venv/bin/python Protocol/vectors/make_dns_vectors.py"""
import ipaddress
import pathlib
import struct

import dns.message
import dns.name
import dns.rdata
import dns.rdataclass
import dns.rdatatype
import dns.rrset
from dns.rdtypes.ANY.CNAME import CNAME
from dns.rdtypes.ANY.HINFO import HINFO
from dns.rdtypes.ANY.NSEC import NSEC
from dns.rdtypes.ANY.PTR import PTR
from dns.rdtypes.ANY.TXT import TXT
from dns.rdtypes.IN.A import A
from dns.rdtypes.IN.AAAA import AAAA
from dns.rdtypes.IN.SRV import SRV
from dns.rdtypes.util import Bitmap

IN, FLUSH = 1, 0x8001
T = dns.rdatatype
for t, cls in ((T.A, A), (T.AAAA, AAAA), (T.SRV, SRV), (T.TXT, TXT), (T.NSEC, NSEC), (T.PTR, PTR)):
    dns.rdata._rdata_classes[(FLUSH, t)] = cls


def name(*labels):
    """An absolute name of raw UTF-8 labels (dnspython's text form would IDNA-encode them)."""
    return dns.name.Name([l.encode() for l in labels] + [b""])


SERVICE = name("_ferry", "_tcp", "local")
INSTANCE = name("Molly\u2019s Mac v1.2", "_ferry", "_tcp", "local")  # a UTF-8 apostrophe and a dot
HOST = name("Mollys-Mac", "local")


def rrset(owner, rdclass, ttl, rdata):
    r = dns.rrset.RRset(owner, rdclass, rdata.rdtype)
    r.add(rdata, ttl)
    return r


def ptr(owner, target, ttl):
    return rrset(owner, IN, ttl, PTR(IN, T.PTR, target))


def srv(owner, rdclass, ttl, port, target):
    return rrset(owner, rdclass, ttl, SRV(rdclass, T.SRV, 0, 0, port, target))


def txt(owner, rdclass, ttl, *strings):
    return rrset(owner, rdclass, ttl, TXT(rdclass, T.TXT, [s.encode() for s in strings]))


def nsec(owner, ttl, *types):
    return rrset(owner, FLUSH, ttl, NSEC(FLUSH, T.NSEC, owner, Bitmap.from_rdtypes(list(types)).windows))


def message(flags, questions=(), answers=(), authorities=(), additionals=()):
    m = dns.message.Message(id=0)
    m.flags = flags
    for owner, rdtype, rdclass in questions:
        m.question.append(dns.rrset.RRset(owner, rdclass, rdtype))
    m.answer.extend(answers)
    m.authority.extend(authorities)
    m.additional.extend(additionals)
    return m


def unicast_wire(m):
    return m.to_wire()


def mdns_wire(m):
    """As unicast_wire, with the names in SRV and NSEC data compressed (RFC 6762 §18.14)."""
    def srv_to_wire(self, file, compress=None, origin=None, canonicalize=False):
        file.write(struct.pack("!HHH", self.priority, self.weight, self.port))
        self.target.to_wire(file, compress, origin, canonicalize)

    def nsec_to_wire(self, file, compress=None, origin=None, canonicalize=False):
        self.next.to_wire(file, compress, origin, False)
        Bitmap(self.windows).to_wire(file)

    saved = SRV._to_wire, NSEC._to_wire
    SRV._to_wire, NSEC._to_wire = srv_to_wire, nsec_to_wire
    try:
        return m.to_wire()
    finally:
        SRV._to_wire, NSEC._to_wire = saved


def mdns_from_wire(wire):
    """dns.message.from_wire, with compressed names allowed in all rdata (RFC 6762 §18.14);
    dnspython as it ships refuses them in SRV and NSEC data."""
    import dns.wire
    saved = dns.wire.Parser.get_name
    dns.wire.Parser.get_name = lambda self, origin=None, decompress=False: saved(self, origin, True)
    try:
        return dns.message.from_wire(wire)
    finally:
        dns.wire.Parser.get_name = saved


# (a) A browse query for Ferry's service type, asking for a unicast answer (QU, RFC 6762 §5.4).
query_ptr_qu = message(0, questions=[(SERVICE, T.PTR, FLUSH)])

# A browse query with a known answer (RFC 6762 §7.1): the responder stays quiet about it.
query_known_answer = message(0, questions=[(SERVICE, T.PTR, IN)], answers=[ptr(SERVICE, INSTANCE, 4500)])

# A probe (RFC 6762 §8.1): ANY for the instance name, QU, the proposed records in authority.
probe = message(0, questions=[(INSTANCE, T.ANY, FLUSH)],
                authorities=[srv(INSTANCE, IN, 120, 4984, HOST), txt(INSTANCE, IN, 4500, "txtvers=1")])

# (b) The answer to a browse (RFC 6763 §12.1): PTR, and in additional the SRV, TXT, addresses
# and NSEC negative answers (RFC 6762 §6.1), unique records with cache-flush set.
RESPONSE = 0x8400  # QR, AA
response = message(RESPONSE, answers=[ptr(SERVICE, INSTANCE, 4500)], additionals=[
    srv(INSTANCE, FLUSH, 120, 4984, HOST),
    txt(INSTANCE, FLUSH, 4500, "txtvers=1", "secure"),
    rrset(HOST, FLUSH, 120, A(FLUSH, T.A, "192.0.2.10")),
    rrset(HOST, FLUSH, 120, AAAA(FLUSH, T.AAAA, "2001:db8::10")),
    nsec(INSTANCE, 4500, T.TXT, T.SRV),
    nsec(HOST, 120, T.A, T.AAAA),
])

# (c) A goodbye (RFC 6762 §10.1): the PTR again with TTL 0.
goodbye = message(RESPONSE, answers=[ptr(SERVICE, INSTANCE, 0)])

# Types Ferry does not parse: a CNAME whose target dnspython compresses (RFC 6762 §18.14 allows
# it), an HINFO, and an EDNS0 OPT record (RFC 6891: class is the payload size, 1440).
other_types = message(RESPONSE, answers=[
    rrset(name("alias", "local"), IN, 120, CNAME(IN, T.CNAME, HOST)),
    rrset(HOST, IN, 120, HINFO(IN, T.HINFO, b"ARM64", b"Linux")),
])
other_types.use_edns(0, payload=1440)


def hand_response():
    """(b) written out by hand: every name compressed against the longest suffix already
    written, as RFC 1035 §4.1.4 and RFC 6762 §18.14 describe. Offsets are from the start."""
    def label(s):
        b = s.encode()
        return bytes([len(b)]) + b

    def pointer(offset):
        return struct.pack("!H", 0xC000 | offset)

    def fixed(rdtype, rdclass, ttl, rdata):
        return struct.pack("!HHIH", rdtype, rdclass, ttl, len(rdata)) + rdata

    out = bytes.fromhex("0000 8400 0000 0001 0000 0006")  # id 0; QR AA; 0 q, 1 an, 0 ns, 6 ar
    assert len(out) == 12
    # Answer: PTR _ferry._tcp.local -> instance.
    assert len(out) == 12                                 # 12: "_ferry._tcp.local", whole
    out += label("_ferry") + label("_tcp") + label("local") + b"\x00"
    assert len(out) == 31                                 # "local" is at 24
    rdata = label("Molly\u2019s Mac v1.2") + pointer(12)   # instance label at 41, then -> 12
    out += fixed(T.PTR, IN, 4500, rdata)
    assert len(out) == 62
    # Additional: SRV instance (-> 41) 0 0 4984 Mollys-Mac (at 80) .local (-> 24).
    out += pointer(41) + fixed(T.SRV, FLUSH, 120, struct.pack("!HHH", 0, 0, 4984) + label("Mollys-Mac") + pointer(24))
    assert len(out) == 93
    # TXT instance (-> 41): "txtvers=1" "secure".
    out += pointer(41) + fixed(T.TXT, FLUSH, 4500, label("txtvers=1") + label("secure"))
    assert len(out) == 122
    # A and AAAA Mollys-Mac.local (-> 80).
    out += pointer(80) + fixed(T.A, FLUSH, 120, ipaddress.ip_address("192.0.2.10").packed)
    out += pointer(80) + fixed(T.AAAA, FLUSH, 120, ipaddress.ip_address("2001:db8::10").packed)
    assert len(out) == 166
    # NSEC instance (-> 41), next name -> 41, window 0: TXT (16) and SRV (33): 5 bitmap bytes.
    out += pointer(41) + fixed(T.NSEC, FLUSH, 4500, pointer(41) + bytes([0, 5, 0x00, 0x00, 0x80, 0x00, 0x40]))
    # NSEC Mollys-Mac.local (-> 80), next -> 80, window 0: A (1) and AAAA (28): 4 bitmap bytes.
    out += pointer(80) + fixed(T.NSEC, FLUSH, 120, pointer(80) + bytes([0, 4, 0x40, 0x00, 0x00, 0x08]))
    assert len(out) == 207
    return out


hand = hand_response()
# The hand-made bytes are what dnspython writes with SRV and NSEC compressed, and read back as
# the same message; the query, known-answer and goodbye vectors have no SRV or NSEC, so both of
# dnspython's forms agree there.
assert hand == mdns_wire(response), (hand.hex(), mdns_wire(response).hex())
assert mdns_from_wire(hand) == response
for m in (query_ptr_qu, query_known_answer, goodbye):
    assert mdns_wire(m) == unicast_wire(m)
for m in (query_ptr_qu, query_known_answer, goodbye, response, other_types):
    assert dns.message.from_wire(unicast_wire(m)) == m
assert mdns_from_wire(mdns_wire(probe)) == probe

vectors = [
    ("# Golden vectors for Protocol/dns-sd.md, generated by make_dns_vectors.py (dnspython, and by hand).", None),
    ("# Names: _ferry._tcp.local; the instance \"Molly\u2019s Mac v1.2\" (UTF-8 apostrophe, a dot in the label); the host", None),
    ("# Mollys-Mac.local at 192.0.2.10 and 2001:db8::10, port 4984. FerryDNS decodes every vector to the message", None),
    ("# its test spells out; where marked, it also encodes that message to exactly these bytes.", None),
    ("# (a) PTR query for _ferry._tcp.local with the QU bit (class 0x8001). Encode: exact.", None),
    ("query-ptr-qu", unicast_wire(query_ptr_qu)),
    ("# PTR query (QM) with a known answer, TTL 4500; the PTR data points back at the question's name. Encode: exact.", None),
    ("query-known-answer", unicast_wire(query_known_answer)),
    ("# Probe: ANY for the instance name with QU; authority SRV (target's \"local\" compressed) and TXT. Encode: exact.", None),
    ("probe", mdns_wire(probe)),
    ("# (b) Response (QR AA): PTR; additional SRV, TXT, A, AAAA, NSEC (instance: TXT SRV), NSEC (host: A AAAA),", None),
    ("# cache-flush on all but the PTR; every name compressed, inside SRV and NSEC data too. Made by hand and", None),
    ("# equal to dnspython's with SRV/NSEC compression (make_dns_vectors.py hand_response). Encode: exact.", None),
    ("response", hand),
    ("# The same response as stock dnspython writes it: SRV target and NSEC next names uncompressed (unicast rules).", None),
    ("response-unicast-rdata", unicast_wire(response)),
    ("# (c) Goodbye: the PTR with TTL 0 (RFC 6762 \u00a710.1). Encode: exact.", None),
    ("goodbye", unicast_wire(goodbye)),
    ("# Types FerryDNS keeps as bytes: CNAME alias.local -> Mollys-Mac.local (target compressed: stored expanded),", None),
    ("# HINFO \"ARM64\" \"Linux\", and an EDNS0 OPT record (root name, class 1440 = payload size). Decode only.", None),
    ("response-other-types", unicast_wire(other_types)),
]
out = []
for label_, data in vectors:
    out.append(label_ if data is None else f"{label_}: {data.hex()}")
here = pathlib.Path(__file__).resolve().parent
(here / "dns.hex").write_text("\n".join(out) + "\n")
# The fuzzer's seeds are the same messages as binary files (docs/fuzzing.md).
seeds = here.parent.parent / "Fuzz" / "seeds" / "FuzzDNS"
seeds.mkdir(parents=True, exist_ok=True)
for label_, data in vectors:
    if data is not None:
        (seeds / label_).write_bytes(data)
