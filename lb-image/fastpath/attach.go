package main

// Where a program runs: the ingress of a device, through one of two kernel hooks.
//  - tcx (Linux 6.6 and later): the link is not pinned, so it goes when the loader exits and a dead
//    loader leaves only the kernel path.
//  - tc, a direct-action cls_bpf filter on the device's clsact qdisc, for older kernels (Debian 12,
//    Amazon Linux 2023 and GKE's COS LTS run 6.1). A filter outlives its loader, so the loader
//    removes it when it stops; one that died leaves its program running on its last maps until the
//    next loader takes its place (README.md, "The hook"). The rules are the backend pods' decap
//    filter's (lb-image/src/nodeAgent/dsr/podDecap.ts): a fixed, late pref, so a CNI's own filters
//    run first; another's filter at that pref is never replaced; a clsact qdisc is removed only by
//    whoever added it, and only while nothing uses it.

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"slices"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// hookKind names a hook; "auto" takes tcx where the kernel has it, else tc.
type hookKind string

const (
	hookAuto hookKind = "auto"
	hookTCX  hookKind = "tcx"
	hookTC   hookKind = "tc"
)

// tcPref is our filter's pref on a device's ingress: late, as the decap filter's (DECAP_PREF).
const tcPref = 65000

// hookFlag defines --hook on a flag set.
func hookFlag(fs *flag.FlagSet) *string {
	return fs.String("hook", string(hookAuto), "the ingress hook: auto (tcx where the kernel has it, else tc), tcx or tc")
}

func parseHookKind(s string) (hookKind, error) {
	switch k := hookKind(s); k {
	case hookAuto, hookTCX, hookTC:
		return k, nil
	}
	return "", fmt.Errorf("--hook: %q is not a hook; use auto (tcx where the kernel has it, else tc), tcx or tc", s)
}

// A hook holds one program on one device's ingress.
type hook interface {
	// attached tells whether the program still runs there.
	attached() (bool, error)
	// Close takes the program off the device.
	Close() error
}

// resolveHook turns "auto" into the hook this kernel has: tcx, else tc. It probes with prog on a
// device that does not exist, as cilium/ebpf's own feature test does, so nothing is attached.
func resolveHook(kind hookKind, prog *ebpf.Program) hookKind {
	if kind != hookAuto {
		return kind
	}
	_, err := link.AttachTCX(link.TCXOptions{Interface: math.MaxInt32, Program: prog, Attach: ebpf.AttachTCXIngress})
	if errors.Is(err, ebpf.ErrNotSupported) {
		return hookTC
	}
	return hookTCX
}

// attach puts prog on the ingress of the device by the hook `kind` (resolved).
func attach(kind hookKind, prog *ebpf.Program, ifindex int) (hook, error) {
	if kind == hookTC {
		return attachTC(prog, ifindex)
	}
	return attachTCX(prog, ifindex)
}

type tcxHook struct {
	link.Link
	prog    *ebpf.Program
	ifindex int
}

func attachTCX(prog *ebpf.Program, ifindex int) (hook, error) {
	l, err := link.AttachTCX(link.TCXOptions{Interface: ifindex, Program: prog, Attach: ebpf.AttachTCXIngress})
	switch {
	case errors.Is(err, ebpf.ErrNotSupported):
		return nil, fmt.Errorf("kernel has no tcx (needs Linux 6.6; --hook auto or tc uses tc there): %w", err)
	case errors.Is(err, os.ErrPermission):
		return nil, fmt.Errorf("not permitted to attach to tcx ingress (needs CAP_NET_ADMIN and CAP_BPF): %w", err)
	case err != nil:
		return nil, fmt.Errorf("attaching to tcx ingress of ifindex %d: %w", ifindex, err)
	}
	return &tcxHook{Link: l, prog: prog, ifindex: ifindex}, nil
}

func (h *tcxHook) attached() (bool, error) {
	id := programID(h.prog)
	res, err := link.QueryPrograms(link.QueryOptions{Target: h.ifindex, Attach: ebpf.AttachTCXIngress})
	if err != nil {
		return false, fmt.Errorf("querying tcx ingress of ifindex %d: %w", h.ifindex, err)
	}
	return slices.ContainsFunc(res.Programs, func(p link.AttachedProgram) bool { return uint32(p.ID) == id }), nil
}

type tcHook struct {
	prog    *ebpf.Program
	ifindex int
	// This hook added the device's clsact qdisc, so may remove it.
	clsactOurs bool
}

func attachTC(prog *ebpf.Program, ifindex int) (hook, error) {
	h := &tcHook{prog: prog, ifindex: ifindex}
	switch err := netlink.QdiscAdd(clsactQdisc(ifindex)); {
	case err == nil:
		h.clsactOurs = true
	case errors.Is(err, unix.EEXIST): // a CNI's, or a dead loader's: used as it is
	case errors.Is(err, unix.EPERM):
		return nil, fmt.Errorf("not permitted to add a clsact qdisc (needs CAP_NET_ADMIN): %w", err)
	default:
		return nil, fmt.Errorf("adding a clsact qdisc to ifindex %d: %w", ifindex, err)
	}
	if err := h.place(); err != nil {
		_ = h.removeClsact()
		return nil, err
	}
	return h, nil
}

