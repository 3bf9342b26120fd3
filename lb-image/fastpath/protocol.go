package main

// The controller's requests, one JSON object per line on stdin, and their answers on stdout.

import (
	"encoding/json"
	"fmt"
	"net/netip"
)

type request struct {
	Op       string        `json:"op"`
	Services []serviceSpec `json:"services"`
	Backends []string      `json:"backends"`
}

type serviceSpec struct {
	VIP      string   `json:"vip"`
	Port     int      `json:"port"`
	Protocol string   `json:"protocol"`
	Table    []string `json:"table"`
}

// syncRequest is a validated sync: each service's Maglev table, and every backend with a tunnel.
type syncRequest struct {
	services map[serviceKey][]ipv4
	backends []ipv4
}

func parseIPv4(s string) (ipv4, error) {
	a, err := netip.ParseAddr(s)
	if err != nil || !a.Is4() {
		return ipv4{}, fmt.Errorf("not an IPv4 address: %q", s)
	}
	return a.As4(), nil
}

// parseSync validates a sync. A service with an empty table is left out: the kernel path drops
// its packets. Every table entry must be one of the backends (the kernel path has a tunnel to it).
func parseSync(r request) (syncRequest, error) {
	out := syncRequest{services: map[serviceKey][]ipv4{}}
	known := map[ipv4]bool{}
	seen := map[serviceKey]bool{}
	for _, b := range r.Backends {
		ip, err := parseIPv4(b)
		if err != nil {
			return syncRequest{}, fmt.Errorf("backends: %w", err)
		}
		if !known[ip] {
			known[ip] = true
			out.backends = append(out.backends, ip)
		}
	}
	for _, s := range r.Services {
		vip, err := parseIPv4(s.VIP)
		if err != nil {
			return syncRequest{}, fmt.Errorf("service vip: %w", err)
		}
		proto, ok := protocolNumbers[s.Protocol]
		if !ok {
			return syncRequest{}, fmt.Errorf("service %s: protocol %q is neither tcp nor udp", s.VIP, s.Protocol)
		}
		if s.Port < 1 || s.Port > 65535 {
			return syncRequest{}, fmt.Errorf("service %s: port %d out of range", s.VIP, s.Port)
		}
		key := newServiceKey(vip, uint16(s.Port), proto)
		if seen[key] {
			return syncRequest{}, fmt.Errorf("service %v given twice", key)
		}
		seen[key] = true
		if len(s.Table) > maxSlots {
			return syncRequest{}, fmt.Errorf("service %v: table of %d slots (at most %d)", key, len(s.Table), maxSlots)
		}
		if len(s.Table) == 0 {
			continue
		}
		table := make([]ipv4, len(s.Table))
		for i, b := range s.Table {
			if table[i], err = parseIPv4(b); err != nil {
				return syncRequest{}, fmt.Errorf("service %v slot %d: %w", key, i, err)
			}
			if !known[table[i]] {
				return syncRequest{}, fmt.Errorf("service %v slot %d: %s is not among the backends", key, i, b)
			}
		}
		out.services[key] = table
	}
	if len(out.services) > maxServices {
		return syncRequest{}, fmt.Errorf("%d services (at most %d)", len(out.services), maxServices)
	}
	return out, nil
}

// response is one answer line: {"ok":true,...} with the op's fields, or {"ok":false,"error":...}.
type response map[string]any

func failed(err error) response { return response{"ok": false, "error": err.Error()} }

type event struct {
	Event   string `json:"event"`
	Program uint32 `json:"program,omitempty"`
	// The hook its programs are attached with: tcx or tc (attach.go).
	Hook  string `json:"hook,omitempty"`
	Error string `json:"error,omitempty"`
}

func parseRequest(line []byte) (request, error) {
	var r request
	if err := json.Unmarshal(line, &r); err != nil {
		return request{}, fmt.Errorf("not a JSON request: %w", err)
	}
	return r, nil
}
