# BIND's named for the migration tests' DNS server (test/harness/lab/dnsServer.ts): only the binary,
# from Debian's bind9 package unpacked but never installed (debBinary.sh), so no DNS service starts
# on this machine; its libraries (bind9-libs) and nsupdate/dig (bind9-dnsutils) are APT_PACKAGES.
# Sourced by bootstrap.sh.
install_named() { install_deb_binary bind9 /usr/sbin/named; }
