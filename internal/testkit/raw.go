package testkit

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
)

// RawServer accepts TCP connections on loopback and hands each to serve,
// for tests of what a client does with answers no net/http server would
// send (bytes beyond an answer, early answers, heads without end). It
// counts the connections it accepted, and closes them all when the test
// ends: a client under test may keep some in its pool.
func RawServer(tb testing.TB, serve func(net.Conn)) (addr string, accepted *atomic.Int64) {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	accepted = new(atomic.Int64)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns []net.Conn
	)
	tb.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() { defer c.Close(); serve(c) })
		}
	})
	return ln.Addr().String(), accepted
}

// ReadRequests calls answer with each request read from c, its body read
// and discarded, until c ends.
func ReadRequests(c net.Conn, answer func(*http.Request)) {
	br := bufio.NewReader(c)
	for {
		r, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		_, _ = io.Copy(io.Discard, r.Body)
		answer(r)
	}
}
