package pending

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// The scripts of an ask's transitions (park, decide, claim, finish,
// deliver) run as a Redis function library (FUNCTION LOAD, FCALL; Redis
// 7) where Redis takes one. An EVAL script runs its whole prelude at every
// call: it makes some sixty closures and constant tables before its own
// first line, about 70,000 of the ~420,000 instructions Redis spends on
// the average transition (callgrind). A library runs the prelude once,
// when it is loaded, and a call runs setup and the script's own body.
//
// Every script stays an EVAL script as well, and the store falls back to
// it wherever the library is not there:
//   - on a Redis that refuses FUNCTION LOAD (Redis 6, or an ACL user
//     without it): for the life of the store;
//   - when FCALL answers that the function is not found (Redis restarted
//     without persistence, a FUNCTION FLUSH): for that call, and the next
//     call loads the library again;
//   - on a Redis Cluster, whose primaries would each need the library,
//     loaded again after every reshard or new node: always.
//
// Neither answer ran anything, so running the EVAL script after it is
// the call's first run. The library's name carries a digest of its code,
// so replicas of two releases sharing a Redis during a rolling upgrade each
// run their own; an earlier release's library stays loaded until removed
// (FUNCTION DELETE), which costs Redis its code's memory and nothing else.

// fnScript is a script that also runs as a function of the library.
type fnScript struct {
	name, body string
	sc         *redis.Script
}

// fnScripts are the scripts newFunction made, in the order made.
var fnScripts []fnScript

// newFunction is newScript for a script that also runs as the library's
// function name (see above).
func newFunction(name, body string) *redis.Script {
	sc := newScript(body)
	fnScripts = append(fnScripts, fnScript{name: name, body: body, sc: sc})
	return sc
}

// library is the function library of fnScripts.
type library struct {
	name string                   // toolgate_<digest of its code>
	code string                   // what FUNCTION LOAD takes
	fn   map[*redis.Script]string // each script's function
}

var theLibrary = sync.OnceValue(func() *library {
	h := sha256.New()
	h.Write([]byte(luaPrelude))
	for _, f := range fnScripts {
		h.Write([]byte("\x00" + f.name + "\x00" + f.body))
	}
	name := "toolgate_" + hex.EncodeToString(h.Sum(nil))[:16]
	lib := &library{name: name, fn: make(map[*redis.Script]string, len(fnScripts))}
	var b strings.Builder
	b.WriteString("#!lua name=" + name + "\n" + luaPrelude)
	for _, f := range fnScripts {
		fn := name + "_" + f.name
		lib.fn[f.sc] = fn
		b.WriteString("\nredis.register_function('" + fn + "', function(KEYS, ARGV)" + luaSetup + f.body + "\nend)\n")
	}
	lib.code = b.String()
	return lib
})

// The states of a store's library (RedisStore.fnState).
const (
	fnUnknown int32 = iota // not loaded yet, or gone: the next call loads it
	fnLoaded               // FCALL
	fnOff                  // Redis refused it: EVAL for the life of the store
)

// function returns the function that runs sc, loading the library first
// if need be, or "" when sc runs as an EVAL script.
func (s *RedisStore) function(ctx context.Context, sc *redis.Script) string {
	if s.cluster {
		return ""
	}
	fn := theLibrary().fn[sc]
	if fn == "" {
		return ""
	}
	switch s.fnState.Load() {
	case fnLoaded:
		return fn
	case fnOff:
		return ""
	}
	if err := s.loadLibrary(ctx, s.rdb); err != nil {
		return ""
	}
	return fn
}

// loadLibrary loads the library on c. An error Redis answered (an
// unknown command, NOPERM, a library it cannot load) turns the library
// off for good; any other (a timeout, a connection lost) leaves it to be
// tried again.
func (s *RedisStore) loadLibrary(ctx context.Context, c redis.Cmdable) error {
	s.fnMu.Lock()
	defer s.fnMu.Unlock()
	if st := s.fnState.Load(); st != fnUnknown {
		if st == fnOff {
			return errors.New("pending: redis functions are off")
		}
		return nil
	}
	err := c.FunctionLoad(ctx, theLibrary().code).Err()
	if err == nil || strings.Contains(err.Error(), "already exists") {
		s.fnState.Store(fnLoaded)
		return nil
	}
	if rerr := redis.Error(nil); errors.As(err, &rerr) {
		s.fnState.Store(fnOff)
	}
	return err
}

// functionGone reports whether an FCALL failed because Redis does not run
// the function, before running anything: the library is gone (it is
// loaded again at the next call) or FCALL is refused (functions are turned
// off). Either way the EVAL script runs instead.
func (s *RedisStore) functionGone(err error) bool {
	if err == nil {
		return false
	}
	// Matched whole: an error a function raised while it ran ends with
	// " script: …", and may quote a call's data, so only Redis' own
	// refusals of FCALL itself, before it ran anything, qualify.
	msg := err.Error()
	switch {
	case msg == "ERR Function not found":
		s.fnState.CompareAndSwap(fnLoaded, fnUnknown)
		return true
	case strings.HasPrefix(msg, "NOPERM ") && strings.HasSuffix(msg, " has no permissions to run the 'fcall' command"):
		s.fnState.Store(fnOff)
		return true
	}
	return false
}
