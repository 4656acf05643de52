package proxy

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/toolgate/toolgate/pending"
)

// TestHeldMemory measures the memory one held agent request costs: N
// agents are held waiting for approval on one toolgate with the memory
// store, and the heap and stacks are compared with the idle server. The
// clients are bare TCP connections that write one request each and read
// nothing, so almost all of the difference is the server's. It runs only
// with TOOLGATE_TEST_LOAD=N (e.g. 10000): it is a measurement, not a check.
func TestHeldMemory(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("TOOLGATE_TEST_LOAD"))
	if n <= 0 {
		t.Skip("set TOOLGATE_TEST_LOAD=10000 to measure memory per held request")
	}
	store := pending.NewMemory(pending.Options{})
	env := newTestServer(t, askAll, func(c *Config) {
		c.Pending, c.Hold, c.TTL = store, 10*time.Minute, time.Hour
	})
	addr := env.url[len("http://"):]
	body := `{"path":"notes/a.txt","content":"` + fmt.Sprintf("%0150d", 0) + `"}`
	measure := func() uint64 {
		runtime.GC()
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapInuse + m.StackInuse
	}
	// Warm up: one held call, so lazily built state is in the baseline.
	warm, _ := net.Dial("tcp", addr)
	fmt.Fprintf(warm, "POST /tools/Write HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nIdempotency-Key: warm\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	time.Sleep(200 * time.Millisecond)
	before := measure()
	// The clients run in a child process (this test binary again): one
	// process cannot hold both ends of 10,000 connections under a 20,000
	// file limit.
	client := exec.Command(os.Args[0], "-test.run=^TestHeldMemoryClient$")
	client.Env = append(os.Environ(), "TOOLGATE_LOAD_ADDR="+addr)
	client.Stderr = os.Stderr
	if err := client.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = client.Process.Kill(); _ = client.Wait() }()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		calls, _ := store.List(context.Background(), pending.Waiting, n+10)
		if len(calls) >= n+1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d calls parked", len(calls), n)
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond)
	after := measure()
	per := float64(after-before) / float64(n)
	t.Logf("%d held requests: %.1f MiB more heap+stacks, %.1f KiB per held request (goroutines %d)",
		n, float64(after-before)/(1<<20), per/1024, runtime.NumGoroutine())
	warm.Close()
}

// TestHeldMemoryClient is the client side of TestHeldMemory, run in its
// own process: it opens TOOLGATE_TEST_LOAD connections to TOOLGATE_LOAD_ADDR,
// sends one request on each and waits to be killed.
func TestHeldMemoryClient(t *testing.T) {
	addr := os.Getenv("TOOLGATE_LOAD_ADDR")
	n, _ := strconv.Atoi(os.Getenv("TOOLGATE_TEST_LOAD"))
	if addr == "" || n <= 0 {
		t.Skip("the client of TestHeldMemory")
	}
	body := `{"path":"notes/a.txt","content":"` + fmt.Sprintf("%0150d", 0) + `"}`
	conns := make([]net.Conn, 0, n) // kept open: each holds a request
	for i := range n {
		c, err := net.DialTimeout("tcp", addr, 10*time.Second)
		if err != nil {
			t.Fatalf("after %d connections: %v", i, err)
		}
		fmt.Fprintf(c, "POST /tools/Write HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nIdempotency-Key: k%d\r\nContent-Length: %d\r\n\r\n%s", i, len(body), body)
		conns = append(conns, c)
	}
	time.Sleep(10 * time.Minute)
	for _, c := range conns {
		c.Close()
	}
}
