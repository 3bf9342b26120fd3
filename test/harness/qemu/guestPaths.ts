// Where programs sit inside the IPVS guest (scripts/bootstrap/ipvsGuest.sh puts them there), for
// test scripts. /bin/sh is dash, so plain names resolve through PATH to these real programs; busybox
// ash would run its own applets first (its `ip` has no netns). Every other busybox applet (wget,
// httpd, nc, timeout, sysctl, ...) is on PATH; busybox's `wget -T` crashes, so bound it with `timeout`.
export const GUEST_PATHS = {
  ip: "/bin/ip",
  ipvsadm: "/sbin/ipvsadm",
  tc: "/sbin/tc",
  bridge: "/sbin/bridge",
  nft: "/usr/sbin/nft",
  busybox: "/bin/busybox",
  sh: "/bin/sh",
} as const;

/** Where the harness puts the test's script and files in the guest (also the script's cwd). */
export const GUEST_TEST_DIR = "/test";
