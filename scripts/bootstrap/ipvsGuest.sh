# The IPVS test guest: this machine's kernel has no IPVS, so IPVS tests boot Debian's 6.1 kernel
# (whose package carries the ip_vs modules) under QEMU with a small busybox initramfs
# (test/harness/qemu/ipvsGuest.ts). Nothing is installed on the host: the packages are fetched with
# `apt-get download` and unpacked with `dpkg -x`. Sourced by bootstrap.sh.

# Bump when the recipe below changes (init, modules, binaries), so every cache rebuilds the image once.
IPVS_GUEST_REVISION=6
# Userland for the guest; their libraries come from the same Debian archive (see ipvs_guest_libraries).
IPVS_GUEST_TOOL_PACKAGES="busybox-static dash ipvsadm iproute2 nftables"
# Dynamically linked programs copied in (paths inside the unpacked packages and the guest alike).
IPVS_GUEST_PROGRAMS="bin/dash sbin/ipvsadm bin/ip sbin/tc sbin/bridge usr/sbin/nft"
# Modules to load at boot; their dependencies are added and ordered with modinfo. crc32c_generic is
# named because libcrc32c only soft-depends on "crc32c", which nothing would otherwise provide.
# e1000 drives the NIC QEMU's user networking gives a test that reaches the host's API server
# (ipvsGuest.ts apiServerPort); the other tests boot with no NIC, where it stays unused. nft_fib_ipv4
# serves the node agent's DSR table (`fib daddr type`), run in the guest by ipvsController.test.ts.
# sch_ingress (clsact) and cls_bpf carry the DSR fast path's tc filters (dsrFastPathGuest.test.ts).
IPVS_GUEST_MODULES="crc32c_generic veth dummy ipip e1000 sch_ingress cls_bpf
  ip_vs ip_vs_rr ip_vs_wrr ip_vs_lc ip_vs_wlc ip_vs_sh ip_vs_dh ip_vs_mh ip_vs_sed ip_vs_nq
  ip_vs_fo ip_vs_ovf ip_vs_lblc ip_vs_lblcr
  nf_nat nf_tables nft_chain_nat nft_nat nft_masq nft_ct nft_numgen nft_hash nft_fib_ipv4 vxlan"

ipvs_guest_kernel_release() { printf '%s' "${IPVS_GUEST_KERNEL_PACKAGE#linux-image-}"; }
ipvs_guest_version() { printf '%s-r%s' "$(ipvs_guest_kernel_release)" "$IPVS_GUEST_REVISION"; }
# The harness sources this file and calls this, so the image's location is defined only here.
ipvs_guest_dir() { tool_dir ipvs-guest "$(ipvs_guest_version)"; }

# Sandbox user root: _apt cannot enter the private staging folder.
ipvs_guest_fetch() { (cd "$1" && apt-get download -qq -o APT::Sandbox::User=root "$2") >>"$PLB_LOGS/ipvs-guest.log" 2>&1; }

# ipvs_guest_download DIR PACKAGE...: one package at a time, so a failure names its package.
ipvs_guest_download() {
  local dir=$1 pkg log=$PLB_LOGS/ipvs-guest.log updated=
  shift
  for pkg in "$@"; do
    ipvs_guest_fetch "$dir" "$pkg" && continue
    # Stale package lists name versions the archive has since replaced: refresh them once.
    if [ -z "$updated" ]; then
      updated=1
      apt-get update -qq >>"$log" 2>&1
      ipvs_guest_fetch "$dir" "$pkg" && continue
    fi
    tail -n 3 "$log" >&2
    if [ "$pkg" = "$IPVS_GUEST_KERNEL_PACKAGE" ]; then
      die "could not download the guest kernel package $pkg; if the Debian archive dropped it, pick another from 'apt-cache search linux-image-6.1.0-' and set IPVS_GUEST_KERNEL_PACKAGE in scripts/versions.env (log: $log)"
    fi
    die "could not download the Debian package $pkg for the IPVS guest (log: $log)"
  done
}

# The library packages the guest programs need, from apt's dependency graph (no host libs assumed).
ipvs_guest_libraries() {
  # shellcheck disable=SC2086 # word splitting of the package list is intended
  apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks --no-replaces \
    --no-enhances $IPVS_GUEST_TOOL_PACKAGES 2>>"$PLB_LOGS/ipvs-guest.log" | grep '^lib' | sort -u
}

