package main

// `portable-lb-fastpath node`: the LB node's share of the fast path (bpf/dsr_node.c), run by the
// node agent in the node's network namespace. It loads both programs, then attaches to_lb_pod to
// each uplink and from_lb_pod to each LB pod's host-side veth the agent names, and keeps the maps
// and attachments as the last sync said until stdin closes (then every link goes with it).

import (
	"bufio"
	_ "embed"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"os"

	"github.com/cilium/ebpf"
)

//go:embed dsr_node.o
var nodeObject []byte

// dsr_node.c's enum stat, in order.
var nodeStatNames = []string{"to_pod", "from_pod", "not_ours", "ttl", "no_route", "no_neigh", "too_big"}

type nodeProgram struct {
	toPod, fromPod *ebpf.Program
	vipPools       *ebpf.Map
	lbPods         *ebpf.Map
	uplinks        *ebpf.Map
	stats          *ebpf.Map
}

// An attachment: which program on which device (by ifindex).
type attachment struct {
	ifindex int
	toPod   bool // to_lb_pod (an uplink), else from_lb_pod (an LB pod's veth)
}

// poolKey is an LPM trie key: the prefix length, then the address in network order.
type poolKey struct {
	PrefixLen uint32
	Addr      ipv4
}

// nodeState is what a sync asks for: the maps' contents, whose keys are also the attachments.
type nodeState struct {
	uplinks  map[uint32]uint8
	vipPools map[poolKey]uint8
	lbPods   map[ipv4]uint32
}

func emptyNodeState() nodeState {
	return nodeState{uplinks: map[uint32]uint8{}, vipPools: map[poolKey]uint8{}, lbPods: map[ipv4]uint32{}}
}

type nodeLoader struct {
	prog  *nodeProgram
	kind  hookKind
	links map[attachment]hook
	want  nodeState
}

type nodeRequest struct {
	Op      string   `json:"op"`
	Uplinks []string `json:"uplinks"`
	Pools   []string `json:"pools"`
	Pods    []struct {
		IP      string `json:"ip"`
		Ifindex int    `json:"ifindex"`
	} `json:"pods"`
}

func runNode(args []string) {
	out := json.NewEncoder(os.Stdout)
	fs := flag.NewFlagSet("node", flag.ExitOnError)
	hookName := hookFlag(fs)
	_ = fs.Parse(args)
	kind, err := parseHookKind(*hookName)
	var prog *nodeProgram
	if err == nil {
		prog, err = loadNodeProgram()
	}
	if err != nil {
		_ = out.Encode(event{Event: "error", Error: err.Error()})
		os.Exit(1)
	}
	l := &nodeLoader{prog: prog, kind: resolveHook(kind, prog.toPod), links: map[attachment]hook{}, want: emptyNodeState()}
	_ = out.Encode(event{Event: "ready", Program: programID(prog.toPod), Hook: string(l.kind)})
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 64<<10), 16<<20)
	for in.Scan() {
		if err := out.Encode(l.handle(in.Bytes())); err != nil {
			os.Exit(1)
		}
	}
	for _, ln := range l.links {
		_ = ln.Close()
	}
}

func programID(p *ebpf.Program) uint32 {
	info, err := p.Info()
	if err != nil {
		return 0
	}
	id, _ := info.ID()
	return uint32(id)
}

func loadNodeProgram() (*nodeProgram, error) {
	_, coll, err := loadCollection(nodeObject, "dsr_node.o")
	if err != nil {
		return nil, err
	}
	return &nodeProgram{
		toPod:    coll.Programs["to_lb_pod"],
		fromPod:  coll.Programs["from_lb_pod"],
		vipPools: coll.Maps["vip_pools"],
		lbPods:   coll.Maps["lb_pods"],
		uplinks:  coll.Maps["uplinks"],
		stats:    coll.Maps["node_stats"],
	}, nil
}

func (l *nodeLoader) handle(line []byte) response {
	var req nodeRequest
	if err := json.Unmarshal(line, &req); err != nil {
		return failed(fmt.Errorf("not a JSON request: %w", err))
	}
	switch req.Op {
	case "sync":
		want, err := parseNodeSync(req, interfaceIndex)
		if err != nil {
			return failed(err)
		}
		l.want = want
		changes, skipped, err := l.converge(nil)
		if err != nil {
			return failed(err)
		}
		return response{"ok": true, "changes": changes, "skipped": orEmpty(skipped)}
	case "check":
		drift := []string{}
		_, skipped, err := l.converge(&drift)
		if err != nil {
			return failed(err)
		}
		return response{"ok": true, "drift": drift, "skipped": orEmpty(skipped)}
	case "stats":
		counts, err := perCPUCounters(l.prog.stats, nodeStatNames)
		if err != nil {
			return failed(err)
		}
		return response{"ok": true, "counts": counts}
	}
	return failed(fmt.Errorf("unknown op %q", req.Op))
}

func interfaceIndex(name string) (int, error) {
	dev, err := net.InterfaceByName(name)
	if err != nil {
		return 0, fmt.Errorf("uplink %s: %w", name, err)
	}
	return dev.Index, nil
}

