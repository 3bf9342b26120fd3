// portable-lb-fastpath loads the LB pod's DSR fast path (README.md) onto a device's ingress and
// keeps its maps as the controller asks, over line-based JSON on stdin and stdout, until stdin
// closes. Run in the pod's network namespace with CAP_NET_ADMIN and CAP_BPF.
// `portable-lb-fastpath node` does the same for the LB node's share (node.go), for the node agent.
package main

import (
	"bufio"
	_ "embed"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/cilium/ebpf"
)

// build.sh compiles bpf/dsr_lb.c here, in the copy of the module it builds.
//
//go:embed dsr_lb.o
var object []byte

// A sync of 16,384 services with 251-slot tables is ~60 MB of JSON.
const maxLine = 256 << 20

type loader struct {
	device string
	prog   *program
	kind   hookKind
	hook   hook
	// The last sync, what check holds the maps to.
	want state
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "node" {
		runNode(os.Args[2:])
		return
	}
	device := flag.String("device", "eth0", "the uplink device whose ingress carries the VIPs' traffic")
	hookName := hookFlag(flag.CommandLine)
	flag.Parse()
	out := json.NewEncoder(os.Stdout)
	kind, err := parseHookKind(*hookName)
	var l *loader
	if err == nil {
		l, err = start(*device, kind)
	}
	if err != nil {
		_ = out.Encode(event{Event: "error", Error: err.Error()})
		os.Exit(1)
	}
	_ = out.Encode(event{Event: "ready", Program: programID(l.prog.prog), Hook: string(l.kind)})
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 64<<10), maxLine)
	for in.Scan() {
		if err := out.Encode(l.handle(in.Bytes())); err != nil {
			os.Exit(1) // the controller is gone
		}
	}
	// EOF (or an unreadable line): detach; the kernel path carries everything again.
	_ = l.hook.Close()
	if err := in.Err(); err != nil {
		_ = out.Encode(event{Event: "error", Error: fmt.Sprintf("reading stdin: %v", err)})
		os.Exit(1)
	}
}

func start(device string, kind hookKind) (*loader, error) {
	cfg, err := deviceConfig(device)
	if err != nil {
		return nil, err
	}
	p, _, err := loadProgram(object)
	if err != nil {
		return nil, err
	}
	if err := p.config.Put(uint32(0), cfg); err != nil {
		return nil, fmt.Errorf("writing config: %w", err)
	}
	l := &loader{device: device, prog: p, kind: resolveHook(kind, p.prog), want: emptyState()}
	if l.hook, err = attach(l.kind, p.prog, int(cfg.Ifindex)); err != nil {
		return nil, err
	}
	return l, nil
}

func (l *loader) handle(line []byte) response {
	req, err := parseRequest(line)
	if err != nil {
		return failed(err)
	}
	switch req.Op {
	case "sync":
		return l.sync(req)
	case "check":
		return l.check()
	case "stats":
		return l.stats()
	}
	return failed(fmt.Errorf("unknown op %q", req.Op))
}

func (l *loader) sync(req request) response {
	parsed, err := parseSync(req)
	if err != nil {
		return failed(err)
	}
	want, err := wantedState(parsed, l.want)
	if err != nil {
		return failed(err)
	}
	// A new service's flow counter starts at zero (its id may have served a removed one).
	for k, svc := range want.services {
		if _, ok := l.want.services[k]; !ok {
			if err := l.prog.serviceFlows.Put(svc.ID, uint64(0)); err != nil {
				return failed(fmt.Errorf("service_flows[%d]: %w", svc.ID, err))
			}
		}
	}
	d := diffState(want, l.want)
	// Held to even if writing fails halfway: check then finds and repairs the rest.
	l.want = want
	if err := d.apply(l.prog); err != nil {
		return failed(err)
	}
	return response{"ok": true, "changes": d.size()}
}

// check reads back the config, the maps and the attachment, and repairs what differs.
func (l *loader) check() response {
	drift := []string{}
	cfg, err := deviceConfig(l.device)
	if err != nil {
		return failed(err)
	}
	var have config
	if err := l.prog.config.Lookup(uint32(0), &have); err != nil {
		return failed(fmt.Errorf("reading config: %w", err))
	}
	if have != cfg {
		drift = append(drift, fmt.Sprintf("config: %+v, device has %+v", have, cfg))
		if err := l.prog.config.Put(uint32(0), cfg); err != nil {
			return failed(fmt.Errorf("writing config: %w", err))
		}
	}
	kernel, err := readState(l.prog)
	if err != nil {
		return failed(err)
	}
	d := diffState(l.want, kernel)
	drift = append(drift, d.describe()...)
	if err := d.apply(l.prog); err != nil {
		return failed(err)
	}
	ok, err := l.hook.attached()
	if err != nil {
		return failed(err)
	}
	if !ok {
		drift = append(drift, fmt.Sprintf("program not attached to %s %s ingress: attached again", l.device, l.kind))
		_ = l.hook.Close()
		if l.hook, err = attach(l.kind, l.prog.prog, int(cfg.Ifindex)); err != nil {
			return failed(err)
		}
	}
	return response{"ok": true, "drift": drift}
}

func (l *loader) stats() response {
	counters, err := l.prog.counters()
	if err != nil {
		return failed(err)
	}
	passed := map[string]uint64{}
	for name, n := range counters {
		if name != "forwarded" {
			passed[name] = n
		}
	}
	flows := map[string]uint64{}
	for k, svc := range l.want.services {
		var n uint64
		if err := l.prog.serviceFlows.Lookup(svc.ID, &n); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return failed(fmt.Errorf("service_flows[%d]: %w", svc.ID, err))
		}
		flows[k.String()] = n
	}
	return response{"ok": true, "forwarded": counters["forwarded"], "passed": passed, "flows": flows}
}