// place puts the program in our filter's place, replacing what is there only if it is a program of
// ours by name (a dead loader's).
func (h *tcHook) place() error {
	info, err := h.prog.Info()
	if err != nil {
		return err
	}
	filters, err := h.filters(netlink.HANDLE_MIN_INGRESS)
	if err != nil {
		return err
	}
	for _, f := range filters {
		if f.Attrs().Priority != tcPref {
			continue
		}
		if bpf, ok := f.(*netlink.BpfFilter); !ok || bpf.Name != info.Name {
			return fmt.Errorf("tc ingress of ifindex %d: pref %d holds another's filter (%s); not replaced", h.ifindex, tcPref, describeFilter(f))
		}
	}
	err = netlink.FilterReplace(h.filter())
	if errors.Is(err, unix.EPERM) {
		return fmt.Errorf("not permitted to add a tc filter (needs CAP_NET_ADMIN and CAP_BPF): %w", err)
	}
	if err != nil {
		return fmt.Errorf("adding the tc filter on ifindex %d's ingress: %w", h.ifindex, err)
	}
	return nil
}

// filter is our filter, as netlink adds and deletes it.
func (h *tcHook) filter() *netlink.BpfFilter {
	info, _ := h.prog.Info()
	name := "portable-lb"
	if info != nil {
		name = info.Name
	}
	return &netlink.BpfFilter{
		FilterAttrs: netlink.FilterAttrs{
			LinkIndex: h.ifindex, Parent: netlink.HANDLE_MIN_INGRESS, Handle: 1, Priority: tcPref, Protocol: unix.ETH_P_ALL,
		},
		Fd:           h.prog.FD(),
		Name:         name,
		DirectAction: true,
	}
}

func (h *tcHook) filters(parent uint32) ([]netlink.Filter, error) {
	dev, err := netlink.LinkByIndex(h.ifindex)
	if err != nil {
		return nil, fmt.Errorf("ifindex %d: %w", h.ifindex, err)
	}
	filters, err := netlink.FilterList(dev, parent)
	if err != nil {
		return nil, fmt.Errorf("listing tc filters of ifindex %d: %w", h.ifindex, err)
	}
	return filters, nil
}

func (h *tcHook) attached() (bool, error) {
	id := programID(h.prog)
	filters, err := h.filters(netlink.HANDLE_MIN_INGRESS)
	if err != nil {
		return false, err
	}
	return slices.ContainsFunc(filters, func(f netlink.Filter) bool {
		bpf, ok := f.(*netlink.BpfFilter)
		return ok && f.Attrs().Priority == tcPref && uint32(bpf.Id) == id
	}), nil
}

// Close removes our filter if it still holds this program (a newer loader's stays), then the clsact
// qdisc if this hook added it.
func (h *tcHook) Close() error {
	on, err := h.attached()
	if err != nil {
		return err
	}
	if on {
		if err := netlink.FilterDel(h.filter()); err != nil {
			return fmt.Errorf("removing the tc filter on ifindex %d's ingress: %w", h.ifindex, err)
		}
	}
	return h.removeClsact()
}

// removeClsact removes the clsact qdisc this hook added, once no filter hangs on it.
func (h *tcHook) removeClsact() error {
	if !h.clsactOurs {
		return nil
	}
	for _, parent := range []uint32{netlink.HANDLE_MIN_INGRESS, netlink.HANDLE_MIN_EGRESS} {
		if filters, err := h.filters(parent); err != nil || len(filters) > 0 {
			return err
		}
	}
	h.clsactOurs = false
	return netlink.QdiscDel(clsactQdisc(h.ifindex))
}

// clsactQdisc is a device's clsact qdisc, as netlink adds and deletes it.
func clsactQdisc(ifindex int) *netlink.Clsact {
	return &netlink.Clsact{QdiscAttrs: netlink.QdiscAttrs{
		LinkIndex: ifindex, Handle: netlink.MakeHandle(0xffff, 0), Parent: netlink.HANDLE_CLSACT,
	}}
}

// A tcLeftover is a filter of ours that no hook of this loader holds: a dead loader's.
type tcLeftover struct {
	ifindex int
	name    string
}

// sweepTC removes, from the ingress of every device in the namespace, the filters at our pref that
// carry one of the names (our programs') but that held(ifindex, name) does not claim: what a loader
// that died left on devices its successor is not asked for. It returns what it removed.
func sweepTC(names []string, held func(ifindex int, name string) bool) ([]tcLeftover, error) {
	devs, err := netlink.LinkList()
	if err != nil {
		return nil, fmt.Errorf("listing devices: %w", err)
	}
	var removed []tcLeftover
	for _, dev := range devs {
		filters, err := netlink.FilterList(dev, netlink.HANDLE_MIN_INGRESS)
		if err != nil {
			continue // no clsact there, or the device just went
		}
		for _, f := range filters {
			bpf, ok := f.(*netlink.BpfFilter)
			if !ok || f.Attrs().Priority != tcPref || !slices.Contains(names, bpf.Name) || held(dev.Attrs().Index, bpf.Name) {
				continue
			}
			if err := netlink.FilterDel(f); err != nil && !errors.Is(err, unix.ENOENT) {
				return removed, fmt.Errorf("removing a left-over %s filter on %s: %w", bpf.Name, dev.Attrs().Name, err)
			}
			removed = append(removed, tcLeftover{ifindex: dev.Attrs().Index, name: bpf.Name})
		}
	}
	return removed, nil
}

func describeFilter(f netlink.Filter) string {
	if bpf, ok := f.(*netlink.BpfFilter); ok {
		return fmt.Sprintf("bpf program %q, id %d", bpf.Name, bpf.Id)
	}
	return f.Type()
}
