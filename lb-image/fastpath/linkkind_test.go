package main

import (
	"net"
	"testing"
)

func TestLinkKind(t *testing.T) {
	lo, err := net.InterfaceByName("lo")
	if err != nil {
		t.Fatal(err)
	}
	if kind, err := linkKind(lo.Index); err != nil || kind != "" {
		t.Errorf("lo: kind %q, error %v; want no kind (it has no linkinfo)", kind, err)
	}
	if _, err := linkKind(1 << 30); err == nil {
		t.Error("a missing ifindex gave no error")
	}
	if got := nestedString([]byte{9, 0, 1, 0, 'v', 'e', 't', 'h', 0, 0, 0, 0}, iflaInfoKind); got != "veth" {
		t.Errorf("IFLA_INFO_KIND parsed as %q", got)
	}
}
