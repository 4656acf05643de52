//go:build !unix

package direct

import "net"

// supported: without a way to look at an idle socket, Addr gives no
// address, and servers are reached through net/http's Transport.
const supported = false

func socketAlive(net.Conn) bool { return false }
