package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"
)

func nodeSync(t *testing.T, line string) (nodeState, error) {
	t.Helper()
	var r nodeRequest
	if err := json.Unmarshal([]byte(line), &r); err != nil {
		t.Fatal(err)
	}
	// Uplinks by name, as the node would resolve them: eth0 is 2, anything else missing.
	return parseNodeSync(r, func(name string) (int, error) {
		if name == "eth0" {
			return 2, nil
		}
		return 0, fmt.Errorf("uplink %s: no such network interface", name)
	})
}

func TestParseNodeSync(t *testing.T) {
	s, err := nodeSync(t, `{"op":"sync","uplinks":["eth0"],"pools":["10.1.1.0/24","10.1.2.7/30"],"pods":[{"ip":"10.244.0.2","ifindex":4},{"ip":"10.244.0.3","ifindex":7}]}`)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.uplinks) != 1 || s.uplinks[2] != 1 {
		t.Errorf("uplinks %v, want ifindex 2", s.uplinks)
	}
	// Prefixes as the trie keys them: masked, network order.
	if len(s.vipPools) != 2 || s.vipPools[poolKey{24, ipv4{10, 1, 1, 0}}] != 1 || s.vipPools[poolKey{30, ipv4{10, 1, 2, 4}}] != 1 {
		t.Errorf("vip_pools %v", s.vipPools)
	}
	if s.lbPods[ipv4{10, 244, 0, 2}] != 4 || s.lbPods[ipv4{10, 244, 0, 3}] != 7 || len(s.lbPods) != 2 {
		t.Errorf("lb_pods %v", s.lbPods)
	}
}

func TestParseNodeSyncRejects(t *testing.T) {
	for _, c := range []struct{ line, want string }{
		{`{"op":"sync","uplinks":["bond9"]}`, "uplink bond9"},
		{`{"op":"sync","uplinks":["eth0"],"pools":["10.1.1.0/33"]}`, "not an IPv4 prefix"},
		{`{"op":"sync","uplinks":["eth0"],"pools":["fd00::/64"]}`, "not an IPv4 prefix"},
		{`{"op":"sync","uplinks":["eth0"],"pods":[{"ip":"fd00::2","ifindex":4}]}`, "not an IPv4"},
		{`{"op":"sync","uplinks":["eth0"],"pods":[{"ip":"10.244.0.2","ifindex":0}]}`, "not a device"},
		{`{"op":"sync","uplinks":["eth0"],"pods":[{"ip":"10.244.0.2","ifindex":2}]}`, "is an uplink"},
		{`{"op":"sync","uplinks":["eth0"],"pods":[{"ip":"10.244.0.2","ifindex":4},{"ip":"10.244.0.2","ifindex":5}]}`, "given twice"},
	} {
		if _, err := nodeSync(t, c.line); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error with %q", c.line, err, c.want)
		}
	}
}

// A node loader that died leaves its tc filters behind; its successor removes those on devices it
// is not asked for, and leaves other programs' filters alone.
func TestNodeLoaderRemovesADeadLoadersFilters(t *testing.T) {
	inNewNetns(t, func(uplink int) {
		peer, err := netlink.LinkByName("d1")
		if err != nil {
			t.Fatal(err)
		}
		veth := peer.Attrs().Index
		dead, err := loadNodeProgram()
		if err != nil {
			t.Fatalf("loading dsr_node.o (needs CAP_BPF): %v", err)
		}
		// The dead loader had both devices; it never closed its hooks.
		if _, err := attachTC(dead.toPod, uplink); err != nil {
			t.Fatal(err)
		}
		if _, err := attachTC(dead.fromPod, veth); err != nil {
			t.Fatal(err)
		}
		prog, err := loadNodeProgram()
		if err != nil {
			t.Fatal(err)
		}
		l := &nodeLoader{prog: prog, kind: hookTC, links: map[attachment]hook{}, want: emptyNodeState()}
		l.want.uplinks[uint32(uplink)] = 1
		drift := []string{}
		if _, _, err := l.converge(&drift); err != nil {
			t.Fatal(err)
		}
		if got := ingress(t, veth); len(got) != 0 {
			t.Errorf("the veth's ingress after the successor's first sync: %v; want the dead loader's filter gone", got)
		}
		want := fmt.Sprintf("from_lb_pod left on ifindex %d's tc ingress by an earlier loader: removed", veth)
		if !slices.Contains(drift, want) {
			t.Errorf("drift %q; want %q", drift, want)
		}
		if on, err := l.links[attachment{ifindex: uplink, toPod: true}].attached(); err != nil || !on {
			t.Errorf("the uplink's to_lb_pod: attached %v (%v); want the successor's", on, err)
		}
		// Another program's filter at our pref is not ours to sweep.
		if _, err := attachTC(passProgram(t, "dsr_lb"), veth); err != nil {
			t.Fatal(err)
		}
		drift = []string{}
		if _, _, err := l.converge(&drift); err != nil || len(drift) != 0 {
			t.Errorf("a second check: drift %q, error %v; want none", drift, err)
		}
		if got := ingress(t, veth); len(got) != 1 || got[0] != "65000 dsr_lb" {
			t.Errorf("the veth's ingress: %v; want the other program's filter kept", got)
		}
		for _, ln := range l.links {
			_ = ln.Close()
		}
	})
}
