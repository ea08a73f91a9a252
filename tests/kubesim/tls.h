// A throwaway test CA with a server and a client certificate, made with OpenSSL at start.
// kubesim is test and demo infrastructure (docs/kubesim.md); it ships nowhere.
#pragma once

#include <string>
#include <vector>

#include "k8sbridge/status.h"

namespace kubesim {

struct TlsMaterial {
  std::string ca_cert_pem;
  std::string ca_key_pem;
  std::string server_cert_pem;
  std::string server_key_pem;
  std::string client_cert_pem;  // CN=kubesim-admin, O=system:masters
  std::string client_key_pem;
};

// ECDSA P-256 keys; the server certificate names localhost, 127.0.0.1, ::1 and
// every address in `extra_ips` (IPv4 or IPv6 literals).
k8sbridge::Result<TlsMaterial> GenerateTlsMaterial(const std::vector<std::string>& extra_ips);

}  // namespace kubesim
