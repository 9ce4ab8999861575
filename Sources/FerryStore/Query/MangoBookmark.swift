import FoundationEssentials

/// A `_find` page's end as the next query gives it back: the last row's index key and
/// document ID, as base64url JSON (opaque to clients, as CouchDB's are).
public enum MangoBookmark {
    /// The bookmark after the row with `key` and `id`.
    public static func encode(_ key: [JSONValue], _ id: String) -> String {
        let json = CanonicalJSON.encode(.array([.array(key), .string(id)]))
        return Data(json).base64EncodedString().replacing("+", with: "-")
            .replacing("/", with: "_").replacing("=", with: "")
    }

    /// The row a bookmark names; nil for text that is not one of Ferry's (untrusted: at most
    /// 64 KiB is read).
    public static func decode(_ text: String) -> (key: [JSONValue], id: String)? {
        guard text.utf8.count <= 64 * 1024 else { return nil }
        var b64 = text.replacing("-", with: "+").replacing("_", with: "/")
        while b64.count % 4 != 0 { b64 += "=" }
        guard let data = Data(base64Encoded: b64),
              case .array(let parts)? = try? JSONParser.parse(Array(data), maxDepth: 32), parts.count == 2,
              case .array(let key) = parts[0], case .string(let id) = parts[1] else { return nil }
        return (key, id)
    }
}
