//go:build unix

package direct

import (
	"net"
	"syscall"
)

// supported: socketAlive can look at a socket without reading from
// it.
const supported = true

// socketAlive reports whether an idle connection is still open and has
// nothing waiting on it, by a peek that does not wait: it finds neither
// the server's close (a read of 0 bytes) nor bytes the server sent
// unasked. The connections are the TCP ones Transport dials.
func socketAlive(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	open := false
	err = raw.Read(func(fd uintptr) bool {
		var b [1]byte
		n, _, rerr := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		open = n < 0 && (rerr == syscall.EAGAIN || rerr == syscall.EWOULDBLOCK)
		return true // never wait for the socket to become readable
	})
	return err == nil && open
}
