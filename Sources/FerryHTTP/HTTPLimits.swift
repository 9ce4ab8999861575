/// The most an HTTP peer may make the decoder buffer or accept: every parser of untrusted
/// bytes has a limit.
public struct HTTPLimits: Sendable, Equatable {
    /// The largest request head (request line and header fields, with their CRLFs), in bytes;
    /// larger is refused with 431.
    public var maxHeadSize = 16 * 1024
    /// The most header fields a request may carry; more is refused with 431.
    public var maxHeaderCount = 100
    /// The largest request body, in bytes (declared or, for a chunked body, received); larger is
    /// refused with 413.
    public var maxBodySize = 64 * 1024 * 1024
    /// The longest chunk-size line of a chunked body (size and extensions) and the largest
    /// trailer section, in bytes; longer is refused with 400.
    public var maxChunkLineSize = 1024

    /// The defaults: 16 KiB heads, 100 fields, 64 MiB bodies.
    public init() {}
}
