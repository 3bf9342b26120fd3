package main

// The maps' wanted contents, built from a sync request, and the difference between two contents:
// sync applies the difference from the last sync, check the difference from what the kernel holds.

import (
	"bytes"
	"errors"
	"fmt"
	"slices"

	"github.com/cilium/ebpf"
)

// state is what the maps hold (config aside, which the device dictates).
type state struct {
	services map[serviceKey]service
	tables   map[uint32]table // by service id
	backends map[ipv4]uint8
}

// table is a Maglev table: slot i's backend at i.
type table []ipv4

func emptyState() state {
	return state{services: map[serviceKey]service{}, tables: map[uint32]table{}, backends: map[ipv4]uint8{}}
}

// wantedState lays out a sync request. A service keeps its id across syncs (its table is then
// replaced only if it changed); a new one takes the lowest free id.
func wantedState(req syncRequest, prev state) (state, error) {
	s := emptyState()
	for _, b := range req.backends {
		s.backends[b] = 1
	}
	used := map[uint32]bool{}
	for k, svc := range prev.services {
		if _, ok := req.services[k]; ok {
			used[svc.ID] = true
		}
	}
	next := uint32(0)
	keys := make([]serviceKey, 0, len(req.services))
	for k := range req.services {
		keys = append(keys, k)
	}
	// Ids in a stable order, so that a restarted loader given the same request lays out the same maps.
	slices.SortFunc(keys, compareKeys)
	for _, k := range keys {
		table := req.services[k]
		old, ok := prev.services[k]
		id := old.ID
		if !ok {
			for used[next] {
				next++
			}
			if next >= maxServices {
				return state{}, fmt.Errorf("more than %d services", maxServices)
			}
			id = next
			used[id] = true
		}
		s.services[k] = service{ID: id, Size: uint32(len(table))}
		s.tables[id] = table
	}
	return s, nil
}

func compareKeys(a, b serviceKey) int {
	bytesOf := func(k serviceKey) []byte {
		return []byte{k.VIP[0], k.VIP[1], k.VIP[2], k.VIP[3], k.Port[0], k.Port[1], k.Proto}
	}
	return bytes.Compare(bytesOf(a), bytesOf(b))
}

// mapDiff is what turns one map's contents into another's.
type mapDiff[K comparable, V any] struct {
	put map[K]V // missing or different
	del []K     // not wanted
}

func diffMap[K comparable, V comparable](want, have map[K]V) mapDiff[K, V] {
	return diffMapBy(want, have, func(a, b V) bool { return a == b })
}

// diffMapBy is diffMap for values that == cannot compare.
func diffMapBy[K comparable, V any](want, have map[K]V, equal func(a, b V) bool) mapDiff[K, V] {
	d := mapDiff[K, V]{put: map[K]V{}}
	for k, v := range want {
		if h, ok := have[k]; !ok || !equal(h, v) {
			d.put[k] = v
		}
	}
	for k := range have {
		if _, ok := want[k]; !ok {
			d.del = append(d.del, k)
		}
	}
	return d
}

// puts writes what is missing or different into m (named in errors).
func (d mapDiff[K, V]) puts(m *ebpf.Map, name string) error {
	for k, v := range d.put {
		if err := m.Put(k, v); err != nil {
			return fmt.Errorf("%s[%v]: %w", name, k, err)
		}
	}
	return nil
}

// deletes removes from m what is not wanted (already gone is fine).
func (d mapDiff[K, V]) deletes(m *ebpf.Map, name string) error {
	for _, k := range d.del {
		if err := m.Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("deleting %s[%v]: %w", name, k, err)
		}
	}
	return nil
}

func (d mapDiff[K, V]) size() int { return len(d.put) + len(d.del) }

// describe tells a difference for an operator: counts, and an example key of each kind.
func (d mapDiff[K, V]) describe(name string) []string {
	var out []string
	for k := range d.put {
		out = append(out, fmt.Sprintf("%s: %d entries missing or different (e.g. %v)", name, len(d.put), k))
		break
	}
	if len(d.del) > 0 {
		out = append(out, fmt.Sprintf("%s: %d entries not wanted (e.g. %v)", name, len(d.del), d.del[0]))
	}
	return out
}

// tableDiff is what turns one set of Maglev tables into another: tables are replaced whole.
type tableDiff struct {
	mapDiff[uint32, table]
	grow map[uint32]bool // of put: no shorter than before (or new), so written before the service
}

func diffTables(want, have map[uint32]table) tableDiff {
	d := tableDiff{mapDiff: diffMapBy(want, have, slices.Equal[table]), grow: map[uint32]bool{}}
	for id, t := range d.put {
		d.grow[id] = len(t) >= len(have[id])
	}
	return d
}

// puts swaps in a new table for each service whose table grows (grow) or shrinks (!grow).
func (d tableDiff) puts(p *program, grow bool) error {
	for id, t := range d.put {
		if d.grow[id] == grow {
			if err := p.putTable(id, t); err != nil {
				return err
			}
		}
	}
	return nil
}

func (d tableDiff) deletes(p *program) error {
	for _, id := range d.del {
		if err := p.deleteTable(id); err != nil {
			return err
		}
	}
	return nil
}

// stateDiff is the difference of every map.
type stateDiff struct {
	services mapDiff[serviceKey, service]
	tables   tableDiff
	backends mapDiff[ipv4, uint8]
}

func diffState(want, have state) stateDiff {
	return stateDiff{
		services: diffMap(want.services, have.services),
		tables:   diffTables(want.tables, have.tables),
		backends: diffMap(want.backends, have.backends),
	}
}

func (d stateDiff) size() int { return d.services.size() + d.tables.size() + d.backends.size() }

func (d stateDiff) describe() []string {
	return slices.Concat(d.services.describe("services"), d.tables.describe("tables"), d.backends.describe("backends"))
}

// apply writes a difference. The order keeps every service usable meanwhile: backends are in place
// before a table names them, a table that grows is swapped in before its service's size reaches
// past the old one, and one that shrinks after its service's size has. Each table changes at once.
func (d stateDiff) apply(p *program) error {
	return inOrder(
		func() error { return d.backends.puts(p.backends, "backends") },
		func() error { return d.tables.puts(p, true) },
		func() error { return d.services.puts(p.services, "services") },
		func() error { return d.tables.puts(p, false) },
		func() error { return d.services.deletes(p.services, "services") },
		func() error { return d.tables.deletes(p) },
		func() error { return d.backends.deletes(p.backends, "backends") },
	)
}

// inOrder runs steps until one fails.
func inOrder(steps ...func() error) error {
	for _, step := range steps {
		if err := step(); err != nil {
			return err
		}
	}
	return nil
}

// readState reads what the kernel's maps hold.
func readState(p *program) (state, error) {
	services, err := readAll[serviceKey, service](p.services)
	if err != nil {
		return state{}, fmt.Errorf("reading services: %w", err)
	}
	tables, err := p.readTables()
	if err != nil {
		return state{}, err
	}
	backends, err := readAll[ipv4, uint8](p.backends)
	if err != nil {
		return state{}, fmt.Errorf("reading backends: %w", err)
	}
	return state{services: services, tables: tables, backends: backends}, nil
}
