// The lab's demo web server: every answer is the pod's own IP (POD_IP), so a client sees which
// backend served it, as in the papers' experiments.
//
// It closes each connection after its answer, as the thesis's servers did: the benchmarks measure a
// connection per request (the LB's share is in the handshakes), and kept-alive connections would
// measure the client's reuse instead. It listens with the namespace's full accept backlog
// (net.core.somaxconn): busybox's httpd, which served the demo before, listened with 9 and dropped
// SYNs whenever Maglev put a dozen of the bench's connections on one pod.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// drainTimeout bounds the wait for requests in flight at SIGTERM: inside the pod's default grace
// period (30 s), so the kubelet never has to kill it.
const drainTimeout = 20 * time.Second

// headerTimeout bounds how long a request's header may take: longer than the kept-connection
// bench's trickled requests (5 s), which hold a connection open across an LB change on purpose.
const headerTimeout = 30 * time.Second

// newServer answers every request with body and closes the connection after it.
func newServer(body string) *http.Server {
	answer := []byte(body + "\n")
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/plain")
			_, _ = w.Write(answer)
		}),
		ReadHeaderTimeout: headerTimeout,
		ErrorLog:          log.New(os.Stderr, "demo-web: ", 0),
	}
	srv.SetKeepAlivesEnabled(false)
	return srv
}

func run(ctx context.Context, listen, podIP string) error {
	if net.ParseIP(podIP) == nil {
		return fmt.Errorf("POD_IP=%q is not an IP address: give the container env POD_IP from the pod's status.podIP", podIP)
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return fmt.Errorf("--listen %s: %w", listen, err)
	}
	srv := newServer(podIP)
	// At SIGTERM, as a production app should: stop accepting and finish the answers under way, then
	// exit. (The pod's preStop sleep has by then let the requests of open connections arrive.)
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		<-ctx.Done()
		bounded, cancel := context.WithTimeout(context.Background(), drainTimeout)
		defer cancel()
		if err := srv.Shutdown(bounded); err != nil {
			log.Printf("demo-web: requests still open after %s, closing them: %v", drainTimeout, err)
			_ = srv.Close()
		}
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	<-drained
	return nil
}

func main() {
	listen := flag.String("listen", ":80", "the address to serve on")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := run(ctx, *listen, os.Getenv("POD_IP")); err != nil {
		log.Fatalf("demo-web: %v", err)
	}
}
