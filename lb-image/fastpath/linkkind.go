package main

// The kind of a network device (veth, vxlan, ...), from rtnetlink's IFLA_LINKINFO: the fast path
// may hand packets to a device's peer only where the device has one.

import (
	"encoding/binary"
	"fmt"
	"strings"
	"syscall"
)

const (
	iflaLinkinfo = 18 // IFLA_LINKINFO
	iflaInfoKind = 1  // IFLA_INFO_KIND, nested in IFLA_LINKINFO
)

func linkKind(ifindex int) (string, error) {
	rib, err := syscall.NetlinkRIB(syscall.RTM_GETLINK, syscall.AF_UNSPEC)
	if err != nil {
		return "", fmt.Errorf("listing links: %w", err)
	}
	msgs, err := syscall.ParseNetlinkMessage(rib)
	if err != nil {
		return "", fmt.Errorf("parsing links: %w", err)
	}
	for _, m := range msgs {
		if m.Header.Type != syscall.RTM_NEWLINK || len(m.Data) < syscall.SizeofIfInfomsg {
			continue
		}
		// struct ifinfomsg: family, pad, type (u16), index (s32), ...
		if int(int32(binary.NativeEndian.Uint32(m.Data[4:8]))) != ifindex {
			continue
		}
		attrs, err := syscall.ParseNetlinkRouteAttr(&m)
		if err != nil {
			return "", fmt.Errorf("parsing link %d: %w", ifindex, err)
		}
		for _, a := range attrs {
			if a.Attr.Type&0x3fff == iflaLinkinfo {
				return nestedString(a.Value, iflaInfoKind), nil
			}
		}
		return "", nil // no linkinfo: a physical device
	}
	return "", fmt.Errorf("no link with ifindex %d", ifindex)
}

// nestedString finds a string attribute in a nested attribute block.
func nestedString(b []byte, typ uint16) string {
	for len(b) >= 4 {
		l := int(binary.NativeEndian.Uint16(b[0:2]))
		t := binary.NativeEndian.Uint16(b[2:4])
		if l < 4 || l > len(b) {
			return ""
		}
		if t&0x3fff == typ {
			return strings.TrimRight(string(b[4:l]), "\x00")
		}
		next := (l + 3) &^ 3 // attributes are 4-byte aligned
		if next >= len(b) {
			return ""
		}
		b = b[next:]
	}
	return ""
}
