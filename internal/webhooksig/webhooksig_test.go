package webhooksig_test

import (
	"testing"

	"github.com/toolgate/toolgate/internal/testkit"
	"github.com/toolgate/toolgate/internal/webhooksig"
)

func TestDeps(t *testing.T) { testkit.CheckStdlibOnly(t, ".") }

// TestSign checks a signature against the Standard Webhooks specification's
// own example.
func TestSign(t *testing.T) {
	key, err := webhooksig.ParseSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if err != nil {
		t.Fatal(err)
	}
	got := webhooksig.Sign(key, "msg_p5jXN8AQM9LWM0D4loKWxJek", "1614265330", []byte(`{"test": 2432232314}`))
	if want := "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="; got != want {
		t.Errorf("Sign = %s, want %s", got, want)
	}
	if raw, _ := webhooksig.ParseSecret("plain"); string(raw) != "plain" {
		t.Errorf("a raw secret reads as %q", raw)
	}
	for _, bad := range []string{"whsec_!!!", "whsec_"} {
		if _, err := webhooksig.ParseSecret(bad); err == nil {
			t.Errorf("ParseSecret(%q) succeeded", bad)
		}
	}
}
