// RFC 6455 WebSocket pieces for kubesim's streaming subresources (pods/exec): the
// server's handshake answer, its frames (unmasked, as a server sends them) and a parser
// of the client's frames (which must be masked). Pure functions over bytes, so that the
// unit tests pin the wire format; exec.h drives them over a connection.
//
// kubesim is test and demo infrastructure (docs/kubesim.md); it ships nowhere.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kubesim::ws {

inline constexpr uint8_t kOpContinuation = 0x0;
inline constexpr uint8_t kOpText = 0x1;
inline constexpr uint8_t kOpBinary = 0x2;
inline constexpr uint8_t kOpClose = 0x8;
inline constexpr uint8_t kOpPing = 0x9;
inline constexpr uint8_t kOpPong = 0xA;

inline constexpr uint16_t kCloseNormal = 1000;
inline constexpr uint16_t kCloseProtocolError = 1002;
inline constexpr uint16_t kCloseTooBig = 1009;

// Sec-WebSocket-Accept for the client's Sec-WebSocket-Key (RFC 6455 section 4.2.2):
// base64(SHA-1(key + the protocol's GUID)).
std::string AcceptKey(std::string_view key);

// The first of `offered` (a Sec-WebSocket-Protocol header's comma-separated list, in the
// client's order of preference) that `supported` holds; "" when none.
std::string NegotiateProtocol(std::string_view offered, const std::vector<std::string>& supported);

// Whether an Upgrade header asks for a WebSocket (token "websocket", any case).
bool IsWebSocketUpgrade(std::string_view upgrade_header);

// The "101 Switching Protocols" answer to a handshake (with the chosen subprotocol).
std::string HandshakeResponse(std::string_view key, std::string_view protocol);

// One server frame: FIN set, never masked (RFC 6455 section 5.1).
std::string EncodeFrame(uint8_t opcode, std::string_view payload);
// A close frame with its status code and reason.
std::string EncodeClose(uint16_t code, std::string_view reason = "");

// A message (data frames reassembled) or a control frame from the client.
struct Frame {
  uint8_t opcode = 0;  // kOpBinary, kOpText, kOpClose, kOpPing, kOpPong
  std::string payload;
};

// Reads the client's frames from the bytes as they arrive. A protocol violation (an
// unmasked frame, reserved bits, a fragmented or long control frame, a continuation
// with no message, a message over the limit) is an error with the close code to send.
class FrameParser {
 public:
  explicit FrameParser(size_t max_message = size_t{16} << 20) : max_message_(max_message) {}
  void Feed(std::string_view bytes) { buffer_.append(bytes); }
  enum class Result { kFrame, kNeedMore, kError };
  // The next message or control frame into `out`; on kError, `error` says why and
  // `close_code` is the code to close with.
  Result Next(Frame& out);
  const std::string& error() const { return error_; }
  uint16_t close_code() const { return close_code_; }

 private:
  Result Fail(uint16_t code, std::string message);
  std::string buffer_;
  size_t max_message_;
  bool in_message_ = false;  // a fragmented data message is being reassembled
  uint8_t message_opcode_ = 0;
  std::string message_;
  std::string error_;
  uint16_t close_code_ = 0;
};

}  // namespace kubesim::ws
