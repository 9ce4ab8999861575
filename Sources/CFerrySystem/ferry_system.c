#define _GNU_SOURCE
#include "ferry_system.h"
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/mman.h>
#include <unistd.h>
#include <string.h>
#include <errno.h>
#include <time.h>

const uint32_t FERRY_EPOLLIN = EPOLLIN, FERRY_EPOLLOUT = EPOLLOUT, FERRY_EPOLLERR = EPOLLERR,
    FERRY_EPOLLHUP = EPOLLHUP, FERRY_EPOLLRDHUP = EPOLLRDHUP, FERRY_EPOLLET = EPOLLET;
const int FERRY_EPOLL_CTL_ADD = EPOLL_CTL_ADD, FERRY_EPOLL_CTL_MOD = EPOLL_CTL_MOD,
    FERRY_EPOLL_CTL_DEL = EPOLL_CTL_DEL;

int ferry_epoll_create(void) { return epoll_create1(EPOLL_CLOEXEC); }

int ferry_epoll_ctl(int epfd, int op, int fd, uint32_t events, uint64_t data) {
    struct epoll_event ev;
    memset(&ev, 0, sizeof ev);
    ev.events = events;
    ev.data.u64 = data;
    return epoll_ctl(epfd, op, fd, &ev);
}

int ferry_epoll_wait(int epfd, uint64_t *datas, uint32_t *events, int max, int timeout_ms) {
    struct epoll_event evs[256];
    if (max > 256) max = 256;
    int n;
    do { n = epoll_wait(epfd, evs, max, timeout_ms); } while (n < 0 && errno == EINTR);
    for (int i = 0; i < n; i++) { datas[i] = evs[i].data.u64; events[i] = evs[i].events; }
    return n;
}

int ferry_eventfd(void) { return eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC); }

int ferry_random_bytes(void *buf, size_t len) {
    uint8_t *p = buf;
    while (len > 0) {
        ssize_t n = getrandom(p, len, 0);
        if (n < 0) { if (errno == EINTR) continue; return -1; }
        p += n; len -= (size_t)n;
    }
    return 0;
}

/// 16 bytes XORed at once (SSE2 on x86-64, NEON on arm64): the compiler did not vectorise the
/// eight-byte loop by itself (dst may equal src), and masking ran at a third of memcpy's speed.
typedef uint8_t ferry_v16 __attribute__((vector_size(16)));

size_t ferry_mask_copy(uint8_t *dst, const uint8_t *src, size_t len, const uint8_t key[4], size_t phase) {
    size_t i = 0;
    // Align the key phase to 0 byte by byte; from there every block starts on key[0].
    while (i < len && (phase & 3) != 0) { dst[i] = src[i] ^ key[phase & 3]; i++; phase++; }
    uint8_t k16[16];
    for (int j = 0; j < 16; j++) k16[j] = key[j & 3];
    ferry_v16 kv; memcpy(&kv, k16, 16);
    // Unaligned loads and stores through memcpy; each block is loaded before it is stored, so
    // dst == src (unmasking in place) is fine.
    for (; i + 64 <= len; i += 64) {
        ferry_v16 a, b, c, d;
        memcpy(&a, src + i, 16); memcpy(&b, src + i + 16, 16);
        memcpy(&c, src + i + 32, 16); memcpy(&d, src + i + 48, 16);
        a ^= kv; b ^= kv; c ^= kv; d ^= kv;
        memcpy(dst + i, &a, 16); memcpy(dst + i + 16, &b, 16);
        memcpy(dst + i + 32, &c, 16); memcpy(dst + i + 48, &d, 16);
    }
    for (; i + 16 <= len; i += 16) {
        ferry_v16 a; memcpy(&a, src + i, 16); a ^= kv; memcpy(dst + i, &a, 16);
    }
    uint64_t kw; memcpy(&kw, k16, 8);
    for (; i + 8 <= len; i += 8) {
        uint64_t w; memcpy(&w, src + i, 8); w ^= kw; memcpy(dst + i, &w, 8);
    }
    for (; i < len; i++) { dst[i] = src[i] ^ key[phase & 3]; phase++; }
    return phase & 3;
}

void ferry_advise_huge_pages(void *p, size_t len) {
#ifdef MADV_HUGEPAGE
    const uintptr_t huge = 2u << 20;
    uintptr_t start = ((uintptr_t)p + huge - 1) & ~(huge - 1);
    uintptr_t end = ((uintptr_t)p + len) & ~(huge - 1);
    if (end > start) (void)madvise((void *)start, end - start, MADV_HUGEPAGE);
#else
    (void)p; (void)len;
#endif
}

uint64_t ferry_physical_memory(void) {
    long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
    return pages > 0 && size > 0 ? (uint64_t)pages * (uint64_t)size : 0;
}

uint64_t ferry_monotonic_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int ferry_accept(int fd) { return accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC); }

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

int ferry_lower_thread_priority(int nice) {
    return setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), nice);
}

#include <pthread.h>

int ferry_name_thread(const char *name) { return pthread_setname_np(pthread_self(), name); }

int ferry_thread_name(char *buffer, size_t length) { return pthread_getname_np(pthread_self(), buffer, length); }

const void *ferry_memmem(const void *hay, size_t hay_length, const void *needle, size_t needle_length) {
    return memmem(hay, hay_length, needle, needle_length);
}
