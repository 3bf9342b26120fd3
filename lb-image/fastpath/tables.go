package main

// The services' Maglev tables (dsr_lb.c's tables): each an array of its own size, made and filled
// here, then swapped into the map of tables at its service's id in one update.

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
)

// putTable makes service id's table t and swaps it in; the one it replaces goes once no packet
// holds it.
func (p *program) putTable(id uint32, t table) error {
	if len(t) == 0 || len(t) > maxSlots {
		return fmt.Errorf("service %d: a table of %d slots (1 to %d)", id, len(t), maxSlots)
	}
	spec := p.tableSpec.Copy()
	spec.Name = fmt.Sprintf("maglev_%d", id)
	spec.MaxEntries = uint32(len(t))
	m, err := ebpf.NewMap(spec)
	if err != nil {
		return fmt.Errorf("making service %d's table: %w", id, err)
	}
	slots := make([]uint32, len(t))
	for i := range slots {
		slots[i] = uint32(i)
	}
	if _, err := m.BatchUpdate(slots, []ipv4(t), nil); err != nil {
		_ = m.Close()
		return fmt.Errorf("filling service %d's table: %w", id, err)
	}
	if err := p.tables.Put(id, m); err != nil {
		_ = m.Close()
		return fmt.Errorf("tables[%d]: %w", id, err)
	}
	if old := p.table[id]; old != nil {
		_ = old.Close()
	}
	p.table[id] = m
	return nil
}

// deleteTable takes service id's table out (already gone is fine).
func (p *program) deleteTable(id uint32) error {
	if err := p.tables.Delete(id); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("deleting tables[%d]: %w", id, err)
	}
	if old := p.table[id]; old != nil {
		_ = old.Close()
	}
	delete(p.table, id)
	return nil
}

// readTables reads back the tables the loader made: one that is no longer in the map of tables at
// its id (taken out, or replaced by another map) reads as missing. Entries the loader never made
// are not looked for: only a service's id leads a packet to a table, and the services are read back
// whole.
func (p *program) readTables() (map[uint32]table, error) {
	out := map[uint32]table{}
	for id, m := range p.table {
		var inner uint32 // a map's id, as the kernel gives an inner map to user space
		if err := p.tables.Lookup(id, &inner); errors.Is(err, ebpf.ErrKeyNotExist) {
			continue
		} else if err != nil {
			return nil, fmt.Errorf("reading tables[%d]: %w", id, err)
		}
		info, err := m.Info()
		if err != nil {
			return nil, fmt.Errorf("service %d's table: %w", id, err)
		}
		if mine, ok := info.ID(); !ok || uint32(mine) != inner {
			continue
		}
		t, err := readTable(m)
		if err != nil {
			return nil, fmt.Errorf("reading service %d's table: %w", id, err)
		}
		out[id] = t
	}
	return out, nil
}

// readTable reads an array of backends whole, in batches.
func readTable(m *ebpf.Map) (table, error) {
	n := int(m.MaxEntries())
	slots := make([]uint32, n)
	t := make(table, n)
	var cursor ebpf.MapBatchCursor
	for read := 0; read < n; {
		got, err := m.BatchLookup(&cursor, slots[read:], []ipv4(t[read:]), nil)
		read += got
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	return t, nil
}