// parseNodeSync validates a sync: uplinks by name, the VIP pools as IPv4 prefixes, LB pods by IP
// with their veth's ifindex.
func parseNodeSync(r nodeRequest, index func(string) (int, error)) (nodeState, error) {
	s := emptyNodeState()
	for _, p := range r.Pools {
		prefix, err := netip.ParsePrefix(p)
		if err != nil || !prefix.Addr().Is4() {
			return nodeState{}, fmt.Errorf("pools: not an IPv4 prefix: %q", p)
		}
		prefix = prefix.Masked()
		s.vipPools[poolKey{PrefixLen: uint32(prefix.Bits()), Addr: prefix.Addr().As4()}] = 1
	}
	for _, name := range r.Uplinks {
		i, err := index(name)
		if err != nil {
			return nodeState{}, err
		}
		s.uplinks[uint32(i)] = 1
	}
	for _, p := range r.Pods {
		ip, err := parseIPv4(p.IP)
		if err != nil {
			return nodeState{}, fmt.Errorf("pods: %w", err)
		}
		if p.Ifindex <= 0 {
			return nodeState{}, fmt.Errorf("pod %s: ifindex %d is not a device", p.IP, p.Ifindex)
		}
		if _, ok := s.uplinks[uint32(p.Ifindex)]; ok {
			return nodeState{}, fmt.Errorf("pod %s: ifindex %d is an uplink", p.IP, p.Ifindex)
		}
		if _, ok := s.lbPods[ip]; ok {
			return nodeState{}, fmt.Errorf("pod %s given twice", p.IP)
		}
		s.lbPods[ip] = uint32(p.Ifindex)
	}
	return s, nil
}

// converge makes the kernel hold l.want, reading back the maps and querying the attachments, so a
// check repairs any drift (an entry changed, a program detached by someone). A pod whose veth cannot
// be attached (gone with its pod, say) is left out of lb_pods, so its packets take the kernel path,
// and told in the result; an uplink that cannot be attached fails the request. With drift non-nil,
// what had to be repaired is described there. It returns the number of changes.
func (l *nodeLoader) converge(drift *[]string) (changes int, skipped []string, err error) {
	note := func(s string) {
		if drift != nil {
			*drift = append(*drift, s)
		}
	}
	keep := map[attachment]bool{}
	// ensure attaches prog to a device unless it is there already.
	ensure := func(a attachment, prog *ebpf.Program) error {
		keep[a] = true
		lost := false
		if ln, ok := l.links[a]; ok {
			if on, err := ln.attached(); err == nil && on {
				return nil
			}
			lost = true
			_ = ln.Close()
			delete(l.links, a)
		}
		ln, err := attach(l.kind, prog, a.ifindex)
		if err != nil {
			return err // the caller reports it: the request fails, or the pod is skipped
		}
		if lost {
			note(fmt.Sprintf("%s not attached to ifindex %d's %s ingress: attached again", nameOf(prog), a.ifindex, l.kind))
		}
		l.links[a] = ln
		changes++
		return nil
	}
	// The order keeps every packet deliverable: from_lb_pod needs only uplinks, to_lb_pod needs the
	// pods' entries, and an entry is written only for a pod whose veth is there.
	if err := syncMap(l.prog.uplinks, "uplinks", l.want.uplinks, note, &changes); err != nil {
		return changes, nil, err
	}
	if err := syncMap(l.prog.vipPools, "vip_pools", l.want.vipPools, note, &changes); err != nil {
		return changes, nil, err
	}
	pods := map[ipv4]uint32{}
	for ip, ifindex := range l.want.lbPods {
		if err := ensure(attachment{ifindex: int(ifindex)}, l.prog.fromPod); err != nil {
			skipped = append(skipped, fmt.Sprintf("pod %v: %v", ip, err))
			continue
		}
		pods[ip] = ifindex
	}
	if err := syncMap(l.prog.lbPods, "lb_pods", pods, note, &changes); err != nil {
		return changes, skipped, err
	}
	for ifindex := range l.want.uplinks {
		if err := ensure(attachment{ifindex: int(ifindex), toPod: true}, l.prog.toPod); err != nil {
			return changes, skipped, err
		}
	}
	for a, ln := range l.links {
		if !keep[a] {
			_ = ln.Close() // fails harmlessly when the device went with its pod
			delete(l.links, a)
			changes++
		}
	}
	if l.kind == hookTC {
		// A tc filter outlives a loader that died; one on a device this loader is not asked for
		// would go on running its program on that loader's last maps.
		toPod := nameOf(l.prog.toPod)
		held := func(ifindex int, name string) bool {
			_, ok := l.links[attachment{ifindex: ifindex, toPod: name == toPod}]
			return ok
		}
		left, err := sweepTC([]string{toPod, nameOf(l.prog.fromPod)}, held)
		for _, f := range left {
			note(fmt.Sprintf("%s left on ifindex %d's tc ingress by an earlier loader: removed", f.name, f.ifindex))
			changes++
		}
		if err != nil {
			return changes, skipped, err
		}
	}
	return changes, skipped, nil
}

// syncMap makes a map hold want, counting the changes and noting them as drift.
func syncMap[K comparable, V comparable](m *ebpf.Map, name string, want map[K]V, note func(string), changes *int) error {
	have, err := readAll[K, V](m)
	if err != nil {
		return fmt.Errorf("reading %s: %w", name, err)
	}
	d := diffMap(want, have)
	for _, s := range d.describe(name) {
		note(s)
	}
	*changes += d.size()
	return inOrder(func() error { return d.puts(m, name) }, func() error { return d.deletes(m, name) })
}

func nameOf(p *ebpf.Program) string {
	if info, err := p.Info(); err == nil {
		return info.Name
	}
	return "program"
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
