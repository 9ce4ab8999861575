extension Duration {
    /// The duration in seconds, as a `Double` (for rates, timeouts and the figures logs and
    /// answers report).
    var seconds: Double {
        let (s, atto) = components
        return Double(s) + Double(atto) / 1e18
    }
}
