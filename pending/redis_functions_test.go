package pending

import (
	"context"
	"crypto/rand"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestRedisStoreEval runs the store contract with the transitions as EVAL
// scripts, as on a Redis that refuses the function library (Redis 6, an
// ACL user without FUNCTION).
func TestRedisStoreEval(t *testing.T) {
	newStore := redisStores(t)
	testStore(t, func(t *testing.T, with ...func(*Options)) (Store, func(time.Duration)) {
		t.Helper()
		s, sleep := newStore(t, with...)
		s.(*RedisStore).fnState.Store(fnOff)
		return s, sleep
	})
}

// needFunctions skips on a Redis older than 7, which has no functions
// (the EVAL scripts are all such a Redis runs; TestRedisStoreEval covers
// them).
func needFunctions(t *testing.T, rdb *redis.Client) {
	t.Helper()
	info, err := rdb.Info(t.Context(), "server").Result()
	if err != nil {
		t.Fatal(err)
	}
	_, after, _ := strings.Cut(info, "redis_version:")
	major, _, _ := strings.Cut(after, ".")
	if v, err := strconv.Atoi(major); err != nil || v < 7 {
		t.Skipf("Redis %s has no functions", strings.TrimSpace(strings.SplitN(after, "\n", 2)[0]))
	}
}

// lifeOfACall parks, approves, claims and finishes a call on s.
func lifeOfACall(t *testing.T, s *RedisStore) {
	t.Helper()
	ctx := t.Context()
	c, _, err := s.Park(ctx, sampleCall(), time.Minute)
	if err != nil {
		t.Fatal("park:", err)
	}
	if _, err := s.Decide(ctx, c.ID, Decision{To: Approved, By: "alice"}); err != nil {
		t.Fatal("decide:", err)
	}
	if c, err = s.Claim(ctx, c.ID, time.Minute); err != nil {
		t.Fatal("claim:", err)
	}
	done, err := s.Finish(ctx, c.ID, c.Fence, Executed, Result{Status: 200, Body: []byte("ok")})
	if err != nil {
		t.Fatal("finish:", err)
	}
	if done.State != Executed || done.Result == nil || string(done.Result.Body) != "ok" {
		t.Fatalf("finished call: %+v", done)
	}
}

// fcalls is how many FCALLs the Redis has run.
func fcalls(t *testing.T, rdb *redis.Client) int {
	t.Helper()
	info, err := rdb.Info(t.Context(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(info, "cmdstat_fcall:calls=")
	if !ok {
		return 0
	}
	n, _ := strconv.Atoi(after[:strings.IndexAny(after, ",\r\n")])
	return n
}

// libraryLoaded reports whether the Redis holds this release's library.
func libraryLoaded(t *testing.T, rdb *redis.Client) bool {
	t.Helper()
	libs, err := rdb.FunctionList(t.Context(), redis.FunctionListQuery{LibraryNamePattern: theLibrary().name}).Result()
	if err != nil {
		t.Fatal(err)
	}
	return len(libs) == 1 && len(libs[0].Functions) == len(fnScripts)
}

// TestRedisFunctions: the transitions run as the library's functions, and
// when the library goes (a restart without persistence, FUNCTION FLUSH)
// the next transition runs as an EVAL script and the one after loads it
// again.
func TestRedisFunctions(t *testing.T) {
	rdb := newRedisClient(t)
	needFunctions(t, rdb)
	s := newRedisStoreOn(t, rdb, Options{ResultTTL: time.Minute})

	before := fcalls(t, rdb)
	lifeOfACall(t, s)
	if got := fcalls(t, rdb) - before; got < 4 {
		t.Errorf("a call's park, decision, claim and finish ran %d FCALLs, want 4", got)
	}
	if s.fnState.Load() != fnLoaded || !libraryLoaded(t, rdb) {
		t.Fatalf("library %s not loaded (state %d)", theLibrary().name, s.fnState.Load())
	}

	if err := rdb.FunctionDelete(t.Context(), theLibrary().name).Err(); err != nil {
		t.Fatal(err)
	}
	lifeOfACall(t, s) // its park finds the function gone, and runs as EVAL
	if !libraryLoaded(t, rdb) {
		t.Fatal("the library was not loaded again after it went")
	}
	if s.fnState.Load() != fnLoaded {
		t.Fatalf("state %d after the library came back, want loaded", s.fnState.Load())
	}
}

// TestRedisFunctionsRefused: an ACL user without FUNCTION and FCALL gets
// the EVAL scripts, and every transition works.
func TestRedisFunctionsRefused(t *testing.T) {
	admin := newRedisClient(t)
	needFunctions(t, admin)
	user, pass := "toolgate-test-"+rand.Text()[:8], rand.Text()
	if err := admin.Do(t.Context(), "ACL", "SETUSER", user, "on", ">"+pass, "~*", "&*", "+@all", "-function", "-fcall", "-fcall_ro").Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Do(context.Background(), "ACL", "DELUSER", user) })
	rdb := dialRedis(t, &redis.Options{Addr: admin.Options().Addr, Username: user, Password: pass})
	s := newRedisStoreOn(t, rdb, Options{ResultTTL: time.Minute})

	lifeOfACall(t, s)
	if s.fnState.Load() != fnOff {
		t.Fatalf("state %d for a user refused FUNCTION LOAD, want off", s.fnState.Load())
	}
}

// TestFunctionGone: only Redis' refusals of FCALL itself, before it ran
// anything, send a call to its EVAL script; an error raised while a
// function ran never does, whatever call data it quotes, lest a transition
// run twice.
func TestFunctionGone(t *testing.T) {
	for _, c := range []struct {
		err   string
		gone  bool
		state int32
	}{
		{"ERR Function not found", true, fnUnknown},
		{"NOPERM this user has no permissions to run the 'fcall' command", true, fnOff},
		{"NOPERM User tg has no permissions to run the 'fcall' command", true, fnOff},
		{"ERR user_function:12: toolgate: undeclared key {t}:attach:Function not found in GET script: toolgate_x_park, on @user_function:12.", false, fnLoaded},
		{"NOPERM this user has no permissions to run the 'zadd' command script: toolgate_x_park, on @user_function:3.", false, fnLoaded},
		{"ERR Function not found script: x", false, fnLoaded},
		{"OOM command not allowed when used memory > 'maxmemory'.", false, fnLoaded},
	} {
		s := &RedisStore{}
		s.fnState.Store(fnLoaded)
		if got := s.functionGone(errors.New(c.err)); got != c.gone || s.fnState.Load() != c.state {
			t.Errorf("functionGone(%q) = %v, state %d; want %v, state %d", c.err, got, s.fnState.Load(), c.gone, c.state)
		}
	}
}
