package config

import (
	"errors"
	"fmt"
	"path/filepath"
	"reflect"

	"github.com/go-viper/mapstructure/v2"
	"github.com/knadh/koanf/providers/confmap"
	"github.com/knadh/koanf/v2"
)

// Source is where a configuration comes from, lowest precedence first.
type Source struct {
	// File is the YAML file; "" means none (defaults, environment and
	// flags only). ${NAME} references in its string values are expanded
	// from Environ, and its relative paths (policy.dir, policy.rules_file,
	// identity.jwt.jwks_file) are relative to the file's directory.
	File string

	// Environ is the environment in os.Environ form ("K=V"). Every entry is
	// visible to ${NAME}. A non-empty TOOLGATE_<KEY_PATH> entry also
	// overrides the key whose path, upper-cased with "_" between levels, is
	// KEY_PATH (TOOLGATE_PENDING_REDIS_URL: pending.redis_url), and
	// TOOLGATE_<LIST>_<i>_<KEY> overrides KEY of entry i of a list of
	// mappings that the file defines (TOOLGATE_UPSTREAMS_0_URL). Lists of
	// strings are comma-separated. A TOOLGATE_* name that matches no key is
	// an error, except names the file reads through ${}, TOOLGATE_CONFIG,
	// TOOLGATE_TEST_*, and the TOOLGATE_SERVICE_* / TOOLGATE_PORT*
	// variables Kubernetes injects for a Service named toolgate. Values are
	// not ${}-expanded, and relative paths are relative to the working
	// directory.
	Environ []string

	// Flags maps the key path of each flag the user actually set to its
	// value: "listen.proxy" -> "0.0.0.0:8080", "log.level" -> "debug". A
	// string is read as an environment value would be; other values must
	// have the key's type (bool, time.Duration, []string). Relative paths
	// are relative to the working directory.
	Flags map[string]any

	// StandInSecrets is for commands that read a configuration's policy
	// and use no secret (policy eval): a ${NAME} in a secret's value whose
	// variable is unset, and an approvals.secret given nowhere, take a
	// stand-in value that passes validation instead of being an error, so
	// the production file loads without its secrets. Never for serve.
	StandInSecrets bool
}

// Load builds the configuration from src. Each key takes its value from the
// flags, else the environment, else the file, else the default
// (ApplyDefaults fills what is still empty). The result is validated.
//
// A missing or unreadable file, or invalid YAML, is an error wrapping the
// cause. Every other problem is an *FieldError, and all of them are
// returned together (errors.Join): unknown keys in the file, TOOLGATE_*
// variables that match no key, values of the wrong type, ${} references to
// unset variables, then — once everything decodes — the Validate errors.
// No error contains the value of a secret.
func Load(src Source) (*Config, error) {
	env := environMap(src.Environ)
	refs := map[string]bool{}
	var errs []error

	fileMap := map[string]any{}
	if src.File != "" {
		m, err := readFile(src.File)
		if err != nil {
			return nil, err
		}
		abs, err := filepath.Abs(src.File)
		if err != nil {
			return nil, fmt.Errorf("config: %w", err)
		}
		w := fileWalker{
			lookup:  func(name string) (string, bool) { v, ok := env[name]; return v, ok },
			dir:     filepath.Dir(abs),
			refs:    refs,
			standIn: src.StandInSecrets,
		}
		w.mapping(schema(), m, "")
		errs = append(errs, w.errs...)
		fileMap = m
	}

	// A TOOLGATE_* variable that the file reads through ${} is in use even
	// when it is no key's name.
	envTree, items, envErrs := envOverrides(env, func(name string) bool { return refs[name] || exemptEnv(name) })
	errs = append(errs, envErrs...)
	errs = append(errs, patchLists(fileMap, items)...)
	flagTree, flagErrs := flagOverrides(src.Flags)
	errs = append(errs, flagErrs...)
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}

	// A mapping set by the environment or a flag replaces the file's, as
	// any other value does; merged, the file's entries would stay.
	replaceMaps(fileMap, envTree, "")
	replaceMaps(fileMap, flagTree, "")
	replaceMaps(envTree, flagTree, "")
	k := koanf.New(".")
	for _, layer := range []map[string]any{fileMap, envTree, flagTree} {
		if err := k.Load(confmap.Provider(layer, ""), nil); err != nil {
			return nil, fmt.Errorf("config: merging: %w", err)
		}
	}
	var c Config
	if err := k.UnmarshalWithConf("", &c, koanf.UnmarshalConf{DecoderConfig: decoderConfig()}); err != nil {
		// The walks above check every key and type first, so this is a
		// bug; mapstructure's message names the key but not the value.
		return nil, fmt.Errorf("config: decoding: %w", err)
	}
	c.ApplyDefaults()
	if src.StandInSecrets && c.Approvals.Secret == "" {
		c.Approvals.Secret = Secret(standInSecret("approvals.secret", ""))
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

// replaceMaps deletes from lower each key whose value is a mapping (a
// leafMap key, such as policy.subject_modes) that upper sets, so that
// merging upper over lower replaces it whole.
func replaceMaps(lower, upper map[string]any, prefix string) {
	for k, v := range upper {
		path := prefix + k
		if n := lookupPath(path); n != nil && n.leaf == leafMap {
			delete(lower, k)
			continue
		}
		lo, ok1 := lower[k].(map[string]any)
		up, ok2 := v.(map[string]any)
		if ok1 && ok2 {
			replaceMaps(lo, up, path+".")
		}
	}
}

// decoderConfig is the strict mapstructure configuration: unknown keys are
// errors, nothing is converted implicitly, and only the unit types and
// Secret have decode hooks.
func decoderConfig() *mapstructure.DecoderConfig {
	return &mapstructure.DecoderConfig{
		DecodeHook:       unitHook,
		ErrorUnused:      true,
		WeaklyTypedInput: false,
		TagName:          "koanf",
	}
}

// unitHook decodes Duration, ByteSize and Secret values. It accepts the
// forms of durationFrom and byteSizeFrom, and only strings for a Secret (its
// error does not show the value).
func unitHook(_ reflect.Type, to reflect.Type, data any) (any, error) {
	switch to {
	case durationType:
		return durationFrom(data)
	case byteSizeType:
		return byteSizeFrom(data)
	case secretType:
		switch s := data.(type) {
		case string:
			return Secret(s), nil
		case Secret:
			return s, nil
		}
		return nil, errors.New("expected a string, got " + describe(data))
	}
	return data, nil
}
