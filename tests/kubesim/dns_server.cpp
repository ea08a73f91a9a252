// kubesim's cluster DNS server (dns.h): UDP and TCP on one address, one thread each.
// TCP serves one connection at a time, each with a 2-second idle limit, so a slow
// client delays other TCP clients but never UDP.
//
// kubesim is test and demo infrastructure (docs/kubesim.md); it ships nowhere.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "dns.h"

namespace kubesim::dns {

namespace {

constexpr int kPollMs = 200;
constexpr int kTcpMessagesPerConnection = 100;

Result<int> BoundSocket(int type, const sockaddr_in& address) {
  const int fd = socket(AF_INET, type | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return Status::IoError(fmt::format("dns: socket: {}", std::strerror(errno)));
  const int one = 1;
  (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0 ||
      (type == SOCK_STREAM && listen(fd, 16) != 0)) {
    const int err = errno;
    close(fd);
    char text[INET_ADDRSTRLEN] = "";
    inet_ntop(AF_INET, &address.sin_addr, text, sizeof text);
    return Status::IoError(fmt::format("dns: binding {} {}:{}: {}",
                                       type == SOCK_STREAM ? "TCP" : "UDP", text,
                                       ntohs(address.sin_port), std::strerror(err)));
  }
  return fd;
}

// Reads exactly `n` octets; false on EOF, error or the socket's timeout.
bool ReadFull(int fd, uint8_t* buf, size_t n) {
  size_t got = 0;
  while (got < n) {
    const ssize_t r = read(fd, buf + got, n - got);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      return false;
    got += static_cast<size_t>(r);
  }
  return true;
}

bool WriteFull(int fd, const uint8_t* buf, size_t n) {
  size_t done = 0;
  while (done < n) {
    const ssize_t w = send(fd, buf + done, n - done, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      return false;
    done += static_cast<size_t>(w);
  }
  return true;
}

}  // namespace

Server::Server(const Store& store, k8sbridge::Logger& log, ServerOptions options)
    : store_(store), log_(log), options_(std::move(options)) {}

Server::~Server() {
  Stop();
}

Status Server::Start() {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(options_.port);
  std::optional<uint32_t> ip = ParseIPv4(options_.address);
  if (!ip)
    return Status::InvalidArgument(fmt::format("dns: {} is not an IPv4 address", options_.address));
  address.sin_addr.s_addr = htonl(*ip);
  Result<int> udp = BoundSocket(SOCK_DGRAM, address);
  if (!udp.ok())
    return udp.status();
  udp_fd_ = *udp;
  socklen_t len = sizeof address;
  (void)getsockname(udp_fd_, reinterpret_cast<sockaddr*>(&address), &len);
  port_ = ntohs(address.sin_port);  // the same port for TCP, also when 0 was asked for
  Result<int> tcp = BoundSocket(SOCK_STREAM, address);
  if (!tcp.ok()) {
    close(udp_fd_);
    udp_fd_ = -1;
    return tcp.status();
  }
  tcp_fd_ = *tcp;
  stop_ = false;
  udp_thread_ = std::thread([this] { ServeUdp(); });
  tcp_thread_ = std::thread([this] { ServeTcp(); });
  log_.Info("dns: serving {} on {}:{} (UDP and TCP)", options_.zone, options_.address, port_);
  return Status::Ok();
}

void Server::Stop() {
  stop_ = true;
  if (udp_thread_.joinable())
    udp_thread_.join();
  if (tcp_thread_.joinable())
    tcp_thread_.join();
  for (int* fd : {&udp_fd_, &tcp_fd_}) {
    if (*fd >= 0)
      close(*fd);
    *fd = -1;
  }
}

void Server::ServeUdp() {
  std::vector<uint8_t> buf(65535);
  while (!stop_) {
    pollfd p{udp_fd_, POLLIN, 0};
    if (poll(&p, 1, kPollMs) <= 0)
      continue;
    sockaddr_in peer{};
    socklen_t peer_len = sizeof peer;
    const ssize_t n =
        recvfrom(udp_fd_, buf.data(), buf.size(), 0, reinterpret_cast<sockaddr*>(&peer), &peer_len);
    if (n <= 0)
      continue;
    std::vector<uint8_t> out = Respond(
        store_, std::span<const uint8_t>(buf.data(), static_cast<size_t>(n)), options_.zone, true);
    if (!out.empty())
      (void)sendto(udp_fd_, out.data(), out.size(), 0, reinterpret_cast<sockaddr*>(&peer),
                   peer_len);
  }
}

void Server::ServeTcp() {
  while (!stop_) {
    pollfd p{tcp_fd_, POLLIN, 0};
    if (poll(&p, 1, kPollMs) <= 0)
      continue;
    const int fd = accept4(tcp_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0)
      continue;
    timeval timeout{2, 0};
    (void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    (void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
    ServeTcpConnection(fd);
    close(fd);
  }
}

// RFC 7766: each message after a two-octet length; several on one connection.
void Server::ServeTcpConnection(int fd) {
  std::vector<uint8_t> buf(65535);
  for (int i = 0; i < kTcpMessagesPerConnection && !stop_; ++i) {
    uint8_t prefix[2];
    if (!ReadFull(fd, prefix, 2))
      return;
    const size_t n = static_cast<size_t>((prefix[0] << 8) | prefix[1]);
    if (n == 0 || !ReadFull(fd, buf.data(), n))
      return;
    std::vector<uint8_t> out =
        Respond(store_, std::span<const uint8_t>(buf.data(), n), options_.zone, false);
    if (out.empty() || out.size() > 65535)
      return;
    const uint8_t length[2] = {static_cast<uint8_t>(out.size() >> 8),
                               static_cast<uint8_t>(out.size() & 0xff)};
    if (!WriteFull(fd, length, 2) || !WriteFull(fd, out.data(), out.size()))
      return;
  }
}

}  // namespace kubesim::dns
