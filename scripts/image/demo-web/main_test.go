package main

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// serve runs the server on a loopback port until the test ends (or calls the returned stop: a
// SIGTERM), and returns its address.
func serve(t *testing.T, podIP string) (string, context.CancelFunc) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, addr, podIP) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("run: %v", err)
			}
		case <-time.After(drainTimeout + 5*time.Second):
			t.Errorf("the server did not stop")
		}
	})
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			return addr, cancel
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server never listened on %s: %v", addr, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// connect opens a connection to a new server that must be done within 10 s (closed at the end).
func connect(t *testing.T) net.Conn {
	t.Helper()
	addr, _ := serve(t, "10.244.1.7")
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	return c
}

func TestAnswersWithThePodIPAndCloses(t *testing.T) {
	c := connect(t)
	// An HTTP/1.1 request, which would keep the connection by default.
	if _, err := io.WriteString(c, "GET /any/path HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || string(body) != "10.244.1.7\n" {
		t.Fatalf("answer %d %q, want 200 %q", resp.StatusCode, body, "10.244.1.7\n")
	}
	if !resp.Close {
		t.Fatalf("the answer keeps the connection (Connection: %q)", resp.Header.Get("Connection"))
	}
	// The server closes its end: the next read sees EOF, not a wait.
	if n, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("after the answer: read %d bytes, %v; want EOF", n, err)
	}
}

// A header sent a line at a time (the kept-connection bench's requests) is answered.
func TestASlowHeaderIsAnswered(t *testing.T) {
	c := connect(t)
	for _, line := range []string{"GET / HTTP/1.0\r\n", "X-Trickle: 1\r\n", "X-Trickle: 2\r\n", "\r\n"} {
		if _, err := io.WriteString(c, line); err != nil {
			t.Fatal(err)
		}
		time.Sleep(300 * time.Millisecond)
	}
	answer, _ := io.ReadAll(c)
	if !strings.HasPrefix(string(answer), "HTTP/1.0 200") || !strings.HasSuffix(string(answer), "\r\n\r\n10.244.1.7\n") {
		t.Fatalf("answer %q", answer)
	}
}

// At SIGTERM it stops accepting and returns.
func TestStopsAtSIGTERM(t *testing.T) {
	addr, stop := serve(t, "10.244.1.7")
	stop()
	deadline := time.Now().Add(5 * time.Second)
	for {
		late, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return
		}
		late.Close()
		if time.Now().After(deadline) {
			t.Fatal("connections are still accepted 5 s after SIGTERM")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestRefusesAMissingOrBadPodIP(t *testing.T) {
	for _, ip := range []string{"", "pod-ip"} {
		err := run(context.Background(), "127.0.0.1:0", ip)
		if err == nil || !strings.Contains(err.Error(), "POD_IP") || !strings.Contains(err.Error(), "status.podIP") {
			t.Fatalf("POD_IP %q: %v, want an error naming POD_IP and its fix", ip, err)
		}
	}
}
