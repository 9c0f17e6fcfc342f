@_spi(Reflection) import Swift
import Foundation
import Synchronization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Reads a stored property of an object by name, at the offset the Swift runtime's metadata
/// gives for it (`_forEachField`), found once per class and name; `Mirror` does the same read
/// but reflects, and boxes, every property before the one wanted, which made it most of what a
/// miss cost. Read-only; nil when the class has no such property.
enum StoredField {
    /// Where a property sits in instances of a type, and its type.
    fileprivate struct Field: @unchecked Sendable {
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
            // `.classType`, spelled out: the static is a `var` Swift 6 will not share.
            if let found = field(name, of: type, options: _EachFieldOptions(rawValue: 1 << 0)) { return found }
            current = _getSuperclass(type)
        }
        return nil
    }

    /// The stored property `name` declared by `type` itself (not inherited); nil if none.
    fileprivate static func field(_ name: String, of type: Any.Type, options: _EachFieldOptions) -> Field? {
        var found: Field?
        _ = _forEachField(of: type, options: options) { fieldName, offset, fieldType, _ in
            guard String(cString: fieldName) == name else { return true }
            found = Field(offset: offset, type: fieldType)
            return false
        }
        return found
    }
}

/// Whether a request's `timeoutInterval` was set: Foundation 6.3.1 then uses it instead of the
/// session's `timeoutIntervalForRequest`. It keeps that in a stored property of `URLRequest`
/// (`isTimeoutIntervalSet`) that a copy through `NSURLRequest` loses and `Mirror` hides.
enum RequestTimeout {
    /// Where the flag sits in a `URLRequest`; nil if Foundation no longer has it.
    private static let offset: Int? = StoredField.field("isTimeoutIntervalSet", of: URLRequest.self, options: _EachFieldOptions(rawValue: 0))
        .flatMap { $0.type == Bool.self ? $0.offset : nil }

    /// Whether the flag is read where Foundation keeps it (a fact test checks it stays so).
    static var isReadable: Bool { offset != nil }

    /// Whether `request`'s own timeout applies; false when that cannot be read.
    static func isSet(_ request: URLRequest) -> Bool {
        guard let offset else { return false }
        return withUnsafeBytes(of: request) { $0.load(fromByteOffset: offset, as: Bool.self) }
    }
}
