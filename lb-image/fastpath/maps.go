package main

// The maps of bpf/dsr_lb.c as Go sees them: keys and values laid out as the C structs (addresses and
// ports in network order, as the packet carries them), and the device's config.

import (
	"bytes"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"
)

// As MAX_SERVICES and the Maglev table's largest size (maglev.ts) in dsr_lb.c.
const (
	maxServices = 16384
	maxSlots    = 65521
)

// Why packets were left to the kernel path, in dsr_lb.c's enum stat order (index 0 is forwarded).
var statNames = []string{
	"forwarded", "not_service", "ip_options", "fragment", "gso", "unknown_flow",
	"no_slot", "ttl", "too_big", "no_route", "no_room", "no_config",
}

var protocolNumbers = map[string]uint8{"tcp": 6, "udp": 17}

type ipv4 [4]byte

func (a ipv4) String() string { return netip.AddrFrom4(a).String() }

type serviceKey struct {
	VIP   ipv4
	Port  [2]byte // network order
	Proto uint8
	_     uint8
}

func newServiceKey(vip ipv4, port uint16, proto uint8) serviceKey {
	return serviceKey{VIP: vip, Port: [2]byte{byte(port >> 8), byte(port)}, Proto: proto}
}

// String is the TS serviceKey: `${protocol}:${vip}:${port}`.
func (k serviceKey) String() string {
	proto := fmt.Sprint(k.Proto)
	for name, n := range protocolNumbers {
		if n == k.Proto {
			proto = name
		}
	}
	return fmt.Sprintf("%s:%s:%d", proto, k.VIP, uint16(k.Port[0])<<8|uint16(k.Port[1]))
}

type service struct {
	ID   uint32
	Size uint32
}

type config struct {
	Ifindex uint32
	Addr    ipv4
	MTU     uint32
	PortMin uint32
	PortMax uint32
	Veth    uint32 // 1: the device is a veth, whose peer the program may hand packets to
}

// deviceConfig reads what the program needs of the device: its first IPv4 address (the outer
// source), its MTU, whether it is a veth, and the namespace's local port range (the VXLAN device's
// source ports).
func deviceConfig(name string) (config, error) {
	dev, err := net.InterfaceByName(name)
	if err != nil {
		return config{}, fmt.Errorf("device %s: %w", name, err)
	}
	addrs, err := dev.Addrs()
	if err != nil {
		return config{}, fmt.Errorf("addresses of %s: %w", name, err)
	}
	c := config{Ifindex: uint32(dev.Index), MTU: uint32(dev.MTU)}
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil && p.Addr().Is4() {
			c.Addr = p.Addr().As4()
			break
		}
	}
	if c.Addr == (ipv4{}) {
		return config{}, fmt.Errorf("%s has no IPv4 address", name)
	}
	// The fast path may hand packets to a device's peer only where the device has one.
	link, err := netlink.LinkByIndex(dev.Index)
	if err != nil {
		return config{}, fmt.Errorf("%s: %w", name, err)
	}
	if link.Type() == "veth" {
		c.Veth = 1
	}
	text, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return config{}, err
	}
	if _, err := fmt.Sscan(strings.TrimSpace(string(text)), &c.PortMin, &c.PortMax); err != nil {
		return config{}, fmt.Errorf("ip_local_port_range %q: %w", text, err)
	}
	return c, nil
}

// program is the loaded collection: the program and its maps by name. Every map is held, the flow
// table too though the loader never reads it: an unreferenced map's descriptor would be closed by
// the garbage collector, and with it the way to find the table from outside (the loader's fds).
type program struct {
	prog         *ebpf.Program
	flows        *ebpf.Map
	config       *ebpf.Map
	services     *ebpf.Map
	tables       *ebpf.Map
	backends     *ebpf.Map
	stats        *ebpf.Map
	serviceFlows *ebpf.Map
	// Each service's Maglev table in tables, by id: the loader's own descriptors, through which it
	// reads them back (a table found by its id alone would need CAP_SYS_ADMIN).
	table     map[uint32]*ebpf.Map
	tableSpec *ebpf.MapSpec
}

// loadCollection loads an embedded object (named in errors) into the kernel, and gives its spec.
func loadCollection(object []byte, name string) (*ebpf.CollectionSpec, *ebpf.Collection, error) {
	spec, err := ebpf.LoadCollectionSpecFromReader(bytes.NewReader(object))
	if err != nil {
		return nil, nil, fmt.Errorf("reading %s: %w", name, err)
	}
	coll, err := ebpf.NewCollection(spec)
	if err != nil {
		return nil, nil, fmt.Errorf("loading %s: %w", name, err)
	}
	return spec, coll, nil
}

func loadProgram(object []byte) (*program, *ebpf.Collection, error) {
	spec, coll, err := loadCollection(object, "dsr_lb.o")
	if err != nil {
		return nil, nil, err
	}
	tables := spec.Maps["tables"]
	if tables == nil || tables.InnerMap == nil {
		return nil, nil, fmt.Errorf("dsr_lb.o: no map of Maglev tables")
	}
	p := &program{
		prog:         coll.Programs["dsr_lb"],
		flows:        coll.Maps["flows"],
		config:       coll.Maps["config"],
		services:     coll.Maps["services"],
		tables:       coll.Maps["tables"],
		backends:     coll.Maps["backends"],
		stats:        coll.Maps["stats"],
		serviceFlows: coll.Maps["service_flows"],
		table:        map[uint32]*ebpf.Map{},
		tableSpec:    tables.InnerMap,
	}
	return p, coll, nil
}

// readAll reads a hash map whole.
func readAll[K comparable, V any](m *ebpf.Map) (map[K]V, error) {
	out := map[K]V{}
	var k K
	var v V
	it := m.Iterate()
	for it.Next(&k, &v) {
		out[k] = v
	}
	return out, it.Err()
}

// counters sums the per-CPU stats by name.
func (p *program) counters() (map[string]uint64, error) {
	return perCPUCounters(p.stats, statNames)
}

// perCPUCounters sums a per-CPU array of counters, index i named names[i].
func perCPUCounters(m *ebpf.Map, names []string) (map[string]uint64, error) {
	out := map[string]uint64{}
	for i, name := range names {
		var perCPU []uint64
		if err := m.Lookup(uint32(i), &perCPU); err != nil {
			return nil, fmt.Errorf("stats[%s]: %w", name, err)
		}
		for _, n := range perCPU {
			out[name] += n
		}
	}
	return out, nil
}
