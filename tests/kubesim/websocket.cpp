#include "websocket.h"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>
#include <openssl/evp.h>
#include <openssl/sha.h>

namespace kubesim::ws {

namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front())))
    s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back())))
    s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> SplitList(std::string_view list) {
  std::vector<std::string_view> out;
  while (!list.empty()) {
    const size_t comma = list.find(',');
    out.push_back(Trim(list.substr(0, comma)));
    if (comma == std::string_view::npos)
      break;
    list.remove_prefix(comma + 1);
  }
  return out;
}

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

}  // namespace

std::string AcceptKey(std::string_view key) {
  const std::string input = std::string(key) + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
  unsigned char digest[SHA_DIGEST_LENGTH];
  SHA1(reinterpret_cast<const unsigned char*>(input.data()), input.size(), digest);
  std::string out(4 * ((SHA_DIGEST_LENGTH + 2) / 3), '\0');
  const int n =
      EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()), digest, SHA_DIGEST_LENGTH);
  out.resize(static_cast<size_t>(std::max(n, 0)));
  return out;
}

std::string NegotiateProtocol(std::string_view offered, const std::vector<std::string>& supported) {
  for (std::string_view p : SplitList(offered)) {
    if (std::find(supported.begin(), supported.end(), p) != supported.end())
      return std::string(p);
  }
  return "";
}

bool IsWebSocketUpgrade(std::string_view upgrade_header) {
  for (std::string_view p : SplitList(upgrade_header)) {
    if (EqualsIgnoreCase(p, "websocket"))
      return true;
  }
  return false;
}

std::string HandshakeResponse(std::string_view key, std::string_view protocol) {
  std::string out =
      "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
      "Sec-WebSocket-Accept: " +
      AcceptKey(key) + "\r\n";
  if (!protocol.empty())
    out += fmt::format("Sec-WebSocket-Protocol: {}\r\n", protocol);
  return out + "\r\n";
}

std::string EncodeFrame(uint8_t opcode, std::string_view payload) {
  std::string out;
  out.push_back(static_cast<char>(0x80 | (opcode & 0x0F)));
  const uint64_t n = payload.size();
  if (n < 126) {
    out.push_back(static_cast<char>(n));
  } else if (n <= 0xFFFF) {
    out.push_back(static_cast<char>(126));
    out.push_back(static_cast<char>((n >> 8) & 0xFF));
    out.push_back(static_cast<char>(n & 0xFF));
  } else {
    out.push_back(static_cast<char>(127));
    for (int shift = 56; shift >= 0; shift -= 8)
      out.push_back(static_cast<char>((n >> shift) & 0xFF));
  }
  out.append(payload);
  return out;
}

std::string EncodeClose(uint16_t code, std::string_view reason) {
  std::string payload;
  payload.push_back(static_cast<char>(code >> 8));
  payload.push_back(static_cast<char>(code & 0xFF));
  payload.append(reason.substr(0, 123));  // a control frame's payload is at most 125 bytes
  return EncodeFrame(kOpClose, payload);
}

FrameParser::Result FrameParser::Fail(uint16_t code, std::string message) {
  close_code_ = code;
  error_ = std::move(message);
  return Result::kError;
}

FrameParser::Result FrameParser::Next(Frame& out) {
  while (true) {
    if (buffer_.size() < 2)
      return Result::kNeedMore;
    const auto b0 = static_cast<uint8_t>(buffer_[0]);
    const auto b1 = static_cast<uint8_t>(buffer_[1]);
    const bool fin = (b0 & 0x80) != 0;
    const uint8_t opcode = b0 & 0x0F;
    if ((b0 & 0x70) != 0)
      return Fail(kCloseProtocolError, "reserved bits set (no extension was negotiated)");
    if ((b1 & 0x80) == 0)
      return Fail(kCloseProtocolError, "a client frame must be masked (RFC 6455 section 5.1)");
    uint64_t length = b1 & 0x7F;
    size_t header = 2;
    const size_t extra = length == 126 ? 2 : length == 127 ? 8 : 0;
    if (buffer_.size() < header + extra + 4)
      return Result::kNeedMore;
    if (extra != 0) {
      length = 0;
      for (size_t i = 0; i < extra; ++i)
        length = (length << 8) | static_cast<uint8_t>(buffer_[header + i]);
      header += extra;
    }
    const bool control = (opcode & 0x08) != 0;
    if (control && (!fin || length > 125))
      return Fail(kCloseProtocolError, "a control frame must be whole and at most 125 bytes");
    if (length > max_message_ || message_.size() + length > max_message_)
      return Fail(kCloseTooBig, fmt::format("message over {} bytes", max_message_));
    if (buffer_.size() < header + 4 + length)
      return Result::kNeedMore;
    const std::string mask = buffer_.substr(header, 4);
    std::string payload = buffer_.substr(header + 4, length);
    buffer_.erase(0, header + 4 + length);
    for (size_t i = 0; i < payload.size(); ++i)
      payload[i] = static_cast<char>(payload[i] ^ mask[i % 4]);
    if (control) {
      out = Frame{opcode, std::move(payload)};
      return Result::kFrame;
    }
    if (opcode == kOpContinuation) {
      if (!in_message_)
        return Fail(kCloseProtocolError, "a continuation frame with no message to continue");
    } else if (opcode == kOpBinary || opcode == kOpText) {
      if (in_message_)
        return Fail(kCloseProtocolError, "a new message inside a fragmented one");
      in_message_ = true;
      message_opcode_ = opcode;
      message_.clear();
    } else {
      return Fail(kCloseProtocolError, fmt::format("unknown opcode {}", opcode));
    }
    message_ += payload;
    if (fin) {
      in_message_ = false;
      out = Frame{message_opcode_, std::move(message_)};
      message_.clear();
      return Result::kFrame;
    }
  }
}

}  // namespace kubesim::ws
