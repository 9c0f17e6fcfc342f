import Synchronization

/// The name of an enum value's case, as `print` names it, found once per type and case.
///
/// The runtime's own answer (`swift_EnumCaseName`) decodes the case's payload types from their
/// mangled names on every call: most of what reading a task's registration cost, on every
/// miss. A case is told by its tag instead, which the type's value witness table gives
/// (`getEnumTag`, the entry after the standard witnesses, in the stable Swift ABI), and the name
/// is looked up for a tag once. The tag is trusted only after it was checked on an enum of
/// this file's own (`tagsAreReliable`); otherwise every name is the runtime's.
enum EnumCaseNames {
    private struct Key: Hashable {
        let type: ObjectIdentifier
        let tag: UInt32
    }

    private static let names = Mutex<[Key: String]>([:])

    /// The case name of `value`; nil for a value that is not an enum.
    static func name<T>(of value: T) -> String? {
        guard tagsAreReliable, let tag = tag(of: value) else { return runtimeName(of: value) }
        let key = Key(type: ObjectIdentifier(T.self), tag: tag)
        if let known = names.withLock({ $0[key] }) { return known }
        guard let name = runtimeName(of: value) else { return nil }
        names.withLock { $0[key] = name }
        return name
    }

    /// The runtime's name for the case of `value`.
    static func runtimeName<T>(of value: T) -> String? {
        enumCaseName(value).map { String(cString: $0) }
    }

    private enum Probe {
        case first(Int)
        case second(String)
        case third
    }

    /// Whether `tag(of:)` numbers an enum's cases as the ABI says: those with a payload first,
    /// in order, then the others.
    static let tagsAreReliable: Bool = {
        tag(of: Probe.first(1)) == 0 && tag(of: Probe.second("x")) == 1 && tag(of: Probe.third) == 2 && tag(of: 1) == nil
    }()

    /// The tag of an enum value from its type's value witnesses; nil when the type has no enum
    /// witnesses (it is not an enum).
    static func tag<T>(of value: T) -> UInt32? {
        let word = MemoryLayout<UnsafeRawPointer>.stride
        let metadata = unsafeBitCast(T.self as Any.Type, to: UnsafeRawPointer.self)
        let witnesses = metadata.load(fromByteOffset: -word, as: UnsafeRawPointer.self)
        // After eight functions, `size` and `stride`: `flags` (32 bits), whose bit 21 says
        // whether the enum witnesses follow `extraInhabitantCount` (32 bits), whatever the
        // pointer width.
        let flags = witnesses.load(fromByteOffset: 10 * word, as: UInt32.self)
        guard flags & (1 << 21) != 0 else { return nil }
        typealias GetEnumTag = @convention(c) (UnsafeRawPointer, UnsafeRawPointer) -> UInt32
        let getEnumTag = witnesses.load(fromByteOffset: 10 * word + 8, as: GetEnumTag.self)
        return withUnsafePointer(to: value) { getEnumTag(UnsafeRawPointer($0), metadata) }
    }
}

/// The name of an enum value's case, as the runtime prints it; nil for a value that is not an
/// enum. (The runtime entry point `print` and `String(describing:)` use.)
@_silgen_name("swift_EnumCaseName")
private func enumCaseName<T>(_ value: T) -> UnsafePointer<CChar>?
