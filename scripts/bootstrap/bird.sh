# BIRD for the tests and the lab: the LB image's speaker build (lb-image/bird/build.sh, Debian's
# bird2 plus our patches), so the tests run the daemon the image ships. Sourced by
# bootstrap.sh. The cache key includes a hash of the build script and the patches, so changing any
# rebuilds it once.

build_bird() { "$REPO_ROOT/lb-image/bird/build.sh" /usr "$1"; }

install_bird() { install_tool bird "$BIRD_TOOL_VERSION" build_bird; }
