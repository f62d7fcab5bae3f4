package serveconfig

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/rbookhq/rbook-action/controlplane/server"
	"github.com/rbookhq/rbook-action/internal/flagconfig"
)

// day is the length of a --retention day: 24 hours, as the age of a run is measured.
const day = 24 * time.Hour

// parseAge reads a --retention age (docs/backup.md, "Retention"): a whole number of days
// ("90d") or weeks ("2w", 7 days each), or anything time.ParseDuration reads ("2160h",
// "0"). The error says which spellings work.
func parseAge(s string) (time.Duration, error) {
	if n, unit := strings.TrimRight(s, "dw"), strings.TrimLeft(s, "0123456789"); n != "" && (unit == "d" || unit == "w") {
		per := day
		if unit == "w" {
			per = 7 * day
		}
		v, err := strconv.ParseInt(n, 10, 64)
		if err != nil || v > math.MaxInt64/int64(per) {
			return 0, fmt.Errorf("%q is too long: give at most %dd", s, math.MaxInt64/int64(day))
		}
		return time.Duration(v) * per, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not an age: give days (90d), weeks (2w) or hours (2160h)", s)
	}
	return d, nil
}

// ageValue is --retention's value: a time.Duration as parseAge reads it.
type ageValue struct{ d *time.Duration }

// String is the age in whole days ("90d") when it is some, else as time.Duration prints it.
func (v ageValue) String() string {
	if *v.d > 0 && *v.d%day == 0 {
		return strconv.FormatInt(int64(*v.d/day), 10) + "d"
	}
	return v.d.String()
}

// Set reads s with parseAge.
func (v ageValue) Set(s string) error {
	d, err := parseAge(s)
	if err != nil {
		return err
	}
	*v.d = d
	return nil
}

// Type is the value's name in --help and the type flagconfig checks a file's value against
// (a string).
func (ageValue) Type() string { return "age" }

// JSONSchema is an age's schema in docs/serve-config.schema.json: days, weeks or a Go
// duration.
func (ageValue) JSONSchema() map[string]any {
	goDuration := strings.TrimSuffix(strings.TrimPrefix(flagconfig.DurationPattern, "^"), "$")
	return map[string]any{"type": "string", "pattern": `^([0-9]+[dw]|` + goDuration + `)$`}
}

// addRetentionFlags registers rbook serve's retention flags (docs/backup.md, "Retention"),
// --retention and --retention-export-dir, on fs, into r.
func addRetentionFlags(fs *pflag.FlagSet, r *server.RetentionOptions) {
	fs.Var(ageValue{&r.Age}, "retention", "delete finished runs whose end is older than this: days (90d), weeks (2w) or a Go duration (2160h); never one with a gate waiting; 0 keeps every run (see docs/backup.md)")
	fs.StringVar(&r.ExportDir, "retention-export-dir", "", "folder that receives each run's evidence as <run id>.json before --retention deletes it; a run whose file cannot be written is kept")
}

// applyRetention checks the retention flags r and sets cfg.Retention: --retention not
// negative, --retention-export-dir only with it and naming a folder this process can write.
// Errors name the flag.
func applyRetention(r server.RetentionOptions, cfg *server.Config) error {
	switch {
	case r.Age < 0:
		return fmt.Errorf("--retention %s: must be 0 (keep every run) or a positive age such as 90d or 2160h", r.Age)
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
