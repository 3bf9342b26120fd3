package main

// The program on the device's tcx ingress. The link is not pinned: it goes when the loader exits,
// so a dead loader leaves only the kernel path.

import (
	"errors"
	"fmt"
	"os"
	"slices"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
)

func attach(prog *ebpf.Program, ifindex int) (link.Link, error) {
	l, err := link.AttachTCX(link.TCXOptions{Interface: ifindex, Program: prog, Attach: ebpf.AttachTCXIngress})
	switch {
	case errors.Is(err, ebpf.ErrNotSupported):
		return nil, fmt.Errorf("kernel has no tcx (needs Linux 6.6): %w", err)
	case errors.Is(err, os.ErrPermission):
		return nil, fmt.Errorf("not permitted to attach to tcx ingress (needs CAP_NET_ADMIN and CAP_BPF): %w", err)
	case err != nil:
		return nil, fmt.Errorf("attaching to tcx ingress of ifindex %d: %w", ifindex, err)
	}
	return l, nil
}

// attached tells whether the program runs on the device's tcx ingress.
func attached(prog *ebpf.Program, ifindex int) (bool, error) {
	info, err := prog.Info()
	if err != nil {
		return false, err
	}
	id, _ := info.ID()
	res, err := link.QueryPrograms(link.QueryOptions{Target: ifindex, Attach: ebpf.AttachTCXIngress})
	if err != nil {
		return false, fmt.Errorf("querying tcx ingress of ifindex %d: %w", ifindex, err)
	}
	return slices.ContainsFunc(res.Programs, func(p link.AttachedProgram) bool { return p.ID == id }), nil
}
