package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// The stall: connections that promise a body and never send it, which
// toolgate must close by body_timeout instead of holding a goroutine and
// a descriptor for each of them for ever.

// stalled is one connection that sent its headers and one byte of body.
type stalled struct {
	conn           net.Conn
	sent, closedAt time.Time
	status         string // the status the server answered, if any
}

// stallSet is the stalled connections that opened, with a reader on each.
type stallSet struct {
	conns    []*stalled
	dialErrs int            // connections that failed to open or to send their head
	readers  sync.WaitGroup // done when every reader saw its connection end
}

// stallResult is everything the stall measured, for its rows in the table.
type stallResult struct {
	opened, dialErrs    int
	spread              time.Duration // from the first connection opened to the last
	closed              int           // closed by toolgate within body_timeout + 1 s
	codes               []string      // "n × status", sorted
	before, peak, after int           // go_goroutines
	alone, busy         *loopResult
}

// stall opens p.stalls connections that each promise a 1000-byte body,
// send one byte and stop; toolgate must close every one within
// body_timeout (+1 s), and its goroutines must come back down.
func (s *abuseStack) stall(ctx context.Context, p abuseParams, check checkFunc) error {
	loopClient := abuseClient(p.loopWorkers)
	var r stallResult
	r.alone = s.aloneLoop(ctx, loopClient, p.loopWorkers, p.alone)
	before, err := s.goroutines()
	if err != nil {
		return err
	}
	r.before = before
	host := strings.TrimPrefix(s.proxy, "http://")
	g := startPeakSampler(ctx, int64(before), 100*time.Millisecond, func() (int64, error) {
		n, err := s.goroutines()
		return int64(n), err
	})
	set := openStalls(host, s.stallHead(host), p)
	if len(set.conns) == 0 {
		g.cancel()
		return fmt.Errorf("stalled bodies: no connection opened (%d errors)", set.dialErrs)
	}
	first, last := set.conns[0].sent, set.conns[len(set.conns)-1].sent
	r.busy = s.loopWhileStalled(ctx, loopClient, p, first, set)

	// Goroutines 2 s after body_timeout has passed for every connection.
	select {
	case <-ctx.Done():
	case <-time.After(time.Until(last.Add(p.bodyTimeout + 2*time.Second))):
	}
	after, err := s.goroutines()
	g.stop()
	if err != nil {
		return err
	}
	set.readers.Wait()
	r.closed, r.codes = tallyStalls(set.conns, p.bodyTimeout)
	if err := ctx.Err(); err != nil {
		return err
	}
	r.opened, r.dialErrs, r.spread = len(set.conns), set.dialErrs, last.Sub(first)
	r.peak, r.after = int(g.peak.Load()), after
	reportStall(check, p, &r)
	return nil
}

// stallHead is a valid allowed call that promises a 1000-byte body and
// sends only its first byte, so toolgate has taken the request and waits
// on the body.
func (s *abuseStack) stallHead(host string) string {
	return "POST /tools/read_file HTTP/1.1\r\nHost: " + host + "\r\nAuthorization: Bearer " + s.agentKey +
		"\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"
}

// openStalls opens p.stalls connections one after another and sends each
// the head; a connection that fails is counted, not retried, since the
// run measures what toolgate does with those that open.
func openStalls(host, head string, p abuseParams) *stallSet {
	set := &stallSet{conns: make([]*stalled, 0, p.stalls)}
	for range p.stalls {
		c, err := net.DialTimeout("tcp", host, 5*time.Second)
		if err != nil {
			set.dialErrs++
			continue
		}
		if _, err := io.WriteString(c, head); err != nil {
			c.Close()
			set.dialErrs++
			continue
		}
		st := &stalled{conn: c, sent: time.Now()}
		set.conns = append(set.conns, st)
		// Read until the server closes; the client never closes first.
		_ = c.SetReadDeadline(st.sent.Add(p.bodyTimeout + 5*time.Second))
		set.readers.Go(st.awaitClose)
	}
	return set
}

// awaitClose reads until the connection ends and notes when the server
// closed it and what status it answered, if any. Running into the read
// deadline is not a close: it means toolgate left the connection open.
func (st *stalled) awaitClose() {
	var got []byte
	buf := make([]byte, 4096)
	for {
		n, err := st.conn.Read(buf)
		if len(got) < 64 {
			got = append(got, buf[:min(n, 64)]...)
		}
		if err != nil {
			var ne net.Error
			if !errors.As(err, &ne) || !ne.Timeout() {
				st.closedAt = time.Now()
			}
			break
		}
	}
	if f := strings.Fields(string(got)); len(f) > 1 && strings.HasPrefix(f[0], "HTTP/") {
		st.status = f[1]
	}
}

// loopWhileStalled runs the allow loop while the connections stall and
// are closed: until every connection has ended, or body_timeout + 1 s
// after the first opened, whichever comes first.
func (s *abuseStack) loopWhileStalled(ctx context.Context, c *http.Client, p abuseParams, first time.Time, set *stallSet) *loopResult {
	loopCtx, stopLoop := context.WithDeadline(ctx, first.Add(p.bodyTimeout+time.Second))
	allClosed := make(chan struct{})
	go func() { set.readers.Wait(); close(allClosed) }()
	go func() {
		select {
		case <-allClosed:
			stopLoop()
		case <-loopCtx.Done():
		}
	}()
	busy := s.allowLoop(loopCtx, c, p.loopWorkers)
	stopLoop()
	return busy
}

// tallyStalls counts the connections toolgate closed in time and the
// answers it gave, and closes every connection from this side.
func tallyStalls(conns []*stalled, bodyTimeout time.Duration) (closed int, codes []string) {
	answered := map[string]int{}
	for _, st := range conns {
		if !st.closedAt.IsZero() && st.closedAt.Sub(st.sent) <= bodyTimeout+time.Second {
			closed++
		}
		answered[cmp.Or(st.status, "none")]++
		st.conn.Close()
	}
	for k, v := range answered {
		codes = append(codes, fmt.Sprintf("%d × %s", v, k))
	}
	slices.Sort(codes)
	return closed, codes
}

// reportStall writes the stall's rows: every connection opened and was
// closed by toolgate in time, goroutines came back down, and allowed
// calls were still answered during the stall.
func reportStall(check checkFunc, p abuseParams, r *stallResult) {
	const sc = "stalled bodies"
	check(sc, fmt.Sprintf("%d connections, Content-Length 1000, 1 byte sent", p.stalls),
		fmt.Sprintf("%d opened in %.2f s, %d failed to open", r.opened, r.spread.Seconds(), r.dialErrs), r.dialErrs == 0, "connections failed to open")
	check(sc, fmt.Sprintf("closed by toolgate within body_timeout %s + 1 s", p.bodyTimeout),
		fmt.Sprintf("%d of %d (answers: %s)", r.closed, p.stalls, strings.Join(r.codes, ", ")), r.closed == p.stalls, "connections left open past body_timeout + 1 s")
	check(sc, "go_goroutines before / peak / 2 s after body_timeout",
		fmt.Sprintf("%d / %d / %d (%+d)", r.before, r.peak, r.after, r.after-r.before), r.after <= r.before+20, "goroutines not back within 20 of before")
	check(sc, "allow loop alone", r.alone.String(), r.alone.bad == 0 && r.alone.calls > 0, "allowed calls not answered 200")
	check(sc, "allow loop during stall", during(r.busy, r.alone), r.busy.bad == 0 && r.busy.calls > 0, "allowed calls not answered 200 during the stall")
}
