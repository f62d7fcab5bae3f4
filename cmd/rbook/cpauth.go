package main

import (
	"io"
	"os"

	"github.com/spf13/cobra"

	pipeline "github.com/rbookhq/rbook-action/action/run"
)

// cpAuth holds the run command's --control-plane-auth and --oidc-audience ("" = from the
// environment; pipeline.Auth resolves them).
var cpAuth struct{ mode, audience string }

// addControlPlaneAuthFlags registers --control-plane-auth and --oidc-audience on cmd.
func addControlPlaneAuthFlags(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVar(&cpAuth.mode, "control-plane-auth", "", "how to authenticate to the control plane: auto (default: $RBOOK_TOKEN if set, "+
		"else a GitHub OIDC token in a job with \"permissions: id-token: write\", else none), token, oidc or none; default $RBOOK_CONTROL_PLANE_AUTH")
	fs.StringVar(&cpAuth.audience, "oidc-audience", "", "audience of the GitHub OIDC token (default $RBOOK_OIDC_AUDIENCE, else the control-plane URL)")
}

// cpProgress is where a control-plane client says it moved to the next URL
// (cpclient.MoveNotice): stderr, with the run's other progress lines.
var cpProgress io.Writer = os.Stderr

// cpAuthConfig is the flags' pipeline.Auth.
func cpAuthConfig() pipeline.Auth {
	return pipeline.Auth{Mode: cpAuth.mode, Audience: cpAuth.audience, Progress: cpProgress}
}

// cpAuthAudience is the OIDC audience for the control plane at url (run.Auth.AudienceFor).
func cpAuthAudience(url string) string { return cpAuthConfig().AudienceFor(url) }
