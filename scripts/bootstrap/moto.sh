# moto's server (PyPI `moto[server]`), the EC2 API the cloud-routes tests point the AWS SDK at.
# Installed from PyPI into a venv in the cache, keyed by MOTO_VERSION. Sourced by bootstrap.sh.

install_moto() {
  install_venv moto "$MOTO_VERSION" "moto (the cloud-routes tests' EC2 API)" "moto[server]==$MOTO_VERSION"
}
