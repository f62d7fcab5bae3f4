package serveconfig

import (
	"fmt"
	"net/url"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/rbookhq/rbook-action/controlplane/approval"
	"github.com/rbookhq/rbook-action/controlplane/server"
	"github.com/rbookhq/rbook-action/controlplane/store"
	"github.com/rbookhq/rbook-action/internal/flagconfig"
)

// envApprovalSecretPrevious is the approval secret that verifies tokens but signs none, during
// a rotation (docs/serve-config.md, "Secrets").
const envApprovalSecretPrevious = "RBOOK_APPROVAL_SECRET_PREVIOUS"

// envConfig names the configuration file when --config is not given.
const envConfig = "RBOOK_CONFIG"

// schemaCommand regenerates docs/serve-config.schema.json.
const schemaCommand = "go run ./cmd/rbook serve --print-config-schema > docs/serve-config.schema.json"

// configOptions make every rbook serve flag a key of the --config file and an
// RBOOK_<FLAG> variable (docs/serve-config.md), except the flags about the configuration
// itself.
var configOptions = flagconfig.Options{
	EnvPrefix: "RBOOK_",
	// --reset-approval-secret-check is a one-time repair: kept in a file or the environment it
	// would re-record whatever secret each start has and so defeat the check it resets.
	Skip: []string{"config", "print-config", "print-config-schema", "help", "reset-approval-secret-check"},
	// Variables rbook reads for something else: the secrets, and the settings of the commands
	// that talk to a control plane (a shell that runs both must not have one reconfigure the
	// other). No serve flag maps onto one today (TestServeFlagsMapOntoNoReservedVariable).
	ReservedEnv: []string{
		approval.EnvApprovalSecret, approval.EnvSecret, envApprovalSecretPrevious, envSigningKeyPEM, envConfig,
		"RBOOK_CONTROL_PLANE", "RBOOK_CONTROL_PLANE_AUTH", "RBOOK_TOKEN", "RBOOK_SHOW_TOKEN",
		"RBOOK_GATE_MODE", "RBOOK_OIDC_AUDIENCE", "RBOOK_GITHUB_ENVIRONMENT",
		"RBOOK_CA_FILE", "RBOOK_CLIENT_CERT", "RBOOK_CLIENT_KEY",
		"RBOOK_CHROMIUM", "RBOOK_TEST_STORE", "RBOOK_TEST_POSTGRES_URL",
	},
	NotKeys: map[string]string{
		"approval-secret":             "secrets are never in the configuration file: set " + approval.EnvApprovalSecret,
		"secret":                      "secrets are never in the configuration file: set " + approval.EnvApprovalSecret,
		"approval-secret-previous":    "secrets are never in the configuration file: set " + envApprovalSecretPrevious,
		"signing-key-pem":             "secrets are never in the configuration file: give signing-key: FILE, or set " + envSigningKeyPEM,
		"config":                      "a configuration file cannot name another; give --config FILE or " + envConfig,
		"reset-approval-secret-check": "a one-time repair, given on the command line of one start only (docs/tls.md, \"Rotating the approval secret\")",
	},
}

// addConfigFlags registers --config, --print-config and the hidden --print-config-schema on
// fs.
func addConfigFlags(fs *pflag.FlagSet) {
	fs.String("config", "", "YAML `FILE` of settings whose keys are these flags' long names (docs/serve-config.md; default $"+envConfig+"); flags and RBOOK_<FLAG> variables override it")
	fs.Bool("print-config", false, "print the effective settings as YAML, each with where it came from (flag, env, file, default), secrets redacted, then check them as serve would and exit (non-zero with serve's error when they would not start)")
	fs.Bool("print-config-schema", false, "print the JSON schema of the --config file and exit")
	_ = fs.MarkHidden("print-config-schema")
}

