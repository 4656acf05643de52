package pending

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// The scripts of an ask's transitions (park, decide, claim, finish,
// deliver) and its grant lookup run as a Redis function library (FUNCTION LOAD, FCALL; Redis
// 7) where Redis takes one. An EVAL script runs its whole prelude at every
// call: it makes some sixty closures and constant tables before its own
// first line, about 70,000 of the ~420,000 instructions Redis spends on
// the average transition (callgrind). A library runs the prelude once,
// when it is loaded, and a call runs setup and the script's own body.
//
// Every script stays an EVAL script as well, and the store falls back to
// it wherever the library is not there:
//   - on a Redis that refuses FUNCTION LOAD for good (Redis 6, an ACL user
//     without it) or FCALL: for the life of the store;
//   - when a load fails otherwise (a timeout, Redis loading): for
//     loadRetry, then it loads again;
//   - when FCALL answers that the function is not found (Redis restarted
//     without persistence, a FUNCTION FLUSH): for that call, and the next
//     call loads the library again;
//   - when Redis refuses FCALL as a call that may write (out of memory,
//     too few replicas): for that call, which as an EVAL script is judged
//     at its first write instead, as before the library (functionGone).
//
// On a Redis Cluster the library is loaded on every primary; a replica has
// it by replication when it takes over, and a primary added later answers
// its first call "not found", which loads it on every primary again.
//
// None of these answers ran anything, so running the EVAL script after it
// is the call's first run. The library's name carries a digest of its code,
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

// libraryName stands for the library's name while its code is digested.
const libraryName = "toolgate_@@@@@@@@@@@@@@@@"

var theLibrary = sync.OnceValue(func() *library {
	var b strings.Builder
	b.WriteString("#!lua name=" + libraryName + "\n" + luaPrelude)
	for _, f := range fnScripts {
		b.WriteString("\nredis.register_function('" + libraryName + "_" + f.name + "', function(KEYS, ARGV)" + luaSetup + f.body + "\nend)\n")
	}
	// the name is a digest of all the code it loads, wrapping included
	sum := sha256.Sum256([]byte(b.String()))
	name := "toolgate_" + hex.EncodeToString(sum[:])[:16]
	lib := &library{name: name, code: strings.ReplaceAll(b.String(), libraryName, name), fn: make(map[*redis.Script]string, len(fnScripts))}
	for _, f := range fnScripts {
		lib.fn[f.sc] = name + "_" + f.name
	}
	return lib
})

// The states of a store's library (RedisStore.fnState).
const (
	fnUnknown int32 = iota // not loaded yet, or gone: the next call loads it
	fnLoaded               // FCALL
	fnOff                  // Redis refused it: EVAL for the life of the store
)

// loadRetry is how long a store runs EVAL scripts after a load failed on
// a passing error (a timeout, Redis loading its data or out of memory)
// before it tries again: not at every transition, the library is ~30 KB.
const loadRetry = 5 * time.Second

// function returns the function that runs sc, loading the library first
// if need be, or "" when sc runs as an EVAL script.
func (s *RedisStore) function(ctx context.Context, sc *redis.Script) string {
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
	if time.Now().UnixNano() < s.fnRetry.Load() || s.loadLibrary(ctx, s.rdb) != nil {
		return ""
	}
	return fn
}

// loadLibrary loads the library on c, one load at a time: a transition
// that finds another loading runs its EVAL script rather than wait. A
// refusal that lasts (FUNCTION unknown, as on Redis 6; NOPERM; code Redis
// cannot load) turns the library off for the life of the store; any other
// error leaves it to be tried again after loadRetry.
func (s *RedisStore) loadLibrary(ctx context.Context, c redis.Cmdable) error {
	if !s.fnMu.TryLock() {
		return errors.New("pending: the function library is being loaded")
	}
	defer s.fnMu.Unlock()
	switch s.fnState.Load() {
	case fnLoaded:
		return nil
	case fnOff:
		return errors.New("pending: redis functions are off")
	}
	var err error
	if cc, ok := c.(*redis.ClusterClient); ok {
		// on every primary: a call's slot may be on any
		err = cc.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error { return loadOn(ctx, n) })
	} else {
		err = loadOn(ctx, c)
	}
	if err == nil {
		s.fnState.Store(fnLoaded)
		return nil
	}
	msg := strings.ToLower(err.Error())
	if strings.HasPrefix(msg, "err unknown command") || strings.HasPrefix(msg, "err unknown subcommand") ||
		strings.HasPrefix(msg, "noperm") || strings.HasPrefix(msg, "err error compiling") || strings.HasPrefix(msg, "err error registering") {
		s.functionsOff("FUNCTION LOAD: " + err.Error())
		return err
	}
	s.fnRetry.Store(time.Now().Add(loadRetry).UnixNano())
	return err
}

// loadOn loads the library on one node; loaded already is loaded.
func loadOn(ctx context.Context, c redis.Cmdable) error {
	lib := theLibrary()
	err := c.FunctionLoad(ctx, lib.code).Err()
	if err != nil && err.Error() == "ERR Library '"+lib.name+"' already exists" {
		return nil
	}
	return err
}

// functionsOff turns the library off for the life of the store, for why.
func (s *RedisStore) functionsOff(why string) {
	s.fnWhy.Store(&why)
	s.fnState.Store(fnOff)
}

// Scripts says how the transitions run on Redis: "functions" (FCALL),
// or "eval" and why (Redis refused the library); "" before a Ping or a
// transition has loaded the library.
func (s *RedisStore) Scripts() (how, why string) {
	switch s.fnState.Load() {
	case fnLoaded:
		return "functions", ""
	case fnOff:
		if w := s.fnWhy.Load(); w != nil {
			why = *w
		}
		return "eval", why
	}
	return "", ""
}

// functionGone reports whether Redis refused an FCALL before it ran
// anything, where the EVAL script may still run: the library is gone (it
// is loaded again at the next call); FCALL is not a command here or is
// refused to the user (functions are turned off); or Redis refuses the
// call as one that may write (out of memory, too few replicas, a disk
// error, a replica). Redis judges an EVAL script at its first write
// instead, so its branches that only read (a conflict, a retry answered
// again) still answer, and its writes fail there, before any is made.
//
// Matched whole: an error a function raised while it ran ends with
// " script: …" and may quote a call's data, so only Redis' own refusals
// of FCALL itself qualify.
func (s *RedisStore) functionGone(err error) bool {
	if err == nil {
		return false
	}
	msg := err.Error()
	switch {
	case msg == "ERR Function not found":
		s.fnState.CompareAndSwap(fnLoaded, fnUnknown)
		return true
	case strings.HasPrefix(msg, "NOPERM ") && strings.HasSuffix(msg, " has no permissions to run the 'fcall' command"),
		strings.HasPrefix(msg, "ERR unknown command 'fcall',"):
		s.functionsOff("FCALL: " + msg)
		return true
	case msg == "OOM command not allowed when used memory > 'maxmemory'.",
		msg == "NOREPLICAS Not enough good replicas to write.",
		msg == "READONLY You can't write against a read only replica.",
		strings.HasPrefix(msg, "MISCONF ") && !strings.Contains(msg, " script: "):
		return true
	}
	return false
}
