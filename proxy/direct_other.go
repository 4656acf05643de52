//go:build !unix

package proxy

import "net"

// directSupported: without a way to look at an idle socket, upstreams go
// through net/http's Transport.
const directSupported = false

func socketAlive(net.Conn) bool { return false }
