package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"

	"github.com/toolgate/toolgate/internal/config"
)

// configFlags are the flags shared by the commands that read a config: the
// file and the most used keys (flag > environment > file > default).
type configFlags struct {
	fs   *flag.FlagSet
	file *string
	keys map[string]*string // flag name -> value; key path in flagKeys
}

var flagKeys = map[string]string{
	"listen-proxy":     "listen.proxy",
	"listen-approvals": "listen.approvals",
	"listen-admin":     "listen.admin",
	"policy-dir":       "policy.dir",
	"rules-file":       "policy.rules_file",
	"policy-mode":      "policy.mode",
	"redis-url":        "pending.redis_url",
	"log-level":        "log.level",
}

func newConfigFlags(name string) *configFlags {
	fs := flag.NewFlagSet("toolgate "+name, flag.ContinueOnError)
	cf := &configFlags{fs: fs, file: fs.String("config", "", "configuration file (YAML); also $TOOLGATE_CONFIG"), keys: map[string]*string{}}
	for f, key := range flagKeys {
		cf.keys[f] = fs.String(f, "", "overrides "+key)
	}
	return cf
}

// load reads the configuration the flags and environment describe.
func (cf *configFlags) load(e env) (*config.Config, error) { return cf.loadWith(e, false) }

// loadWith is load; standIn lets unset secrets take stand-ins
// (config.Source.StandInSecrets), for commands that use no secret.
func (cf *configFlags) loadWith(e env, standIn bool) (*config.Config, error) {
	file := *cf.file
	if file == "" {
		file = e.getenv("TOOLGATE_CONFIG")
	}
	if file == "" {
		return nil, errors.New("--config: no configuration file given (pass --config FILE or set TOOLGATE_CONFIG)")
	}
	flags := map[string]any{}
	cf.fs.Visit(func(f *flag.Flag) {
		if key, ok := flagKeys[f.Name]; ok {
			flags[key] = f.Value.String()
		}
	})
	return config.Load(config.Source{File: file, Environ: e.environ, Flags: flags, StandInSecrets: standIn})
}

func cmdServe(ctx context.Context, args []string, e env) int {
	cf := newConfigFlags("serve")
	if ok, status := parseFlags(cf.fs, args, e); !ok {
		return status
	}
	cfg, err := cf.load(e)
	if err != nil {
		fmt.Fprintf(e.stderr, "toolgate: configuration refused:\n%v\n", err)
		return exitUsage
	}
	log := newLogger(e, cfg.Log.Level)
	for _, w := range cfg.Warnings() {
		log.Warn("configuration", "warning", w)
	}
	// An approvals listener asked for a free port is bound before the app
	// is built, so that the links to approvers name the port it took; the
	// others after, so that a policy or configuration the app refuses is
	// reported as such (exit 2) whatever the ports.
	var approvals net.Listener
	if cfg.PublicURLAwaitsPort() {
		if approvals, err = net.Listen("tcp", cfg.Listen.Approvals); err != nil {
			fmt.Fprintf(e.stderr, "toolgate: cannot start: listen.approvals: %v\n", err)
			return exitFail
		}
		cfg.ApprovalsBound(approvals.Addr().String())
	}
	a, err := newApp(ctx, cfg, policySourceOf(cfg), log)
	if err != nil {
		if approvals != nil {
			approvals.Close()
		}
		fmt.Fprintf(e.stderr, "toolgate: cannot start: %v\n", err)
		return exitUsage
	}
	l, err := listen(cfg, approvals)
	if err != nil {
		closeApp(a, log)
		fmt.Fprintf(e.stderr, "toolgate: cannot start: %v\n", err)
		return exitFail
	}
	err = a.serve(ctx, l)
	closeApp(a, log)
	if err != nil {
		log.Error("server failed", "error", err)
		return exitFail
	}
	return exitOK
}

// closeApp closes a after serving (or instead of it) and says so: by the
// end of the shutdown grace, once serving has stopped.
func closeApp(a *app, log *slog.Logger) {
	ctx, cancel := context.Background(), context.CancelFunc(func() {})
	if !a.closeBy.IsZero() {
		ctx, cancel = context.WithDeadline(ctx, a.closeBy)
	}
	defer cancel()
	if err := a.Close(ctx); err != nil {
		log.Warn("shutdown incomplete", "error", err)
	}
	log.Info("stopped")
}
