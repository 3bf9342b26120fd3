package main

import (
	"strings"
	"testing"
)

func mustSync(t *testing.T, line string) syncRequest {
	t.Helper()
	r, err := parseRequest([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	s, err := parseSync(r)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestParseSyncRejects(t *testing.T) {
	for _, c := range []struct{ line, want string }{
		{`{"op":"sync","services":[{"vip":"10.1.1.10","port":80,"protocol":"sctp","table":[]}]}`, "neither tcp nor udp"},
		{`{"op":"sync","services":[{"vip":"::1","port":80,"protocol":"tcp","table":[]}]}`, "not an IPv4"},
		{`{"op":"sync","services":[{"vip":"10.1.1.10","port":0,"protocol":"tcp","table":[]}]}`, "out of range"},
		{`{"op":"sync","services":[{"vip":"10.1.1.10","port":80,"protocol":"tcp","table":["10.0.0.9"]}],"backends":["10.0.0.1"]}`, "not among the backends"},
		{`{"op":"sync","services":[{"vip":"10.1.1.10","port":80,"protocol":"tcp","table":[]},{"vip":"10.1.1.10","port":80,"protocol":"tcp","table":[]}]}`, "given twice"},
	} {
		r, err := parseRequest([]byte(c.line))
		if err == nil {
			_, err = parseSync(r)
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error with %q", c.line, err, c.want)
		}
	}
	if _, err := parseRequest([]byte(`{"op":`)); err == nil {
		t.Error("a broken line parsed")
	}
}

func TestSyncDiffs(t *testing.T) {
	first := mustSync(t, `{"op":"sync","services":[
		{"vip":"10.1.1.10","port":8080,"protocol":"tcp","table":["10.0.0.1","10.0.0.2","10.0.0.1"]},
		{"vip":"10.1.1.10","port":53,"protocol":"udp","table":[]}],
		"backends":["10.0.0.1","10.0.0.2"]}`)
	a, err := wantedState(first, emptyState())
	if err != nil {
		t.Fatal(err)
	}
	// The empty service is left out: 1 service, its table, 2 backends.
	if d := diffState(a, emptyState()); d.size() != 4 || !d.tables.grow[a.services[newServiceKey(ipv4{10, 1, 1, 10}, 8080, 6)].ID] {
		t.Fatalf("first sync: %d changes, want 4 with a new (growing) table", d.size())
	}
	key := newServiceKey(ipv4{10, 1, 1, 10}, 8080, 6)
	if got := key.String(); got != "tcp:10.1.1.10:8080" {
		t.Errorf("service key %q", got)
	}
	// One slot changes and a service is added: the first keeps its id, the new one takes the next;
	// both tables are written whole.
	second := mustSync(t, `{"op":"sync","services":[
		{"vip":"10.1.1.10","port":8080,"protocol":"tcp","table":["10.0.0.1","10.0.0.2","10.0.0.2"]},
		{"vip":"10.1.1.9","port":80,"protocol":"tcp","table":["10.0.0.2"]}],
		"backends":["10.0.0.1","10.0.0.2"]}`)
	b, err := wantedState(second, a)
	if err != nil {
		t.Fatal(err)
	}
	if b.services[key].ID != a.services[key].ID {
		t.Errorf("id changed: %d -> %d", a.services[key].ID, b.services[key].ID)
	}
	if d := diffState(b, a); d.size() != 3 || len(d.tables.put) != 2 || len(d.services.put) != 1 {
		t.Errorf("second sync: %d changes (%v), want the changed table, the new table and the new service", d.size(), d.describe())
	}
	// A table that shrinks is written after its service's size; one that grows, before.
	third := mustSync(t, `{"op":"sync","services":[
		{"vip":"10.1.1.10","port":8080,"protocol":"tcp","table":["10.0.0.1"]},
		{"vip":"10.1.1.9","port":80,"protocol":"tcp","table":["10.0.0.2","10.0.0.1"]}],
		"backends":["10.0.0.1","10.0.0.2"]}`)
	c, err := wantedState(third, b)
	if err != nil {
		t.Fatal(err)
	}
	d := diffState(c, b)
	if d.tables.grow[c.services[key].ID] || !d.tables.grow[c.services[newServiceKey(ipv4{10, 1, 1, 9}, 80, 6)].ID] {
		t.Errorf("third sync: grow %v, want only the second service's table growing", d.tables.grow)
	}
	// Everything removed: every entry deleted, and described as not wanted.
	d = diffState(emptyState(), b)
	if d.size() != 6 || len(d.describe()) != 3 {
		t.Errorf("removal: %d changes, %v", d.size(), d.describe())
	}
}
