package serveconfig

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/pflag"

	"github.com/rbookhq/rbook-action/controlplane/server"
)

// addRetentionFlags registers rbook serve's retention flags (docs/backup.md, "Retention"),
// --retention and --retention-export-dir, on fs, into r.
func addRetentionFlags(fs *pflag.FlagSet, r *server.RetentionOptions) {
	fs.DurationVar(&r.Age, "retention", 0, "delete finished runs whose end is older than this (e.g. 2160h for 90 days), never one with a gate waiting; 0 keeps every run (see docs/backup.md)")
	fs.StringVar(&r.ExportDir, "retention-export-dir", "", "folder that receives each run's evidence as <run id>.json before --retention deletes it; a run whose file cannot be written is kept")
}

// applyRetention checks the retention flags r and sets cfg.Retention: --retention not
// negative, --retention-export-dir only with it and naming a folder this process can write.
// Errors name the flag.
func applyRetention(r server.RetentionOptions, cfg *server.Config) error {
	switch {
	case r.Age < 0:
		return fmt.Errorf("--retention %s: must be 0 (keep every run) or a positive duration such as 2160h", r.Age)
	case r.Age == 0 && r.ExportDir != "":
		return fmt.Errorf("--retention-export-dir needs --retention AGE (runs are only exported when retention deletes them)")
	case r.Age == 0:
		return nil
	}
	if r.ExportDir != "" {
		if err := checkWritableDir(r.ExportDir); err != nil {
			return fmt.Errorf("--retention-export-dir %s: %v", r.ExportDir, err)
		}
	}
	cfg.Retention = &r
	return nil
}

// checkWritableDir reports whether dir is a folder this process can create files in (by
// creating and removing one), so a wrong folder stops the start, not the first export.
func checkWritableDir(dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("%v (create the folder first)", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("not a folder")
	}
	f, err := os.CreateTemp(dir, ".rbook-write-check-*")
	if err != nil {
		return fmt.Errorf("cannot write there: %v", err)
	}
	f.Close()
	return os.Remove(filepath.Join(dir, filepath.Base(f.Name())))
}
