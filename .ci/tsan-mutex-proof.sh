#!/usr/bin/env bash
# Shows that TSan's reports inside Synchronization.Mutex.withLock closures are false positives
# (see .ci/tsan-mutex.c for why), with programs that use nothing but Mutex and Dispatch:
#   1. two threads add to an Int under one Mutex: the count is exact, and TSan reports races;
#   2. the same program, telling TSan "acquire" and "release" inside each critical section:
#      no reports, so the lock does order the accesses;
#   3. the same program with .ci/tsan-mutex.c preloaded: no reports;
#   4. a real race (a write under the lock, a read outside it) with the shim preloaded:
#      still reported, so the shim hides nothing real.
# Run it from anywhere; it works in a temporary directory and removes it. It prints what it
# sees and exits 1 if any of the four does not hold.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
clang=$(dirname "$(command -v swift)")/clang
[ -x "$clang" ] || clang=clang

cat > counter.swift <<'EOF'
import Dispatch
import Synchronization

@_silgen_name("__tsan_acquire") func tsanAcquire(_ address: UnsafeRawPointer)
@_silgen_name("__tsan_release") func tsanRelease(_ address: UnsafeRawPointer)

final class Counter: Sendable {
    let value = Mutex(0)
}
let counter = Counter()
let annotate = CommandLine.arguments.contains("annotate")
let tag = UnsafeMutableRawPointer.allocate(byteCount: 1, alignment: 1)
nonisolated(unsafe) let address = UnsafeRawPointer(tag)
DispatchQueue.concurrentPerform(iterations: 2) { _ in
    for _ in 0..<100_000 {
        counter.value.withLock {
            if annotate { tsanAcquire(address) }
            $0 += 1
            if annotate { tsanRelease(address) }
        }
    }
}
print("count \(counter.value.withLock { $0 }) of 200000")
EOF

cat > race.swift <<'EOF'
import Dispatch
import Synchronization

final class Box: @unchecked Sendable {
    let count = Mutex(0)
    var value = 0
}
let box = Box()
DispatchQueue.concurrentPerform(iterations: 2) { index in
    for _ in 0..<100_000 {
        if index == 0 {
            box.count.withLock { $0 += 1; box.value += 1 }   // under the lock
        } else {
            box.count.withLock { $0 += 1 }                    // contend, so the slow path is taken
            if box.value == -1 { print("never") }            // outside the lock: a real race
        }
    }
}
print("done")
EOF

swiftc -g -Onone -sanitize=thread counter.swift -o counter 2>/dev/null
swiftc -g -Onone -sanitize=thread race.swift -o race 2>/dev/null
"$clang" -shared -fPIC -O2 -o tsan-mutex.so "$here/tsan-mutex.c" -ldl

reports() { grep -c "WARNING: ThreadSanitizer" "$1" || true; }
failed=0
check() { # name, expected ("some" or "none"), output file
    local found
    found=$(reports "$3")
    if { [ "$2" = some ] && [ "$found" -gt 0 ]; } || { [ "$2" = none ] && [ "$found" -eq 0 ]; }; then
        echo "ok   $1: $found report(s); $(grep -E '^(count|done)' "$3" || true)"
    else
        echo "FAIL $1: $found report(s), expected $2"; failed=1
    fi
}
./counter > 1.txt 2>&1 || true
check "1. Mutex alone" some 1.txt
grep -m1 -A3 "WARNING: ThreadSanitizer" 1.txt | sed 's/ (BuildId.*//; s/^/       /'
./counter annotate > 2.txt 2>&1 || true
check "2. Mutex, acquire/release annotated in the closure" none 2.txt
LD_PRELOAD="$work/tsan-mutex.so" ./counter > 3.txt 2>&1 || true
check "3. Mutex, tsan-mutex.so preloaded" none 3.txt
LD_PRELOAD="$work/tsan-mutex.so" ./race > 4.txt 2>&1 || true
check "4. a real race, tsan-mutex.so preloaded" some 4.txt
exit $failed
