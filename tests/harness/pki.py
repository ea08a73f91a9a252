"""The certificates and keys of a test cluster, made as kubeadm makes a cluster's:
one CA for the cluster, a serving certificate for the API server and for etcd,
client certificates (CN the user, O the groups) for the admin and each component,
and the ServiceAccount signing key pair. Everything is written to one directory,
keys with mode 0600."""

import datetime
import ipaddress
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


def _name(common_name, organizations=()):
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in organizations]
    return x509.Name(attrs + [x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _write_key(path: Path, key) -> None:
    path.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                       serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption()))
    path.chmod(0o600)


class Pki:
    """A CA in `directory` (ca.crt, ca.key) that issues the cluster's certificates."""

    def __init__(self, directory: Path):
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        now = datetime.datetime.now(datetime.timezone.utc)
        self._not_before = now - datetime.timedelta(minutes=5)
        self._not_after = now + datetime.timedelta(days=2)
        self._ca_key = ec.generate_private_key(ec.SECP256R1())
        name = _name("k8sbridge-test-ca")
        self._ca_cert = (x509.CertificateBuilder()
                         .subject_name(name).issuer_name(name)
                         .public_key(self._ca_key.public_key())
                         .serial_number(x509.random_serial_number())
                         .not_valid_before(self._not_before).not_valid_after(self._not_after)
                         .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
                         .add_extension(x509.KeyUsage(
                             digital_signature=True, key_cert_sign=True, crl_sign=True,
                             content_commitment=False, key_encipherment=False,
                             data_encipherment=False, key_agreement=False,
                             encipher_only=False, decipher_only=False), True)
                         .sign(self._ca_key, hashes.SHA256()))
        self.ca = self.dir / "ca.crt"
        self.ca.write_bytes(self._ca_cert.public_bytes(serialization.Encoding.PEM))
        _write_key(self.dir / "ca.key", self._ca_key)
        self.ca_key = self.dir / "ca.key"

    def issue(self, stem: str, common_name: str, organizations=(), hosts=(), server=False,
              client=True) -> tuple:
        """Writes <stem>.crt and <stem>.key; `hosts` (IP addresses or DNS names) become
        the subject alternative names of a serving certificate. Returns both paths."""
        key = ec.generate_private_key(ec.SECP256R1())
        usages = ([ExtendedKeyUsageOID.SERVER_AUTH] if server else []) + \
            ([ExtendedKeyUsageOID.CLIENT_AUTH] if client else [])
        builder = (x509.CertificateBuilder()
                   .subject_name(_name(common_name, organizations))
                   .issuer_name(self._ca_cert.subject)
                   .public_key(key.public_key())
                   .serial_number(x509.random_serial_number())
                   .not_valid_before(self._not_before).not_valid_after(self._not_after)
                   .add_extension(x509.BasicConstraints(ca=False, path_length=None), True)
                   .add_extension(x509.ExtendedKeyUsage(usages), False))
        if hosts:
            names = []
            for h in hosts:
                try:
                    names.append(x509.IPAddress(ipaddress.ip_address(h)))
                except ValueError:
                    names.append(x509.DNSName(h))
            builder = builder.add_extension(x509.SubjectAlternativeName(names), False)
        cert = builder.sign(self._ca_key, hashes.SHA256())
        crt, keyfile = self.dir / f"{stem}.crt", self.dir / f"{stem}.key"
        crt.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        _write_key(keyfile, key)
        return crt, keyfile

    def service_account_keys(self) -> tuple:
        """sa.key and sa.pub: the key pair the API server signs and checks
        ServiceAccount tokens with."""
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        _write_key(self.dir / "sa.key", key)
        (self.dir / "sa.pub").write_bytes(key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
        return self.dir / "sa.key", self.dir / "sa.pub"
