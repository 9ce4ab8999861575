#ifndef FERRY_SYSTEM_H
#define FERRY_SYSTEM_H
#include <stdint.h>
#include <stddef.h>
#include <sys/types.h>

/// epoll_event is a packed struct on x86_64, which Swift cannot import faithfully; these
/// wrappers take and return its fields separately.
int ferry_epoll_create(void);
int ferry_epoll_ctl(int epfd, int op, int fd, uint32_t events, uint64_t data);
/// Waits for events; writes up to `max` (data, events) pairs. Returns the count or -1 (errno).
int ferry_epoll_wait(int epfd, uint64_t *datas, uint32_t *events, int max, int timeout_ms);

extern const uint32_t FERRY_EPOLLIN, FERRY_EPOLLOUT, FERRY_EPOLLERR, FERRY_EPOLLHUP,
    FERRY_EPOLLRDHUP, FERRY_EPOLLET;
extern const int FERRY_EPOLL_CTL_ADD, FERRY_EPOLL_CTL_MOD, FERRY_EPOLL_CTL_DEL;

/// accept4 with SOCK_NONBLOCK | SOCK_CLOEXEC (glibc declares accept4 only under _GNU_SOURCE).
int ferry_accept(int fd);

/// A non-blocking, close-on-exec eventfd used to wake an event loop.
int ferry_eventfd(void);

/// Fills `buf` with `len` bytes from the kernel CSPRNG (getrandom). Returns 0 or -1.
int ferry_random_bytes(void *buf, size_t len);

/// Writes `len` bytes of `src` XORed with the 4-byte WebSocket masking key, starting at key
/// phase `phase` (0...3), to `dst` (either `src` itself, to unmask in place, or apart from it),
/// 16 bytes at a time. Returns the phase after the last byte.
size_t ferry_mask_copy(uint8_t *dst, const uint8_t *src, size_t len, const uint8_t key[4], size_t phase);

/// Advances the running zlib-compatible CRC-32 `*crc` over `buf` when it can do so quickly
/// (PCLMULQDQ folding, or a byte table for under 64 bytes) and returns `len`; returns 0,
/// leaving `*crc` alone, for long input on CPUs without PCLMULQDQ (the caller uses zlib).
size_t ferry_crc32_prefix(uint32_t *crc, const uint8_t *buf, size_t len);

/// Asks the kernel to back the 2 MiB-aligned interior of `[p, p + len)` with transparent huge
/// pages (MADV_HUGEPAGE), so filling a large buffer takes one page fault per 2 MiB rather than
/// per 4 KiB. Advice only: ignored where unsupported.
void ferry_advise_huge_pages(void *p, size_t len);

/// The machine's physical memory in bytes (0 if unknown).
uint64_t ferry_physical_memory(void);

/// Monotonic clock in nanoseconds.
uint64_t ferry_monotonic_ns(void);

/// Multicast DNS sockets (FerryNet's MulticastSocket). Every call returns a negative errno on
/// failure.
///
/// Opens a non-blocking, close-on-exec UDP socket of `family` (AF_INET or AF_INET6) bound to
/// the wildcard address and `port` with SO_REUSEADDR and SO_REUSEPORT (other mDNS stacks on the
/// host share the port), multicast TTL/hop limit 255, loopback of multicast on, and the
/// arrival interface reported with each datagram (IP_PKTINFO / IPV6_RECVPKTINFO).
int ferry_udp_multicast_socket(int family, uint16_t port);
/// Joins (join != 0) or leaves the multicast group `group` (4 or 16 bytes, by family) on
/// interface `ifindex`.
int ferry_udp_multicast_membership(int fd, int family, const uint8_t *group, unsigned ifindex, int join);
/// Receives one datagram into `buf`: its length (truncated to `len`), the sender's address in
/// `from` (sockaddr_storage, `*fromlen` set), and the interface it arrived on in `*ifindex`.
ssize_t ferry_udp_receive(int fd, uint8_t *buf, size_t len, void *from, unsigned *fromlen, unsigned *ifindex);
/// Sends one datagram to `to` out of interface `ifindex` (0 = the routing table's choice).
ssize_t ferry_udp_send(int fd, const uint8_t *buf, size_t len, const void *to, unsigned tolen, unsigned ifindex);


/// The first occurrence of `needle` in `hay` (glibc's vectorised memmem, which Swift's Glibc
/// module does not export without _GNU_SOURCE); NULL when there is none.
const void *ferry_memmem(const void *hay, size_t hay_length, const void *needle, size_t needle_length);

/// Lowers the calling thread's scheduling priority to `nice` (Linux: per thread). 0 on success.
int ferry_lower_thread_priority(int nice);

/// Names the calling thread (at most 15 bytes are kept), as `top -H`, perf and /proc show it
/// (pthread_setname_np, which Swift's Glibc module does not export). 0 on success.
int ferry_name_thread(const char *name);

/// The calling thread's name into `buffer` (`length` bytes, NUL-terminated). 0 on success.
int ferry_thread_name(char *buffer, size_t length);
#endif
