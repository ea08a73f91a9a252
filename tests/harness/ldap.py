"""A real LDAP directory for the tests: Debian's slapd, as the site's directory
that sssd in the deployed pods asks for users and groups (docs/deploy.md, "Users").

    directory = Directory(address, port, workdir, rig_id, users={"alice": 2001},
                          group="hpc-users").start()
    directory.sssd_conf()           # what the Secret slurm-sssd holds
    directory.add_user("dave", 2003)
    directory.close()

slapd runs from a slapd.conf of its own (the schemas core, cosine and nis: RFC 2307's
posixAccount and posixGroup), one mdb database `dc=example` under the work
directory, loaded with slapadd before it starts: ou=people with a posixAccount for
each user (uid = gid, home /home/<name>, shell /bin/bash), ou=groups with each user's
own group and the site's group, whose memberUid lists them. Anyone may read (sssd
binds anonymously); the root DN writes. It listens on `address:port` only, an
address of the test's own network (the real cluster's bridge, which the pods
reach), and runs as a rig-style daemon (tests/harness/kubelet_node.py's Daemons:
its session, the rig id in its environment, its log beside its data), stopped by
close(), and by start() itself when the start fails.
"""

import secrets
import subprocess
from pathlib import Path

from harness.kube import wait_for_condition
from harness.kubelet_node import Daemons
from harness.paths import debian_program

BASE = "dc=example"
ROOT_DN = f"cn=admin,{BASE}"
SCHEMAS = ("core", "cosine", "nis")


def ldap_program(name: str) -> str:
    return debian_program(name, "the directory tests need Debian's slapd and ldap-utils")


def user_entries(name: str, uid: int, change: str = "") -> str:
    """LDIF of a user and their own group; `change` ("changetype: add\\n") makes
    it ldapmodify's."""
    return (f"dn: uid={name},ou=people,{BASE}\n{change}objectClass: account\n"
            f"objectClass: posixAccount\nuid: {name}\ncn: {name.title()}\n"
            f"uidNumber: {uid}\ngidNumber: {uid}\nhomeDirectory: /home/{name}\n"
            f"loginShell: /bin/bash\n\n"
            f"dn: cn={name},ou=groups,{BASE}\n{change}objectClass: posixGroup\n"
            f"cn: {name}\ngidNumber: {uid}\n\n")


class Directory:
    """slapd on address:port with `users` (name -> uid) and `group` (gid
    `group_gid`) holding them all."""

    def __init__(self, address: str, port: int, workdir: Path, rig_id: str, users: dict,
                 group: str, group_gid: int = 3000):
        self.address, self.port = address, port
        self.dir = Path(workdir)
        self.users = dict(users)
        self.group, self.group_gid = group, group_gid
        self.password = secrets.token_hex(12)
        self.daemons = Daemons(self.dir, rig_id)

    @property
    def uri(self) -> str:
        return f"ldap://{self.address}:{self.port}"

    def start(self):
        """slapd started and answering; on a failure, nothing left running."""
        try:
            return self._start()
        except BaseException:
            self.close()
            raise

    def _start(self):
        data = self.dir / "data"
        data.mkdir(parents=True)
        conf = self.dir / "slapd.conf"
        conf.write_text(
            "".join(f"include /etc/ldap/schema/{s}.schema\n" for s in SCHEMAS) +
            f"pidfile {self.dir / 'slapd.pid'}\n"
            "modulepath /usr/lib/ldap\nmoduleload back_mdb\n"
            f"database mdb\nmaxsize 10485760\nsuffix \"{BASE}\"\n"
            f"rootdn \"{ROOT_DN}\"\nrootpw {self.password}\ndirectory {data}\n"
            "access to * by * read\n")
        seed = self.dir / "seed.ldif"
        seed.write_text(
            f"dn: {BASE}\nobjectClass: dcObject\nobjectClass: organization\ndc: example\n"
            f"o: example\n\n"
            + "".join(f"dn: ou={ou},{BASE}\nobjectClass: organizationalUnit\nou: {ou}\n\n"
                      for ou in ("people", "groups"))
            + "".join(user_entries(n, u) for n, u in self.users.items())
            + f"dn: cn={self.group},ou=groups,{BASE}\nobjectClass: posixGroup\n"
              f"cn: {self.group}\ngidNumber: {self.group_gid}\n"
            + "".join(f"memberUid: {n}\n" for n in self.users))
        r = subprocess.run([ldap_program("slapadd"), "-q", "-f", str(conf), "-l", str(seed)],
                           capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            raise RuntimeError(f"slapadd of {seed} failed: {r.stderr}")
        # -d: in the foreground (the Daemons' session), logging each operation.
        self.daemons.start("slapd", [ldap_program("slapd"), "-d", "stats", "-f", conf,
                                     "-h", self.uri])
        wait_for_condition(self._answers, 30, f"slapd to answer at {self.uri}", interval=0.2)
        return self

    def _answers(self) -> bool:
        self.daemons.check_alive("slapd")
        return self.search(f"(cn={self.group})").returncode == 0

    def search(self, search_filter: str) -> subprocess.CompletedProcess:
        return subprocess.run([ldap_program("ldapsearch"), "-x", "-LLL", "-H", self.uri,
                               "-b", BASE, search_filter], capture_output=True, text=True,
                              timeout=20)

    def add_user(self, name: str, uid: int):
        """A user (and their own group) added while everything runs, as a site's
        directory admin adds one, and made a member of the site's group."""
        ldif = user_entries(name, uid, "changetype: add\n") + (
            f"dn: cn={self.group},ou=groups,{BASE}\nchangetype: modify\n"
            f"add: memberUid\nmemberUid: {name}\n")
        r = subprocess.run([ldap_program("ldapmodify"), "-x", "-H", self.uri, "-D", ROOT_DN,
                            "-w", self.password], input=ldif, capture_output=True, text=True,
                           timeout=20)
        if r.returncode != 0:
            raise RuntimeError(f"ldapmodify adding {name} failed: {r.stderr}")
        self.users[name] = uid

    def sssd_conf(self) -> str:
        """The site's sssd.conf for this directory, as docs/deploy.md ("Users") shows
        it: ids from LDAP (RFC 2307), no authentication through sssd (users log in
        with their SSH keys), entries cached for a minute (a member added to the
        group shows within two), over plain LDAP."""
        return ("[sssd]\nservices = nss\ndomains = site\n\n"
                "[domain/site]\nid_provider = ldap\nauth_provider = none\n"
                f"ldap_uri = {self.uri}\nldap_search_base = {BASE}\n"
                "ldap_schema = rfc2307\nentry_cache_timeout = 60\n"
                # This directory has no TLS; sssd asks for StartTLS by default.
                "ldap_id_use_start_tls = false\n")

    def log_tail(self) -> str:
        return self.daemons.log_tail("slapd")

    def close(self):
        self.daemons.stop()
