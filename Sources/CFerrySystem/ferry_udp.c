#define _GNU_SOURCE
#include "ferry_system.h"
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

// Ancillary data is what Swift cannot express well (CMSG_* are macros), so the datagram
// calls that carry the interface index live here.

int ferry_udp_multicast_socket(int family, uint16_t port) {
    int fd = socket(family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_UDP);
    if (fd < 0) return -errno;
    int one = 1, ttl = 255;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
    int rc;
    if (family == AF_INET) {
        unsigned char loop = 1, ttl8 = 255;
        setsockopt(fd, IPPROTO_IP, IP_MULTICAST_TTL, &ttl8, sizeof ttl8);
        setsockopt(fd, IPPROTO_IP, IP_MULTICAST_LOOP, &loop, sizeof loop);
        setsockopt(fd, IPPROTO_IP, IP_TTL, &ttl, sizeof ttl);
        setsockopt(fd, IPPROTO_IP, IP_PKTINFO, &one, sizeof one);
        struct sockaddr_in a;
        memset(&a, 0, sizeof a);
        a.sin_family = AF_INET;
        a.sin_port = htons(port);
        rc = bind(fd, (struct sockaddr *)&a, sizeof a);
    } else {
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
        setsockopt(fd, IPPROTO_IPV6, IPV6_MULTICAST_HOPS, &ttl, sizeof ttl);
        setsockopt(fd, IPPROTO_IPV6, IPV6_MULTICAST_LOOP, &one, sizeof one);
        setsockopt(fd, IPPROTO_IPV6, IPV6_UNICAST_HOPS, &ttl, sizeof ttl);
        setsockopt(fd, IPPROTO_IPV6, IPV6_RECVPKTINFO, &one, sizeof one);
        struct sockaddr_in6 a;
        memset(&a, 0, sizeof a);
        a.sin6_family = AF_INET6;
        a.sin6_port = htons(port);
        rc = bind(fd, (struct sockaddr *)&a, sizeof a);
    }
    if (rc != 0) { int e = errno; close(fd); return -e; }
    return fd;
}

int ferry_udp_multicast_membership(int fd, int family, const uint8_t *group, unsigned ifindex, int join) {
    int rc;
    if (family == AF_INET) {
        struct ip_mreqn m;
        memset(&m, 0, sizeof m);
        memcpy(&m.imr_multiaddr, group, 4);
        m.imr_ifindex = (int)ifindex;
        rc = setsockopt(fd, IPPROTO_IP, join ? IP_ADD_MEMBERSHIP : IP_DROP_MEMBERSHIP, &m, sizeof m);
    } else {
        struct ipv6_mreq m;
        memset(&m, 0, sizeof m);
        memcpy(&m.ipv6mr_multiaddr, group, 16);
        m.ipv6mr_interface = ifindex;
        rc = setsockopt(fd, IPPROTO_IPV6, join ? IPV6_ADD_MEMBERSHIP : IPV6_DROP_MEMBERSHIP, &m, sizeof m);
    }
    return rc == 0 ? 0 : -errno;
}

ssize_t ferry_udp_receive(int fd, uint8_t *buf, size_t len, void *from, unsigned *fromlen, unsigned *ifindex) {
    struct iovec iov = { buf, len };
    char control[256];
    struct msghdr msg;
    memset(&msg, 0, sizeof msg);
    msg.msg_name = from;
    msg.msg_namelen = sizeof(struct sockaddr_storage);
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    ssize_t n = recvmsg(fd, &msg, 0);
    if (n < 0) return -errno;
    *fromlen = msg.msg_namelen;
    *ifindex = 0;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_PKTINFO) {
            struct in_pktinfo info;
            memcpy(&info, CMSG_DATA(c), sizeof info);
            *ifindex = (unsigned)info.ipi_ifindex;
        } else if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_PKTINFO) {
            struct in6_pktinfo info;
            memcpy(&info, CMSG_DATA(c), sizeof info);
            *ifindex = info.ipi6_ifindex;
        }
    }
    // A datagram longer than the buffer is reported as what fitted; the caller's size limit
    // rejects it anyway.
    return n > (ssize_t)len ? (ssize_t)len : n;
}

ssize_t ferry_udp_send(int fd, const uint8_t *buf, size_t len, const void *to, unsigned tolen, unsigned ifindex) {
    struct iovec iov = { (void *)buf, len };
    char control[CMSG_SPACE(sizeof(struct in6_pktinfo))];
    memset(control, 0, sizeof control);
    struct msghdr msg;
    memset(&msg, 0, sizeof msg);
    msg.msg_name = (void *)to;
    msg.msg_namelen = tolen;
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    if (ifindex != 0) {
        // The interface goes in IP_PKTINFO / IPV6_PKTINFO: for a multicast destination the
        // kernel takes it as the outgoing interface, so one socket serves every interface.
        msg.msg_control = control;
        struct cmsghdr *c;
        if (((const struct sockaddr *)to)->sa_family == AF_INET) {
            msg.msg_controllen = CMSG_SPACE(sizeof(struct in_pktinfo));
            c = CMSG_FIRSTHDR(&msg);
            c->cmsg_level = IPPROTO_IP;
            c->cmsg_type = IP_PKTINFO;
            c->cmsg_len = CMSG_LEN(sizeof(struct in_pktinfo));
            struct in_pktinfo info;
            memset(&info, 0, sizeof info);
            info.ipi_ifindex = (int)ifindex;
            memcpy(CMSG_DATA(c), &info, sizeof info);
        } else {
            msg.msg_controllen = CMSG_SPACE(sizeof(struct in6_pktinfo));
            c = CMSG_FIRSTHDR(&msg);
            c->cmsg_level = IPPROTO_IPV6;
            c->cmsg_type = IPV6_PKTINFO;
            c->cmsg_len = CMSG_LEN(sizeof(struct in6_pktinfo));
            struct in6_pktinfo info;
            memset(&info, 0, sizeof info);
            info.ipi6_ifindex = ifindex;
            memcpy(CMSG_DATA(c), &info, sizeof info);
        }
    }
    ssize_t n = sendmsg(fd, &msg, 0);
    return n < 0 ? -errno : n;
}