# ipvs_guest_copy_libraries ROOT IMAGE PROGRAM...: copies each program's shared libraries (found
# with ldd, preferring the unpacked packages) to the same paths in the image.
ipvs_guest_copy_libraries() {
  local root=$1 img=$2 prog libdirs line path src
  shift 2
  libdirs=$root/lib/x86_64-linux-gnu:$root/usr/lib/x86_64-linux-gnu
  for prog in "$@"; do
    while read -r line; do
      case $line in
        *"not found"*) die "the IPVS guest's $prog needs ${line%% *}, which no unpacked package provides" ;;
        *"=> /"*) path=${line#*=> } ;;
        /*) path=$line ;;
        *) continue ;;
      esac
      path=${path%% (*}
      path=${path#"$root"}
      # ldd names the loader by its host path (/lib64/...); the unpacked libc6 holds the real file.
      src=$root/lib/x86_64-linux-gnu/$(basename "$path")
      [ -f "$src" ] || src=$root$path
      [ -f "$src" ] || src=$path
      mkdir -p "$img$(dirname "$path")"
      cp -L "$src" "$img$path" || die "could not copy $src into the IPVS guest image"
    done < <(LD_LIBRARY_PATH=$libdirs ldd "$root/$prog" 2>&1)
  done
}

# ipvs_guest_module_order MODULE_DIR NAME...: prints the modules and their dependencies, each after
# the ones it needs (the unpacked tree has no modules.dep, so modinfo reads each module's own list).
ipvs_guest_module_order() {
  local moddir=$1 name
  shift
  local -A file=() seen=()
  while read -r path; do
    name=$(basename "$path" .ko)
    file[$name]=$path
  done < <(find "$moddir" -name '*.ko')
  [ ${#file[@]} -gt 0 ] || die "no kernel modules (*.ko) in $moddir; has $IPVS_GUEST_KERNEL_PACKAGE compressed them?"
  ipvs_guest_visit_module() {
    local mod=$1 deps dep
    # A soft dependency names a feature ("crc32c"); its generic implementation provides it.
    [ -n "${file[$mod]:-}" ] || [ -z "${file[${mod}_generic]:-}" ] || mod=${mod}_generic
    [ -n "${seen[$mod]:-}" ] && return 0
    [ -n "${file[$mod]:-}" ] || die "kernel module $mod is not in $IPVS_GUEST_KERNEL_PACKAGE"
    seen[$mod]=1
    deps="$(modinfo -F depends "${file[$mod]}" | tr ',' ' ') $(modinfo -F softdep "${file[$mod]}" |
      sed -n 's/.*pre:\([^:]*\)\(post:.*\)\{0,1\}$/\1/p')"
    for dep in $deps; do ipvs_guest_visit_module "$dep"; done
    printf '%s %s\n' "$mod" "${file[$mod]}"
  }
  for name in "$@"; do ipvs_guest_visit_module "$name"; done
}

# The guest's /init: mounts, loads the modules, runs /test/run.sh (from a second initramfs the
# harness appends per test) between markers carrying the run id from the kernel command line,
# then powers off. The harness parses the same markers (test/harness/qemu/guestOutput.ts).
ipvs_guest_init() {
  cat <<'INIT'
#!/bin/sh
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t tmpfs tmpfs /run
mount -t tmpfs tmpfs /tmp
# Keep kernel messages out of the test's output on the shared serial console.
echo 1 >/proc/sys/kernel/printk
ip link set lo up
while read -r mod; do
  insmod "/lib/modules/$mod.ko" || echo "plb-guest: insmod $mod failed"
done </etc/plb-guest/modules
run_id=none
for arg in $(cat /proc/cmdline); do
  case $arg in plb_run=*) run_id=${arg#plb_run=} ;; esac
done
echo "@@PLB-GUEST-BEGIN $run_id@@"
if [ -f /test/run.sh ]; then
  (cd /test && sh /test/run.sh </dev/null 2>&1)
  rc=$?
else
  echo "plb-guest: no /test/run.sh in the initramfs"
  rc=127
fi
echo "@@PLB-GUEST-END $run_id $rc@@"
sync
# poweroff -f does not wait for the serial console to drain: under load the last lines (the end
# marker among them) were lost. A second is ample at the emulated UART's speed.
sleep 1
poweroff -f
INIT
}

build_ipvs_guest() {
  local staging=$1 work root img krel mod path prog applet
  krel=$(ipvs_guest_kernel_release)
  work=$staging/.work && root=$work/root && img=$work/image
  mkdir -p "$work/debs" "$root" "$img" || return 1

  local libs
  libs=$(ipvs_guest_libraries) && [ -n "$libs" ] || {
    apt-get update -qq >>"$PLB_LOGS/ipvs-guest.log" 2>&1
    libs=$(ipvs_guest_libraries) && [ -n "$libs" ]
  } || die "apt-cache knows none of $IPVS_GUEST_TOOL_PACKAGES; run apt-get update (log: $PLB_LOGS/ipvs-guest.log)"
  # shellcheck disable=SC2086 # word splitting of the package lists is intended
  ipvs_guest_download "$work/debs" "$IPVS_GUEST_KERNEL_PACKAGE" $IPVS_GUEST_TOOL_PACKAGES $libs
  for path in "$work"/debs/*.deb; do
    dpkg -x "$path" "$root" || die "could not unpack $(basename "$path") for the IPVS guest"
  done
  [ -f "$root/boot/vmlinuz-$krel" ] || die "$IPVS_GUEST_KERNEL_PACKAGE has no boot/vmlinuz-$krel"
  cp "$root/boot/vmlinuz-$krel" "$staging/vmlinuz" || return 1

  mkdir -p "$img"/{bin,sbin,usr/bin,usr/sbin,lib/modules,lib64,proc,sys,dev,run,tmp,test,etc/plb-guest,var} || return 1
  ln -s ../run "$img/var/run"
  # The kernel's built-in initramfs has /dev/console already; this one is for kernels without it.
  mknod "$img/dev/console" c 5 1 2>/dev/null || true
  for prog in $IPVS_GUEST_PROGRAMS; do
    [ -e "$root/$prog" ] || die "no $prog in the unpacked packages ($IPVS_GUEST_TOOL_PACKAGES)"
    cp -L "$root/$prog" "$img/$prog" || return 1
  done
  # shellcheck disable=SC2086
  ipvs_guest_copy_libraries "$root" "$img" $IPVS_GUEST_PROGRAMS
  cp "$root/bin/busybox" "$img/bin/busybox" || return 1
  # sh is dash: busybox's shell runs its own applets before PATH, so a plain `ip` would be busybox's
  # (which lacks netns) even with iproute2's first on PATH.
  ln -s dash "$img/bin/sh"
  # Every busybox applet, except where a real program stands in (iproute2's ip has netns; busybox's not).
  for applet in $("$root/bin/busybox" --list-full); do
    case " $IPVS_GUEST_PROGRAMS " in *"/$(basename "$applet") "*) continue ;; esac
    [ -e "$img/$applet" ] || [ "$applet" = linuxrc ] || ln -s /bin/busybox "$img/$applet"
  done
  printf 'root:x:0:0:root:/:/bin/sh\n' >"$img/etc/passwd"
  printf 'root:x:0:\n' >"$img/etc/group"

  # shellcheck disable=SC2086
  ipvs_guest_module_order "$root/lib/modules/$krel/kernel" $IPVS_GUEST_MODULES >"$work/modules" || return 1
  while read -r mod path; do
    cp "$path" "$img/lib/modules/$mod.ko" && echo "$mod" >>"$img/etc/plb-guest/modules" || return 1
  done <"$work/modules"

  ipvs_guest_init >"$img/init" && chmod 755 "$img/init" || return 1
  (cd "$img" && find . -mindepth 1 -print0 | LC_ALL=C sort -z |
    cpio --null --create --format=newc --owner=0:0 --quiet) | gzip -9 >"$staging/initramfs.cpio.gz" ||
    die "could not pack the IPVS guest initramfs (is cpio installed?)"
  {
    printf 'kernel_package=%s\nkernel_release=%s\n' "$IPVS_GUEST_KERNEL_PACKAGE" "$krel"
    for path in "$work"/debs/*.deb; do dpkg-deb --show --showformat='${Package}=${Version}\n' "$path"; done
  } >"$staging/manifest"
  rm -rf "$work"
}

install_ipvs_guest() { install_tool ipvs-guest "$(ipvs_guest_version)" build_ipvs_guest; }
