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

#endif
