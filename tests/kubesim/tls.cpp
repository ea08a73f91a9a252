#include "tls.h"

#include <memory>

#include <fmt/format.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

namespace kubesim {

namespace {

using k8sbridge::Status;

struct Deleter {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
  void operator()(X509* p) const { X509_free(p); }
  void operator()(BIO* p) const { BIO_free(p); }
};
using KeyPtr = std::unique_ptr<EVP_PKEY, Deleter>;
using CertPtr = std::unique_ptr<X509, Deleter>;

Status OpenSslError(const char* what) {
  unsigned long e = ERR_get_error();
  char buf[256] = "unknown error";
  if (e != 0)
    ERR_error_string_n(e, buf, sizeof buf);
  return Status::Internal(fmt::format("OpenSSL: {}: {}", what, buf));
}

bool AddExtension(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
  if (ext == nullptr)
    return false;
  bool ok = X509_add_ext(cert, ext, -1) == 1;
  X509_EXTENSION_free(ext);
  return ok;
}

k8sbridge::Result<CertPtr> MakeCert(EVP_PKEY* key, const std::string& cn, const std::string& org,
                                    X509* issuer, EVP_PKEY* issuer_key, long serial,
                                    const std::vector<std::pair<int, std::string>>& extensions) {
  CertPtr cert(X509_new());
  if (!cert)
    return OpenSslError("X509_new");
  X509_set_version(cert.get(), 2);
  ASN1_INTEGER_set(X509_get_serialNumber(cert.get()), serial);
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), 60L * 60 * 24 * 365);
  X509_set_pubkey(cert.get(), key);
  X509_NAME* name = X509_get_subject_name(cert.get());
  if (!org.empty()) {
    X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC,
                               reinterpret_cast<const unsigned char*>(org.c_str()), -1, -1, 0);
  }
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0);
  X509* signer = issuer != nullptr ? issuer : cert.get();
  X509_set_issuer_name(cert.get(), X509_get_subject_name(signer));
  for (const auto& [nid, value] : extensions) {
    if (!AddExtension(cert.get(), signer, nid, value))
      return OpenSslError("X509 extension");
  }
  if (X509_sign(cert.get(), issuer_key != nullptr ? issuer_key : key, EVP_sha256()) == 0) {
    return OpenSslError("X509_sign");
  }
  return cert;
}

std::string CertPem(X509* cert) {
  std::unique_ptr<BIO, Deleter> bio(BIO_new(BIO_s_mem()));
  PEM_write_bio_X509(bio.get(), cert);
  char* data = nullptr;
  long len = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, len);
}

std::string KeyPem(EVP_PKEY* key) {
  std::unique_ptr<BIO, Deleter> bio(BIO_new(BIO_s_mem()));
  PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr);
  char* data = nullptr;
  long len = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, len);
}

}  // namespace

k8sbridge::Result<TlsMaterial> GenerateTlsMaterial(const std::vector<std::string>& extra_ips) {
  KeyPtr ca_key(EVP_EC_gen("P-256"));
  KeyPtr server_key(EVP_EC_gen("P-256"));
  KeyPtr client_key(EVP_EC_gen("P-256"));
  if (!ca_key || !server_key || !client_key)
    return OpenSslError("EVP_EC_gen");
  auto ca = MakeCert(ca_key.get(), "kubesim-ca", "", nullptr, nullptr, 1,
                     {{NID_basic_constraints, "critical,CA:TRUE"},
                      {NID_key_usage, "critical,keyCertSign,cRLSign,digitalSignature"},
                      {NID_subject_key_identifier, "hash"}});
  if (!ca.ok())
    return ca.status();
  std::string san = "DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,IP:127.0.0.1,IP:::1";
  for (const auto& ip : extra_ips)
    san += ",IP:" + ip;
  auto server = MakeCert(server_key.get(), "kubesim-apiserver", "", ca->get(), ca_key.get(), 2,
                         {{NID_basic_constraints, "critical,CA:FALSE"},
                          {NID_key_usage, "critical,digitalSignature,keyEncipherment"},
                          {NID_ext_key_usage, "serverAuth"},
                          {NID_subject_key_identifier, "hash"},
                          {NID_authority_key_identifier, "keyid:always"},
                          {NID_subject_alt_name, san}});
  if (!server.ok())
    return server.status();
  auto client =
      MakeCert(client_key.get(), "kubesim-admin", "system:masters", ca->get(), ca_key.get(), 3,
               {{NID_basic_constraints, "critical,CA:FALSE"},
                {NID_key_usage, "critical,digitalSignature,keyEncipherment"},
                {NID_ext_key_usage, "clientAuth"},
                {NID_subject_key_identifier, "hash"},
                {NID_authority_key_identifier, "keyid:always"}});
  if (!client.ok())
    return client.status();
  TlsMaterial m;
  m.ca_cert_pem = CertPem(ca->get());
  m.ca_key_pem = KeyPem(ca_key.get());
  m.server_cert_pem = CertPem(server->get());
  m.server_key_pem = KeyPem(server_key.get());
  m.client_cert_pem = CertPem(client->get());
  m.client_key_pem = KeyPem(client_key.get());
  return m;
}

}  // namespace kubesim
