# Debian's docker-registry (the CNCF distribution registry) for the image push test, which runs it
# on a loopback address in a network namespace of its own. Only the binary: installing the package
# would start a registry service on this machine (its init script). Sourced by bootstrap.sh.
install_docker_registry() { install_deb_binary docker-registry /usr/bin/docker-registry; }
