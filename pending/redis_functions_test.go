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

	"github.com/toolgate/toolgate/internal/testkit"
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

// TestRedisStoreDeclaredEval is TestRedisStoreDeclared (every key declared,
// as on a Cluster, over 4 shards) with the transitions as EVAL scripts, as
// on a Redis 6 Cluster.
func TestRedisStoreDeclaredEval(t *testing.T) {
	testStore(t, declaring(redisStores(t), func(s *RedisStore) { s.fnState.Store(fnOff) }))
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
	if how, _ := s.Scripts(); how != "" {
		t.Fatalf("Scripts() = %q before anything loaded the library", how)
	}
	if err := s.Ping(t.Context()); err != nil {
		t.Fatal(err)
	}
	if how, _ := s.Scripts(); how != "functions" {
		t.Fatalf("Scripts() = %q after a Ping, want functions: a readiness check loads the library", how)
	}

	before := fcalls(t, rdb)
	lifeOfACall(t, s)
	if got := fcalls(t, rdb) - before; got < 4 {
		t.Errorf("a call's park, decision, claim and finish ran %d FCALLs, want 4", got)
	}
	// the grant lookup of every ask a grant could cover, with a grant to
	// find (none in force is remembered for a while: redis_nogrants.go)
	g := grant(t, s, sampleGrant(), time.Minute)
	before = fcalls(t, rdb)
	if got := findGrant(t, s, g.Subject, g.Upstream, g.Tool, g.Target); got.ID != g.ID {
		t.Errorf("FindGrant found %q, want %q", got.ID, g.ID)
	}
	if got := fcalls(t, rdb) - before; got != 1 {
		t.Errorf("a grant lookup ran %d FCALLs, want 1", got)
	}
	if s.fnState.Load() != fnLoaded || !libraryLoaded(t, rdb) {
		t.Fatalf("library %s not loaded (state %d)", theLibrary().name, s.fnState.Load())
	}
	if how, why := s.Scripts(); how != "functions" || why != "" {
		t.Errorf("Scripts() = %q, %q; want functions", how, why)
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
	if how, why := s.Scripts(); how != "eval" || !strings.HasPrefix(why, "FUNCTION LOAD: NOPERM") {
		t.Errorf("Scripts() = %q, %q; want eval, FUNCTION LOAD: NOPERM…", how, why)
	}
}

// TestFunctionGone: only Redis' refusals of FCALL itself, before it ran
// anything, send a call to its EVAL script; an error raised while a
// function ran never does, whatever call data it quotes, lest a transition
// run twice. A missing library is loaded again, a refused FCALL turns
// functions off, and a refusal to write leaves them on.
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
		{"ERR unknown command 'fcall', with args beginning with: 'toolgate_x_park' '1' ", true, fnOff},
		{"OOM command not allowed when used memory > 'maxmemory'.", true, fnLoaded},
		{"NOREPLICAS Not enough good replicas to write.", true, fnLoaded},
		{"READONLY You can't write against a read only replica.", true, fnLoaded},
		{"MISCONF Errors writing to the AOF file: No space left on device", true, fnLoaded},
		{"MISCONF Errors writing to the AOF file script: toolgate_x_park, on @user_function:9.", false, fnLoaded},
		{"OOM command not allowed when used memory > 'maxmemory'. script: toolgate_x_park, on @user_function:9.", false, fnLoaded},
	} {
		s := &RedisStore{}
		s.fnState.Store(fnLoaded)
		if got := s.functionGone(errors.New(c.err)); got != c.gone || s.fnState.Load() != c.state {
			t.Errorf("functionGone(%q) = %v, state %d; want %v, state %d", c.err, got, s.fnState.Load(), c.gone, c.state)
		}
	}
}

// TestRedisFunctionsOutOfMemory: a Redis over its memory limit refuses a
// function that may write before it runs, where it judges an EVAL script
// at its first write. The store runs the EVAL script then, so what ran
// before still runs: a finish (whose first write frees memory) records
// the result of a call already executed, and a claim of an ended call is
// answered as a conflict, not as an error.
func TestRedisFunctionsOutOfMemory(t *testing.T) {
	addr, _ := testkit.RedisServer(t)
	rdb := dialRedis(t, &redis.Options{Addr: addr})
	needFunctions(t, rdb)
	s := newRedisStoreOn(t, rdb, Options{ResultTTL: time.Minute})
	ctx := t.Context()
	c, _, err := s.Park(ctx, sampleCall(), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Decide(ctx, c.ID, Decision{To: Approved, By: "alice"}); err != nil {
		t.Fatal(err)
	}
	if c, err = s.Claim(ctx, c.ID, time.Minute); err != nil {
		t.Fatal(err)
	}
	if s.fnState.Load() != fnLoaded {
		t.Fatalf("state %d, want the library loaded", s.fnState.Load())
	}
	if err := rdb.ConfigSet(ctx, "maxmemory", "1").Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.ConfigSet(context.Background(), "maxmemory", "0") })
	if _, err := s.Finish(ctx, c.ID, c.Fence, Executed, Result{Status: 200, Body: []byte("ok")}); err != nil {
		t.Fatal("finish over the memory limit:", err)
	}
	if _, err := s.Claim(ctx, c.ID, time.Minute); !errors.Is(err, ErrConflict) {
		t.Fatalf("claim of an executed call over the memory limit: %v, want a conflict", err)
	}
	if s.fnState.Load() != fnLoaded {
		t.Errorf("state %d after refusals to write, want the library still loaded", s.fnState.Load())
	}
}

// TestRedisFunctionsLoadFails: a load that fails on a passing error (here
// a timeout) leaves the store on EVAL scripts for loadRetry, then loads.
func TestRedisFunctionsLoadFails(t *testing.T) {
	rdb := newRedisClient(t)
	needFunctions(t, rdb)
	s := newRedisStoreOn(t, rdb, Options{ResultTTL: time.Minute})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if fn := s.function(ctx, parkScript); fn != "" || s.fnState.Load() != fnUnknown || s.fnRetry.Load() == 0 {
		t.Fatalf("load with a cancelled context: function %q, state %d, retry %d", fn, s.fnState.Load(), s.fnRetry.Load())
	}
	if fn := s.function(t.Context(), parkScript); fn != "" {
		t.Fatalf("within loadRetry: function %q, want the EVAL script", fn)
	}
	s.fnRetry.Store(0) // loadRetry has passed
	if fn := s.function(t.Context(), parkScript); fn != theLibrary().fn[parkScript] || s.fnState.Load() != fnLoaded {
		t.Fatalf("after loadRetry: function %q, state %d", fn, s.fnState.Load())
	}
}
