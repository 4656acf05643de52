package direct

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// smallWindowUpstream answers every request 413 once its head is read,
// then neither reads the body nor hangs up; its sockets have the smallest
// receive buffer and an Ethernet MSS, so little of a body fits between
// the client and it.
func smallWindowUpstream(t *testing.T) string {
	lc := net.ListenConfig{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 2048)
			if serr == nil {
				serr = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_MAXSEG, 1448)
			}
		})
		if err != nil {
			return err
		}
		return serr
	}}
	ln, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	var wg sync.WaitGroup
	t.Cleanup(func() { close(release); ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
					return
				}
				_, _ = io.WriteString(c, earlyAnswer413)
				<-release
			})
		}
	})
	return ln.Addr().String()
}

// The early 413 comes back at once for a body written before the read
// (writeAside bytes) and for one just above it (written aside), however
// small the upstream's window.
func TestDirectEarlyAnswerSmallWindow(t *testing.T) {
	for _, n := range []int{writeAside, writeAside + 1, 4 * writeAside} {
		addr := smallWindowUpstream(t)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/", strings.NewReader(strings.Repeat("x", n)))
		res, err := New(addr, 5*time.Second).RoundTrip(req)
		if err != nil {
			t.Errorf("a body of %d bytes: error %v, want the upstream's 413 at once", n, err)
		} else {
			if res.StatusCode != http.StatusRequestEntityTooLarge {
				t.Errorf("a body of %d bytes: status %d, want 413", n, res.StatusCode)
			}
			res.Body.Close()
		}
		cancel()
	}
}
