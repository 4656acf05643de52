package lifecycle

import "time"

// sweepWarnEvery bounds the sweeper's repeated warnings: a store that is
// down fails every round (several a second), and one line per interval
// says as much, with the number of rounds left out.
const sweepWarnEvery = 30 * time.Second

// warn writes msg at warning level unless it was written less than
// sweepWarnEvery ago.
func (l *Lifecycle) warn(msg string, args ...any) {
	if ok, dropped := l.warned.Allow(msg); ok {
		l.log.Warn(msg, append(args, "suppressed_since_last", dropped)...)
	}
}

// alarm is warn at error level: for what may leave a call waiting that
// should not, which can come in floods (a store away for minutes).
func (l *Lifecycle) alarm(msg string, args ...any) {
	if ok, dropped := l.warned.Allow(msg); ok {
		l.log.Error(msg, append(args, "suppressed_since_last", dropped)...)
	}
}
