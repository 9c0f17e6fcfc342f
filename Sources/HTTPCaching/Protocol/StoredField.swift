@_spi(Reflection) import Swift
import Synchronization

/// Reads a stored property of an object by name, at the offset the Swift runtime's metadata
/// gives for it (`_forEachField`), found once per class and name; `Mirror` does the same read
/// but reflects, and boxes, every property before the one wanted, which made it most of what a
/// miss cost. Read-only; nil when the class has no such property.
enum StoredField {
    /// Where a property sits in instances of a class, and its type.
    private struct Field: @unchecked Sendable {
        let offset: Int
        let type: Any.Type
    }

    /// A class and a property name, as the fields found are kept by.
    private struct Key: Hashable {
        let type: ObjectIdentifier
        let name: String
    }

    private static let fields = Mutex<[Key: Field?]>([:])

    /// The property `name` of `object`, searched up its class hierarchy; nil if there is none.
    static func value(named name: String, in object: AnyObject) -> Any? {
        let cls: AnyClass = type(of: object)
        let cacheKey = Key(type: ObjectIdentifier(cls), name: name)
        let field: Field?
        if let known = fields.withLock({ $0[cacheKey] }) {
            field = known
        } else {
            field = find(name, in: cls)
            fields.withLock { $0[cacheKey] = field }
        }
        guard let field else { return nil }
        func read<T>(_: T.Type) -> Any {
            withExtendedLifetime(object) {
                UnsafeRawPointer(Unmanaged.passUnretained(object).toOpaque()).advanced(by: field.offset).load(as: T.self)
            }
        }
        return _openExistential(field.type, do: read)
    }

    private static func find(_ name: String, in cls: AnyClass) -> Field? {
        var current: AnyClass? = cls
        while let type = current {
            var found: Field?
            // `.classType`, spelled out: the static is a `var` Swift 6 will not share.
            _ = _forEachField(of: type, options: _EachFieldOptions(rawValue: 1 << 0)) { fieldName, offset, fieldType, _ in
                guard String(cString: fieldName) == name else { return true }
                found = Field(offset: offset, type: fieldType)
                return false
            }
            if let found { return found }
            current = _getSuperclass(type)
        }
        return nil
    }
}
