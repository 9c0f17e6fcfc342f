// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "swift-http-caching",
    products: [
        .library(name: "HTTPCaching", targets: ["HTTPCaching"]),
        // The store conformance checks, for authors of their own `ResponseStore`.
        .library(name: "HTTPCachingTestKit", targets: ["HTTPCachingTestKit"]),
        .executable(name: "cache-demo", targets: ["cache-demo"]),
    ],
    targets: [
        // The library: decision (pure), stores, and the URLProtocol plumbing.
        .target(name: "HTTPCaching"),
        .target(name: "HTTPCachingTestKit", dependencies: ["HTTPCaching"]),
        // A small HTTP/1.1 origin on 127.0.0.1, used by the tests, the demo and the benchmarks.
        .target(name: "LoopbackOrigin"),
        .executableTarget(
            name: "cache-demo",
            dependencies: ["HTTPCaching", "LoopbackOrigin"],
            path: "Examples/cache-demo"
        ),
        // The benchmarks: `swift run -c release cache-bench`.
        .executableTarget(
            name: "cache-bench",
            dependencies: ["HTTPCaching", "HTTPCachingTestKit", "LoopbackOrigin"]
        ),
        .testTarget(
            name: "HTTPCachingTests",
            dependencies: ["HTTPCaching", "HTTPCachingTestKit", "LoopbackOrigin", "cache-demo", "registration-probe", "store-crash-writer",
                           "store-stress-worker", "transparency-probe"]
        ),
        // Run by the tests in a fresh process (global registration depends on process history).
        .executableTarget(
            name: "registration-probe",
            dependencies: ["HTTPCaching", "LoopbackOrigin"],
            path: "Tests/RegistrationProbe"
        ),
        // Run by the tests in a fresh process, to measure memory that is the program's alone.
        .executableTarget(
            name: "transparency-probe",
            dependencies: ["HTTPCaching", "LoopbackOrigin"],
            path: "Tests/TransparencyProbe"
        ),
        // Run by the tests and killed with SIGKILL at random moments, to prove crash safety.
        .executableTarget(
            name: "store-crash-writer",
            dependencies: ["HTTPCaching"],
            path: "Tests/StoreCrashWriter"
        ),
        // Run by the tests as several processes sharing one store directory, some killed.
        .executableTarget(
            name: "store-stress-worker",
            dependencies: ["HTTPCaching", "HTTPCachingTestKit"],
            path: "Tests/StoreStressWorker"
        ),
    ],
    swiftLanguageModes: [.v6]
)
