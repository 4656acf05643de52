package policy

import "testing"

func TestRedactTarget(t *testing.T) {
	for _, tc := range []struct{ arg, in, want string }{
		{"url", "https://api.example.com/v1/items", "https://api.example.com/v1/items"},
		{"url", "https://svc:pw@api.example.com/v1?api_key=k#f", "https://REDACTED@api.example.com/v1?REDACTED"},
		{"url", "https://api.example.com/a@b", "https://api.example.com/a@b"},
		{"url", `https://u:p@host\x`, `https://REDACTED@host\x`},
		{"url", "svc:pw@host/x", "REDACTED@host/x"},
		{"path", "notes/today.txt", "notes/today.txt"},
		{"path", "notes/@home/a b.txt", "notes/@home/a b.txt"},
		{"path", "notes/a#b?c", "notes/a"},
		{"command", "ls -la", "[REDACTED]"},
		{"COMMAND", "ls", "[REDACTED]"},
		{"command", "", ""},
		{"path", "https:/svc:pw@api.example.com/v1", "https:/REDACTED@api.example.com/v1"},
		{"url", "/svc:pw@api.example.com/v1", "/REDACTED@api.example.com/v1"},
		{"url", `https:\\u:p@host\x`, `https:\\REDACTED@host\x`},
		{"path", "/%2F%2Fu:pw@host/x", "/REDACTED@host/x"},
		{"url", "jdbc:sqlserver://db;user=u;password=X", "jdbc:sqlserver://db;REDACTED"},
		{"url", "https://host/x;token=X", "https://host/x;REDACTED"},
		{"path", "notes/a;b.txt", "notes/a;b.txt"},
		{"path", "C:/notes/a.txt", "C:/notes/a.txt"},
		{"url", "jdbc:oracle:thin:scott/tiger@db:1521/orcl", "REDACTED@db:1521/orcl"},
		{"url", "mailto:alice@example.com", "REDACTED@example.com"},
		// Redacting twice changes nothing (the decision log may).
		{"url", "https://REDACTED@api.example.com/v1?REDACTED", "https://REDACTED@api.example.com/v1?REDACTED"},
	} {
		if got := redactTarget(tc.arg, tc.in); got != tc.want {
			t.Errorf("redactTarget(%q, %q) = %q, want %q", tc.arg, tc.in, got, tc.want)
		}
	}
}
