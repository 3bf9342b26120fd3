package main

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// inNewNetns runs f on a thread of its own in a new network namespace with one device up (a veth:
// this kernel has no dummy devices), given by ifindex. The thread is never unlocked, so Go ends it,
// and the namespace goes with it.
func inNewNetns(t *testing.T, f func(ifindex int)) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			t.Errorf("a network namespace of its own (needs CAP_SYS_ADMIN): %v", err)
			return
		}
		dev := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "d0"}, PeerName: "d1"}
		if err := netlink.LinkAdd(dev); err != nil {
			t.Errorf("adding d0: %v", err)
			return
		}
		if err := netlink.LinkSetUp(dev); err != nil {
			t.Errorf("d0 up: %v", err)
			return
		}
		f(dev.Attrs().Index)
	}()
	<-done
}

// passProgram is a tc program that passes every packet on (TC_ACT_UNSPEC), named `name`.
func passProgram(t *testing.T, name string) *ebpf.Program {
	t.Helper()
	p, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name: name, Type: ebpf.SchedCLS, License: "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, -1), asm.Return()},
	})
	if err != nil {
		t.Fatalf("loading a program (needs CAP_BPF): %v", err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// ingress lists the bpf filters on the device's ingress as "pref name".
func ingress(t *testing.T, ifindex int) []string {
	t.Helper()
	dev, err := netlink.LinkByIndex(ifindex)
	if err != nil {
		t.Fatal(err)
	}
	filters, err := netlink.FilterList(dev, netlink.HANDLE_MIN_INGRESS)
	if err != nil {
		return []string{"no clsact"}
	}
	out := []string{}
	for _, f := range filters {
		if bpf, ok := f.(*netlink.BpfFilter); ok {
			out = append(out, fmt.Sprintf("%d %s", f.Attrs().Priority, bpf.Name))
		}
	}
	return out
}

func hasClsact(t *testing.T, ifindex int) bool {
	t.Helper()
	dev, _ := netlink.LinkByIndex(ifindex)
	qdiscs, err := netlink.QdiscList(dev)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range qdiscs {
		if q.Type() == "clsact" {
			return true
		}
	}
	return false
}

func TestTCHookTakesItsPlaceAndLeavesOthersAlone(t *testing.T) {
	inNewNetns(t, func(ifindex int) {
		first := passProgram(t, "dsr_lb")
		h1, err := attachTC(first, ifindex)
		if err != nil {
			t.Fatal(err)
		}
		if got := ingress(t, ifindex); len(got) != 1 || got[0] != "65000 dsr_lb" {
			t.Errorf("ingress after attaching: %v; want our filter at pref 65000", got)
		}
		if on, err := h1.attached(); err != nil || !on {
			t.Errorf("attached: %v, %v", on, err)
		}
		// A restarted loader takes the dead one's place; the old hook then neither sees itself
		// attached nor removes the new one's filter when it closes.
		second := passProgram(t, "dsr_lb")
		h2, err := attachTC(second, ifindex)
		if err != nil {
			t.Fatal(err)
		}
		if on, _ := h1.attached(); on {
			t.Error("the replaced hook still reports itself attached")
		}
		if err := h1.Close(); err != nil {
			t.Fatal(err)
		}
		if on, _ := h2.attached(); !on {
			t.Error("closing the replaced hook removed its successor's filter")
		}
		// Someone removes our filter: attached says so.
		if err := netlink.FilterDel(h2.(*tcHook).filter()); err != nil {
			t.Fatal(err)
		}
		if on, _ := h2.attached(); on {
			t.Error("attached with the filter removed")
		}
		// Another's program at our pref is never replaced.
		other := passProgram(t, "cni_prog")
		theirs := &tcHook{prog: other, ifindex: ifindex}
		if err := netlink.FilterAdd(theirs.filter()); err != nil {
			t.Fatal(err)
		}
		if _, err := attachTC(passProgram(t, "dsr_lb"), ifindex); err == nil ||
			!strings.Contains(err.Error(), `pref 65000 holds another's filter (bpf program "cni_prog"`) {
			t.Errorf("attaching over another's filter: %v", err)
		}
		if got := ingress(t, ifindex); len(got) != 1 || got[0] != "65000 cni_prog" {
			t.Errorf("ingress: %v; want only the other's filter", got)
		}
		// The clsact qdisc the first hook added stays while the other's filter uses it.
		if err := h1.(*tcHook).removeClsact(); err != nil || !hasClsact(t, ifindex) {
			t.Errorf("clsact removed under another's filter (error %v)", err)
		}
	})
}

func TestTCHookRemovesTheClsactItAdded(t *testing.T) {
	inNewNetns(t, func(ifindex int) {
		h, err := attachTC(passProgram(t, "to_lb_pod"), ifindex)
		if err != nil {
			t.Fatal(err)
		}
		if !hasClsact(t, ifindex) {
			t.Fatal("no clsact qdisc after attaching")
		}
		if err := h.Close(); err != nil {
			t.Fatal(err)
		}
		if hasClsact(t, ifindex) {
			t.Error("the clsact qdisc the hook added is still there")
		}
		// A clsact that was there before stays.
		if err := netlink.QdiscAdd(clsactQdisc(ifindex)); err != nil {
			t.Fatal(err)
		}
		h, err = attachTC(passProgram(t, "to_lb_pod"), ifindex)
		if err != nil {
			t.Fatal(err)
		}
		if err := h.Close(); err != nil {
			t.Fatal(err)
		}
		if got := ingress(t, ifindex); len(got) != 0 || !hasClsact(t, ifindex) {
			t.Errorf("after closing: filters %v, clsact %v; want none, and the clsact kept", got, hasClsact(t, ifindex))
		}
	})
}

func TestTCXHookAndAuto(t *testing.T) {
	inNewNetns(t, func(ifindex int) {
		prog := passProgram(t, "dsr_lb")
		// This project's kernels have tcx (6.6+): auto takes it; the named kinds stay as named.
		if got := resolveHook(hookAuto, prog); got != hookTCX {
			t.Errorf("auto resolved to %s on a kernel with tcx", got)
		}
		if got := resolveHook(hookTC, prog); got != hookTC {
			t.Errorf("tc resolved to %s", got)
		}
		h, err := attach(hookTCX, prog, ifindex)
		if err != nil {
			t.Fatal(err)
		}
		if on, err := h.attached(); err != nil || !on {
			t.Errorf("attached: %v, %v", on, err)
		}
		if err := h.Close(); err != nil {
			t.Fatal(err)
		}
		if on, _ := h.attached(); on {
			t.Error("attached after Close")
		}
		if hasClsact(t, ifindex) {
			t.Error("tcx added a clsact qdisc")
		}
	})
}

func TestParseHookKind(t *testing.T) {
	for _, s := range []string{"auto", "tcx", "tc"} {
		if k, err := parseHookKind(s); err != nil || string(k) != s {
			t.Errorf("%s: %v, %v", s, k, err)
		}
	}
	if _, err := parseHookKind("xdp"); err == nil || !strings.Contains(err.Error(), `--hook: "xdp" is not a hook`) {
		t.Errorf("xdp: %v", err)
	}
}
