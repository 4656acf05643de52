package notify

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"
	"testing"
)

// rawReceiver answers every request 204 and sends each one, as the bytes
// that came on the wire, to the channel it returns.
func rawReceiver(t *testing.T) (url string, got <-chan []byte) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	ch := make(chan []byte, 16)
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { conn.Close() })
			go func() {
				br := bufio.NewReader(conn)
				for {
					var raw bytes.Buffer
					length := 0
					for {
						line, err := br.ReadString('\n')
						if err != nil {
							return
						}
						raw.WriteString(line)
						if name, v, ok := strings.Cut(strings.TrimRight(line, "\r\n"), ":"); ok &&
							textproto.CanonicalMIMEHeaderKey(name) == "Content-Length" {
							length, _ = strconv.Atoi(strings.TrimSpace(v))
						}
						if line == "\r\n" {
							break
						}
					}
					body := make([]byte, length)
					if _, err := io.ReadFull(br, body); err != nil {
						return
					}
					raw.Write(body)
					ch <- raw.Bytes()
					if _, err := conn.Write([]byte("HTTP/1.1 204 No Content\r\n\r\n")); err != nil {
						return
					}
				}
			}()
		}
	}()
	return "http://" + ln.Addr().String(), ch
}

// TestRequestOnTheWire: a delivery sends the bytes that
// http.NewRequestWithContext and Header.Set make of the same URL, body and
// header values, signed or not.
func TestRequestOnTheWire(t *testing.T) {
	for _, secret := range []string{"", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"} {
		url, got := rawReceiver(t)
		var res results
		n := start(t, fast(&res, Target{URL: url + "/hook?k=v", Secret: secret}))
		n.Notify(requested("CALL1"))
		sent := <-got

		// The same request made as net/http's helpers make it, with the
		// values that were sent.
		head, body, _ := bytes.Cut(sent, []byte("\r\n\r\n"))
		r := textproto.NewReader(bufio.NewReader(bytes.NewReader(append(bytes.Clone(head), "\r\n\r\n"...))))
		if _, err := r.ReadLine(); err != nil { // the request line
			t.Fatal(err)
		}
		hdr, err := r.ReadMIMEHeader()
		if err != nil {
			t.Fatal(err)
		}
		req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, url+"/hook?k=v", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/cloudevents+json")
		req.Header.Set("User-Agent", "toolgate-notify")
		req.Header.Set("webhook-id", "CALL1")
		req.Header.Set("webhook-timestamp", hdr.Get("Webhook-Timestamp"))
		if secret != "" {
			req.Header.Set("webhook-signature", hdr.Get("Webhook-Signature"))
		} else if _, ok := hdr["Webhook-Signature"]; ok {
			t.Fatal("an unsigned target's request is signed")
		}
		resp, err := defaultClient(1, nil).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if want := <-got; !bytes.Equal(sent, want) {
			t.Errorf("secret %q: sent\n%s\nwant\n%s", secret, sent, want)
		}
	}
}
