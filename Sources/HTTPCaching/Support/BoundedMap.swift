/// A dictionary that keeps at most `limit` keys: setting a new key past the limit forgets the
/// key set longest ago. Value-typed: keep it under a lock.
struct BoundedMap<Key: Hashable, Value> {
    private var values: [Key: Value] = [:]
    /// The keys, oldest first, each once.
    private var order: [Key] = []
    let limit: Int

    init(limit: Int) {
        self.limit = limit
    }

    /// The value for a key; setting nil forgets the key.
    subscript(key: Key) -> Value? {
        get { values.isEmpty ? nil : values[key] }
        set {
            guard let newValue else {
                if values.removeValue(forKey: key) != nil { order.removeAll { $0 == key } }
                return
            }
            if values.updateValue(newValue, forKey: key) == nil { order.append(key) }
            if order.count > limit {
                let excess = order.count - limit
                for oldest in order.prefix(excess) { values[oldest] = nil }
                order.removeFirst(excess)
            }
        }
    }

    var count: Int { values.count }
}
