// Tells ThreadSanitizer what Synchronization.Mutex does when it is contended, so the CI's
// TSan run needs no suppressions. Built by .ci/run and loaded with LD_PRELOAD for that run only.
//
// Why: on Linux, Swift 6.3.1's Mutex is a futex lock. `withLock` is inlined into our code:
// the uncontended lock and unlock are compare-exchanges on the lock word (acquiring,
// releasing) that TSan sees, because our code is instrumented. When the lock is contended,
// the inlined code calls _MutexHandle._lockSlow / _unlockSlow / _tryLockSlow in
// libswiftSynchronization.so, which is not instrumented: _lockSlow spins on a plain
// `lock cmpxchg`, then calls syscall(SYS_futex, FUTEX_LOCK_PI_PRIVATE), where the kernel
// makes the thread the owner; _unlockSlow calls syscall(SYS_futex, FUTEX_UNLOCK_PI_PRIVATE).
// (objdump -d libswiftSynchronization.so shows it: syscall 0xca with ops 0x86, 0x87, 0x8.)
// TSan sees neither the acquire nor the release there, so two critical sections of one
// Mutex look unordered, and every access inside `withLock` closures that met contention is
// reported as a race. .ci/tsan-mutex-proof.sh shows it with a program that uses nothing but
// Mutex: a correct count and reports without this file; no reports with it; and a real race
// (one access outside the lock) still reported with it.
//
// This file wraps the three slow paths: each calls the real one, then (after a successful
// lock) __tsan_acquire, or (before an unlock) __tsan_release, on the lock word, the address
// the inlined fast path's atomics use. Nothing else changes. A `race:` suppression matching
// the closures would hide real races too: TSan suppresses a report when either of its two
// stacks matches, so a write under the lock racing with a read outside it would vanish.
//
// In a process without TSan the annotations are absent and the wrappers only forward. If a
// toolchain renames these symbols, the wrappers are never called and the TSan run reports
// the races again: look here first.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define SWIFTCALL __attribute__((swiftcall))
#define SELF __attribute__((swift_context)) // passed in the Swift self register (r13)

#define LOCK_SLOW "$s15Synchronization12_MutexHandleV9_lockSlowyys6UInt32VF"
#define TRY_LOCK_SLOW "$s15Synchronization12_MutexHandleV12_tryLockSlowSbyF"
#define UNLOCK_SLOW "$s15Synchronization12_MutexHandleV11_unlockSlowyyF"

typedef SWIFTCALL void (*LockSlow)(uint32_t, SELF void *);
typedef SWIFTCALL bool (*TryLockSlow)(SELF void *);
typedef SWIFTCALL void (*UnlockSlow)(SELF void *);
typedef void (*Annotate)(void *);

static LockSlow realLockSlow;
static TryLockSlow realTryLockSlow;
static UnlockSlow realUnlockSlow;
static Annotate acquire, release;

__attribute__((constructor)) static void setUp(void) {
    realLockSlow = (LockSlow)dlsym(RTLD_NEXT, LOCK_SLOW);
    realTryLockSlow = (TryLockSlow)dlsym(RTLD_NEXT, TRY_LOCK_SLOW);
    realUnlockSlow = (UnlockSlow)dlsym(RTLD_NEXT, UNLOCK_SLOW);
    acquire = (Annotate)dlsym(RTLD_DEFAULT, "__tsan_acquire");
    release = (Annotate)dlsym(RTLD_DEFAULT, "__tsan_release");
}

static void missing(const char *name) {
    fprintf(stderr, "tsan-mutex: %s is not in libswiftSynchronization.so; see .ci/tsan-mutex.c\n", name);
    abort();
}

SWIFTCALL void lockSlow(uint32_t selfId, SELF void *handle) __asm__(LOCK_SLOW);
SWIFTCALL void lockSlow(uint32_t selfId, SELF void *handle) {
    if (!realLockSlow) missing(LOCK_SLOW);
    realLockSlow(selfId, handle);
    if (acquire) acquire(handle);
}

SWIFTCALL bool tryLockSlow(SELF void *handle) __asm__(TRY_LOCK_SLOW);
SWIFTCALL bool tryLockSlow(SELF void *handle) {
    if (!realTryLockSlow) missing(TRY_LOCK_SLOW);
    bool locked = realTryLockSlow(handle);
    if (locked && acquire) acquire(handle);
    return locked;
}

SWIFTCALL void unlockSlow(SELF void *handle) __asm__(UNLOCK_SLOW);
SWIFTCALL void unlockSlow(SELF void *handle) {
    if (!realUnlockSlow) missing(UNLOCK_SLOW);
    if (release) release(handle);
    realUnlockSlow(handle);
}
