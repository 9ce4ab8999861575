/// Every BLIP 3 wire constant in one place, mirroring Protocol/blip.md.
public enum BLIPConstants {
    /// The WebSocket subprotocol prefix; the full token is `BLIP_3+<app>`.
    public static let subprotocolPrefix = "BLIP_3+"
    /// The largest WebSocket message (frame) we send: header + payload + CRC.
    public static let maxFrameSize = 16 * 1024
    /// The frame budget of a normal message when an urgent one is queued behind it.
    public static let frameSizeBeforeUrgent = 4 * 1024
    /// A receiver acknowledges each message every this many received bytes.
    public static let ackInterval = 50_000
    /// A sender freezes a message when this many of its bytes are unacknowledged.
    public static let maxUnackedBytes = 128_000
    /// The largest properties block accepted (Couchbase's implementation limit).
    public static let maxPropertiesSize = 100 * 1024
    /// The deflate trailer of a sync flush, stripped by senders and re-added by receivers.
    public static let syncFlushTrailer: [UInt8] = [0x00, 0x00, 0xFF, 0xFF]
    /// The error body for an unknown profile (Couchbase Lite's exact words).
    public static let noHandlerMessage = "no handler for message"
}

/// The message type in the low three bits of the flags.
public enum BLIPMessageType: UInt8, Sendable {
    /// A request (MSG).
    case request = 0
    /// A response (RPY).
    case response = 1
    /// An error response (ERR).
    case error = 2
    /// An acknowledgement of a request's bytes (ACKMSG).
    case ackRequest = 4
    /// An acknowledgement of a response's bytes (ACKRPY).
    case ackResponse = 5

    /// True for ACKMSG and ACKRPY.
    public var isAck: Bool { rawValue & 4 != 0 }
    /// True for RPY and ERR.
    public var isResponse: Bool { self == .response || self == .error }
}

/// The flags byte of a BLIP 3 frame.
public struct BLIPFlags: OptionSet, Sendable, Hashable {
    public let rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    /// Bits 0–2: the message type.
    public static let typeMask: UInt8 = 0x07
    /// This frame's payload is raw-deflated.
    public static let compressed = BLIPFlags(rawValue: 0x08)
    /// The message is scheduled ahead of normal ones.
    public static let urgent = BLIPFlags(rawValue: 0x10)
    /// The request wants no response.
    public static let noReply = BLIPFlags(rawValue: 0x20)
    /// More frames of this message follow.
    public static let moreComing = BLIPFlags(rawValue: 0x40)

    /// The type bits, if they name a defined type.
    public var type: BLIPMessageType? { BLIPMessageType(rawValue: rawValue & Self.typeMask) }

    /// Flags for a message of `type` with these options.
    public init(type: BLIPMessageType, _ options: BLIPFlags = []) {
        rawValue = type.rawValue | (options.rawValue & ~Self.typeMask)
    }
}
