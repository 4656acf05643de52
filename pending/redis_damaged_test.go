package pending

import (
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestRedisDamagedCallStopsNothingElse: a call whose key holds something
// no release wrote is gone to every script: the shard's other calls are
// still swept and listed, Expire reports every call it moves, and the
// damaged call itself is never claimed (Get reads it as ErrDamaged).
func TestRedisDamagedCallStopsNothingElse(t *testing.T) {
	for _, garbage := range []string{"garbage", "waiting 9 0 0 0 0\n\x81", "waiting 3 0 0 0 0\n\xc1\xc1\xc1"} {
		rdb := newRedisClient(t)
		s := newRedisStoreOn(t, rdb, Options{ResultTTL: contractResultTTL})
		ctx := t.Context()
		damage := func(id string) {
			t.Helper()
			if err := rdb.SetArgs(ctx, s.callKey(id), garbage, redis.SetArgs{KeepTTL: true}).Err(); err != nil {
				t.Fatal(err)
			}
		}

		good := park(t, s, sampleCall(), long)
		decide(t, s, good.ID, Approved)
		bad := park(t, s, sampleCall(), long)
		decide(t, s, bad.ID, Approved)
		damage(bad.ID)
		got, err := s.Approved(ctx, 0, 10)
		if err != nil || len(got) != 1 || got[0].ID != good.ID {
			t.Errorf("%q: Approved = %d calls, %v; want the good one alone", garbage, len(got), err)
		}
		if _, err := s.Claim(ctx, bad.ID, long); err == nil {
			t.Errorf("%q: the damaged call was claimed", garbage)
		}
		if _, err := s.Get(ctx, bad.ID); !errors.Is(err, ErrDamaged) {
			t.Errorf("%q: Get of the damaged call: %v, want ErrDamaged", garbage, err)
		}

		waiting := park(t, s, sampleCall(), short)
		damaged := park(t, s, sampleCall(), short)
		damage(damaged.ID)
		for _, list := range []func() ([]Call, error){
			func() ([]Call, error) { return s.List(ctx, Waiting, 10) },
			func() ([]Call, error) { return s.ListBrief(ctx, Waiting, 10) },
		} {
			if l, err := list(); err != nil || len(l) != 1 || l[0].ID != waiting.ID {
				t.Errorf("%q: listing the waiting calls: %d, %v; want the good one alone", garbage, len(l), err)
			}
		}
		time.Sleep(beyond)
		ended, err := s.Expire(ctx, 10)
		if err != nil || len(ended) != 1 || ended[0].ID != waiting.ID || ended[0].State != Expired {
			t.Errorf("%q: Expire = %v, %v; want the good waiting call, expired and reported", garbage, ended, err)
		}
	}
}
