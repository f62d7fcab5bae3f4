package serveconfig

import "github.com/spf13/cobra"

// newServe is a command with rbook serve's flags, as cmd/rbook builds it, and its settings.
// Running it reads the configuration and, unless that printed something, loads the settings.
func newServe() (*cobra.Command, *Settings) {
	var s *Settings
	cmd := &cobra.Command{Use: "serve", Args: cobra.NoArgs, RunE: func(cmd *cobra.Command, _ []string) error {
		if done, err := s.ReadConfig(cmd); err != nil || done {
			return err
		}
		_, _, err := s.Load(cmd)
		return err
	}}
	s = AddFlags(cmd, "")
	return cmd, s
}

// newServeCmd is newServe's command.
func newServeCmd() *cobra.Command {
	cmd, _ := newServe()
	return cmd
}
