import Foundation
import Testing
@testable import HTTPCaching

/// Case names read by tag (`EnumCaseNames`), what tells how a task takes its body: the same
/// names the runtime gives, for every kind of enum, whichever case is asked first.
@Suite("Enum case names")
struct EnumCaseNamesTests {
    enum Behaviour {
        case callDelegate
        case completion(@Sendable (Data?) -> Void)
        case completionWithDelegate(@Sendable (Data?) -> Void, AnyObject?)
        case download(@Sendable (URL?) -> Void)
    }

    enum Plain { case a, b, c }
    enum OnePayload { case none, some(String), other }
    enum Generic<T> { case value(T), nothing, pair(T, T) }

    @Test("the value witnesses' tags are checked and used on this platform")
    func tagsAreReliable() {
        #expect(EnumCaseNames.tagsAreReliable)
        #expect(EnumCaseNames.tag(of: 42) == nil && EnumCaseNames.tag(of: "text") == nil && EnumCaseNames.tag(of: NSObject()) == nil)
    }

    @Test("every case of every kind of enum is named as the runtime names it, asked in either order, again and again")
    func namesMatchTheRuntime() {
        let behaviours: [Behaviour] = [.completion { _ in }, .callDelegate, .download { _ in }, .completionWithDelegate({ _ in }, nil),
                                       .completionWithDelegate({ _ in }, NSObject())]
        for value in behaviours + behaviours.reversed() {
            #expect(EnumCaseNames.name(of: value) == EnumCaseNames.runtimeName(of: value))
        }
        #expect(behaviours.map { EnumCaseNames.name(of: $0) } == ["completion", "callDelegate", "download", "completionWithDelegate", "completionWithDelegate"])
        for value in [Plain.c, .a, .b, .a] { #expect(EnumCaseNames.name(of: value) == EnumCaseNames.runtimeName(of: value)) }
        for value in [OnePayload.some("x"), .other, .none] { #expect(EnumCaseNames.name(of: value) == EnumCaseNames.runtimeName(of: value)) }
        for value in [Generic.pair(1, 2), .nothing, .value(3)] { #expect(EnumCaseNames.name(of: value) == EnumCaseNames.runtimeName(of: value)) }
        for value in [Generic.value("s"), .pair("a", "b")] { #expect(EnumCaseNames.name(of: value) == EnumCaseNames.runtimeName(of: value)) }
        #expect(EnumCaseNames.name(of: 7) == nil)
    }
}
