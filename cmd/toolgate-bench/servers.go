package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/signal"
	"path"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// The hidden subcommands: each server of the comparison runs as its own
// process (the harness re-executes itself), so its CPU can be read from
// /proc apart from the others'.

// serveUntilSignal serves h on addr until SIGTERM or SIGINT.
func serveUntilSignal(addr string, h http.Handler) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	if err := srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// transport is the upstream pool of the harness's own proxies, sized for
// the load (the default keeps 2 idle connections per host and would make
// a proxy reconnect for most calls at high concurrency).
func transport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = 1024
	t.MaxIdleConnsPerHost = 1024
	return t
}

// runUpstream is the recording tool server: it reads each request, counts
// it, and answers a small JSON body, or a JSON-RPC tools/call result on
// /mcp. GET /_bench/count tells how many calls it received.
func runUpstream(args []string) error {
	fs := flag.NewFlagSet("upstream", flag.ContinueOnError)
	addr := fs.String("listen", "127.0.0.1:0", "address")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var count atomic.Int64
	h := upstreamHandler(&count)
	return serveUntilSignal(*addr, h)
}

// upstreamHandler answers every call, counting it in count.
func upstreamHandler(count *atomic.Int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/_bench/count" {
			fmt.Fprintf(w, `{"count":%d}`, count.Load())
			return
		}
		body, _ := io.ReadAll(r.Body)
		count.Add(1)
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/mcp" {
			var msg struct {
				ID json.RawMessage `json:"id"`
			}
			if json.Unmarshal(body, &msg) != nil || msg.ID == nil {
				http.Error(w, "bad JSON-RPC message", http.StatusBadRequest)
				return
			}
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"ok"}]}}`, msg.ID)
			return
		}
		_, _ = io.WriteString(w, `{"ok":true,"result":"done"}`)
	})
}

// runBare is the floor: httputil.ReverseProxy and nothing else.
func runBare(args []string) error {
	fs := flag.NewFlagSet("bare", flag.ContinueOnError)
	addr := fs.String("listen", "127.0.0.1:0", "address")
	up := fs.String("upstream", "", "upstream URL")
	if err := fs.Parse(args); err != nil {
		return err
	}
	u, err := url.Parse(*up)
	if err != nil {
		return err
	}
	rp := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) {
		pr.SetURL(u)
		if pr.Out.Body != nil && pr.Out.Body != http.NoBody {
			pr.Out.Body = eofAfterClose{pr.Out.Body}
		}
	}, Transport: transport()}
	return serveUntilSignal(*addr, rp)
}

// eofAfterClose reads a proxied request body, and ends it where net/http
// closed it. An upstream that answers before the transport has finished
// writing the request (an MCP server's SSE answer starts at once) has
// the proxy's server write its response headers, which closes the inbound
// body; the transport, having copied the declared length, reads once more
// to check there is no more, gets "invalid Read on closed Body", and
// tears down the upstream connection with the answer half read (Go issue
// 40747). Without this the bare proxy cut about 1 SSE answer in 80.
type eofAfterClose struct{ io.ReadCloser }

func (b eofAfterClose) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if errors.Is(err, http.ErrBodyReadAfterClose) {
		err = io.EOF
	}
	return n, err
}

// runExtOPA is the architecture many deployments run today (Envoy
// ext_authz style): a Go proxy that reads the body, asks a separate OPA
// server over HTTP for every call, and forwards only an allowed one.
func runExtOPA(args []string) error {
	fs := flag.NewFlagSet("extopa", flag.ContinueOnError)
	addr := fs.String("listen", "127.0.0.1:0", "address")
	up := fs.String("upstream", "", "upstream URL")
	opa := fs.String("opa", "", "OPA decision URL (POST /v1/data/...)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	u, err := url.Parse(*up)
	if err != nil {
		return err
	}
	return serveUntilSignal(*addr, extOPAHandler(u, *opa))
}

// extOPAHandler forwards to up the calls the OPA server at opaURL allows.
func extOPAHandler(u *url.URL, opaURL string) http.Handler {
	rp := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) { pr.SetURL(u) }, Transport: transport()}
	client := &http.Client{Transport: transport(), Timeout: 10 * time.Second}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(w, "bad body", http.StatusBadRequest)
			return
		}
		allowed, err := askOPA(r.Context(), client, opaURL, r, body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusForbidden) // fail closed
			return
		}
		if !allowed {
			http.Error(w, "denied", http.StatusForbidden)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		rp.ServeHTTP(w, r)
	})
}

// askOPA builds the input the way toolgate does (tool from the path,
// arguments from the body, target the cleaned path argument) and applies
// deny > ask > allow to OPA's answer; only a clean allow forwards.
func askOPA(ctx context.Context, c *http.Client, opaURL string, r *http.Request, body []byte) (bool, error) {
	var callArgs map[string]any
	if err := json.Unmarshal(body, &callArgs); err != nil {
		return false, fmt.Errorf("body: %w", err)
	}
	tool := map[string]any{"name": strings.TrimPrefix(r.URL.Path, "/tools/"), "arguments": callArgs}
	if p, ok := callArgs["path"].(string); ok {
		tool["target"] = strings.TrimPrefix(path.Clean(p), "./")
	}
	in, err := json.Marshal(map[string]any{"input": map[string]any{
		"kind": "rest", "tool": tool,
		"http": map[string]any{"method": r.Method, "path": r.URL.Path},
	}})
	if err != nil {
		return false, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, opaURL, bytes.NewReader(in))
	if err != nil {
		return false, err
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := c.Do(req)
	if err != nil {
		return false, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return false, errors.New("OPA answered " + strconv.Itoa(res.StatusCode))
	}
	var out struct {
		Result *struct{ Deny, Ask, Allow []any } `json:"result"`
	}
	if err := json.NewDecoder(res.Body).Decode(&out); err != nil {
		return false, err
	}
	if out.Result == nil {
		return false, errors.New("OPA: no decision")
	}
	return forwards(len(out.Result.Deny), len(out.Result.Ask), len(out.Result.Allow)), nil
}

// forwards applies deny > ask > allow: a call goes through only when an
// allow fired and nothing else did (this proxy cannot park an ask).
func forwards(deny, ask, allow int) bool {
	return deny == 0 && ask == 0 && allow > 0
}

// runApprover stands in for an instant human: it receives toolgate's
// CloudEvents notifications and approves each requested call at once
// through the approvals JSON API of the toolgate that sent it (the host
// of the event's approval link).
func runApprover(args []string) error {
	fs := flag.NewFlagSet("approver", flag.ContinueOnError)
	addr := fs.String("listen", "127.0.0.1:0", "address")
	if err := fs.Parse(args); err != nil {
		return err
	}
	key := os.Getenv("BENCH_APPROVER_KEY")
	client := &http.Client{Transport: transport(), Timeout: 10 * time.Second}
	var failures atomic.Int64
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/_bench/failures" {
			fmt.Fprintf(w, `{"failures":%d}`, failures.Load())
			return
		}
		var ev struct {
			Type, ID string
			Data     struct {
				ApprovalURL string `json:"approval_url"`
			}
		}
		if err := json.NewDecoder(r.Body).Decode(&ev); err != nil {
			http.Error(w, "bad event", http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusNoContent)
		if ev.Type != "dev.toolgate.approval.requested" {
			return
		}
		link, err := url.Parse(ev.Data.ApprovalURL)
		if err != nil || link.Host == "" {
			failures.Add(1)
			fmt.Fprintf(os.Stderr, "event %s: no approval link\n", ev.ID)
			return
		}
		api := link.Scheme + "://" + link.Host
		req, _ := http.NewRequestWithContext(r.Context(), http.MethodPost, api+"/api/approvals/"+url.PathEscape(ev.ID),
			strings.NewReader(`{"decision":"approve","comment":"toolgate-bench"}`))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		res, err := client.Do(req)
		if err != nil {
			failures.Add(1)
			fmt.Fprintln(os.Stderr, "approve:", err)
			return
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			failures.Add(1)
			fmt.Fprintf(os.Stderr, "approve %s: %d %s\n", ev.ID, res.StatusCode, b)
		}
	})
	return serveUntilSignal(*addr, h)
}
