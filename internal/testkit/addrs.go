package testkit

import (
	"net"
	"testing"
)

// FreeAddrs returns n loopback addresses nobody listens on, all distinct,
// for servers whose addresses must be known before they start. Each
// listener is held open until all n are taken: a port closed at once may
// be handed out again by the next ask, and two servers would then share it.
func FreeAddrs(tb testing.TB, n int) []string {
	tb.Helper()
	addrs := make([]string, 0, n)
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatal(err)
		}
		defer ln.Close()
		addrs = append(addrs, ln.Addr().String())
	}
	return addrs
}
