#ifndef FERRY_CJEMALLOC_SHIM_H
#define FERRY_CJEMALLOC_SHIM_H

#include <stddef.h>

// jemalloc as the process allocator of Ferry's executables (`ferry`, `ferry-bench`): linking
// it puts its malloc/free ahead of glibc's for the whole process, Swift runtime included.
// Only `mallctl` is declared here (Debian builds jemalloc without a symbol prefix), not
// <jemalloc/jemalloc.h>, whose malloc declarations would clash with Glibc's in the importer.
int mallctl(const char *name, void *oldp, size_t *oldlenp, void *newp, size_t newlen);

/// jemalloc's version string ("5.3.0-0-g…"). Calling it also keeps the library linked where
/// the linker drops libraries nothing references (--as-needed).
static inline const char *ferry_jemalloc_version(void) {
    const char *version = NULL;
    size_t length = sizeof(version);
    return mallctl("version", &version, &length, NULL, 0) == 0 ? version : "unknown";
}

/// Makes jemalloc hand memory freed by the application back to the system within `dirty_ms`
/// milliseconds (its default: 10 s, then as long again "muzzy"), for every arena that exists
/// and every one made later. A daemon's peak resident size then follows what it holds, not
/// what it held ten seconds ago. 0 when both settings took.
static inline int ferry_jemalloc_return_memory_within(long dirty_ms) {
    long muzzy_ms = 0;
    int failed = 0;
    // The default for arenas made later (one per thread, up to 4 per CPU), then every arena
    // that exists now (MALLCTL_ARENAS_ALL, 4096).
    failed |= mallctl("arenas.dirty_decay_ms", NULL, NULL, &dirty_ms, sizeof(dirty_ms));
    failed |= mallctl("arenas.muzzy_decay_ms", NULL, NULL, &muzzy_ms, sizeof(muzzy_ms));
    failed |= mallctl("arena.4096.dirty_decay_ms", NULL, NULL, &dirty_ms, sizeof(dirty_ms));
    failed |= mallctl("arena.4096.muzzy_decay_ms", NULL, NULL, &muzzy_ms, sizeof(muzzy_ms));
    return failed;
}

#endif