// ReadConfig reads --config (else $RBOOK_CONFIG) and the RBOOK_<FLAG> variables into the
// flags cmd's command line left unset; call it before Load. With --print-config-schema or
// --print-config it prints to cmd's stdout and reports done: the command then exits without
// serving. --print-config then checks the settings as serve would (check) and returns the
// error serve would stop with, so the command exits non-zero after printing. Errors name the
// file, line and key, or the variable.
func (s *Settings) ReadConfig(cmd *cobra.Command) (done bool, err error) {
	fs := cmd.Flags()
	out := cmd.OutOrStdout()
	if on, _ := fs.GetBool("print-config-schema"); on {
		b, err := schema(fs)
		if err != nil {
			return true, err
		}
		_, err = out.Write(b)
		return true, err
	}
	file, _ := fs.GetString("config")
	if !fs.Changed("config") {
		file = os.Getenv(envConfig)
	}
	res, err := flagconfig.Apply(fs, file, configOptions)
	if err != nil {
		return false, err
	}
	if on, _ := fs.GetBool("print-config"); on {
		b, err := printConfig(fs, res, os.LookupEnv)
		if err != nil {
			return true, err
		}
		if _, err := out.Write(b); err != nil {
			return true, err
		}
		if err := s.check(cmd); err != nil {
			return true, fmt.Errorf("the settings above would not start: %w", err)
		}
		return true, nil
	}
	return false, nil
}

// check makes serve's checks of the settings without opening the database or listening:
// Load's (the approval secret, each flag's value, every file the flags name), then the --db
// DSN's and the --addr exposure's that server.Start makes first. Its error is the one serve
// would stop with.
func (s *Settings) check(cmd *cobra.Command) error {
	cfg, _, err := s.Load(cmd)
	if err != nil {
		return err
	}
	if err := store.CheckDSN(cfg.DBPath); err != nil {
		return fmt.Errorf("--db: %w", err)
	}
	// A client CA authenticates executors by their certificate, as server.Start counts it.
	auth := cfg.Auth != nil || cfg.OIDC != nil || cfg.SignIn != nil || (cfg.TLS != nil && cfg.TLS.ClientCAFile != "")
	return server.CheckExposure(cfg.Addr, auth, cfg.Insecure)
}

// schema is docs/serve-config.schema.json, generated from fs.
func schema(fs *pflag.FlagSet) ([]byte, error) {
	return flagconfig.Schema(fs, configOptions,
		"https://raw.githubusercontent.com/rbookhq/rbook-action/main/docs/serve-config.schema.json",
		"rbook serve configuration",
		"The --config file of rbook serve: each key is a long flag name of rbook serve, with a value of that flag's type (docs/serve-config.md). Generated by: "+schemaCommand)
}

// printConfig is --print-config's output: the effective settings (flagconfig.Effective)
// with database URLs and URLs with a password redacted, and the approval secrets as whether
// they are set, from where, and their length.
func printConfig(fs *pflag.FlagSet, res *flagconfig.Result, lookup func(string) (string, bool)) ([]byte, error) {
	file := "none"
	if res.File != "" {
		file = res.File
	}
	header := []string{
		"rbook serve: the effective settings. After each value, where it came from:",
		"flag (command line), env RBOOK_<FLAG>, file line N (of the config file), or default.",
		"config file: " + file,
	}
	signing, from := "", approval.EnvApprovalSecret
	for _, name := range []string{approval.EnvApprovalSecret, approval.EnvSecret} {
		if v, _ := lookup(name); v != "" {
			signing, from = v, name
			break
		}
	}
	previous, _ := lookup(envApprovalSecretPrevious)
	footer := []string{
		"secrets (environment only, never in the config file):",
		"approval secret: " + flagconfig.SecretState(signing, from),
		"previous approval secret: " + flagconfig.SecretState(previous, envApprovalSecretPrevious),
		signingKeyState(lookup),
	}
	return flagconfig.Effective(fs, res, configOptions, redactValue, header, footer)
}

// redactValue is a setting's value without a password: a PostgreSQL DSN as
// store.RedactDSN shows it, a URL with user:password@ as url.URL.Redacted does.
func redactValue(_ *pflag.Flag, v string) string {
	if store.IsPostgresDSN(v) {
		return store.RedactDSN(v)
	}
	if u, err := url.Parse(v); err == nil && u.User != nil {
		if _, has := u.User.Password(); has {
			return u.Redacted()
		}
	}
	return v
}
