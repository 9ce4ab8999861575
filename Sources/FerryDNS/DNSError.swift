/// Why a DNS message could not be decoded, or a name could not be made
/// (Protocol/dns-sd.md, "Malformed packets"). A packet that fails to decode is dropped whole:
/// the decoder never returns part of a message.
public enum DNSError: Error, Equatable, Sendable {
    /// A length or count points past the end of the message; the text says what was being read.
    case truncated(String)
    /// The message is longer than `DNSLimits.maxMessageSize`; the payload is its length.
    case messageTooLarge(Int)
    /// A name is longer than 255 bytes in wire form (RFC 1035 §3.1).
    case nameTooLong
    /// A label is longer than 63 bytes (RFC 1035 §3.1).
    case labelTooLong
    /// A compression pointer leads back to bytes already read for the same name, or a name
    /// needs more than `DNSLimits.maxPointerJumps` jumps.
    case pointerLoop
    /// A compression pointer does not point strictly backward, to before the labels that
    /// contain it.
    case badPointer
    /// A label starts with the reserved type bits `01` or `10` (RFC 1035 §4.1.4, RFC 6891 §5);
    /// the payload is the byte that starts it.
    case badLabelType(UInt8)
    /// The header claims more questions and records together than `DNSLimits.maxRecords`; the
    /// payload is the claimed total.
    case tooManyRecords(Int)
    /// A record's data does not fit its type or its length (an A record of 3 bytes, an SRV
    /// target that runs past the data, a TXT string longer than the rest).
    case badRecordData(type: UInt16, reason: String)
    /// A name's text or bytes are not a name: an empty label, an escape that is not supported,
    /// a label that is not UTF-8 (RFC 6762 §16).
    case invalidName(String)
}
