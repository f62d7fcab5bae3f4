package serveconfig

import (
	"regexp"
	"strings"
	"testing"
	"time"
)

// --retention reads whole days and weeks as well as Go durations (docs/backup.md,
// "Retention"); anything else is refused with the spellings that work.
func TestRetentionAgeAcceptsDaysWeeksAndDurations(t *testing.T) {
	pattern := regexp.MustCompile(ageValue{}.JSONSchema()["pattern"].(string))
	for _, tc := range []struct {
		in        string
		want      time.Duration
		printed   string
		wantError string // "" for none
	}{
		{"90d", 90 * 24 * time.Hour, "90d", ""},
		{"1d", 24 * time.Hour, "1d", ""},
		{"2w", 14 * 24 * time.Hour, "14d", ""},
		{"2160h", 90 * 24 * time.Hour, "90d", ""},
		{"36h", 36 * time.Hour, "36h0m0s", ""},
		{"1h30m", 90 * time.Minute, "1h30m0s", ""},
		{"0", 0, "0s", ""},
		{"0d", 0, "0s", ""},
		{"-1h", -time.Hour, "-1h0m0s", ""}, // refused by applyRetention, naming the flag
		{"90 days", 0, "", `"90 days" is not an age: give days (90d), weeks (2w) or hours (2160h)`},
		{"90D", 0, "", `"90D" is not an age`},
		{"1d12h", 0, "", `"1d12h" is not an age`},
		{"d", 0, "", `"d" is not an age`},
		{"-3d", 0, "", `"-3d" is not an age`},
		{"99999999999999w", 0, "", `"99999999999999w" is too long: give at most 106751d`},
	} {
		t.Run(tc.in, func(t *testing.T) {
			var d time.Duration
			err := ageValue{&d}.Set(tc.in)
			if tc.wantError != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantError) {
					t.Fatalf("Set(%q): error %v, want %q", tc.in, err, tc.wantError)
				}
				// The schema checks the spelling, not the range.
				if strings.Contains(tc.wantError, "not an age") && pattern.MatchString(tc.in) {
					t.Errorf("the schema's pattern %s matches %q, which the flag refuses", pattern, tc.in)
				}
				return
			}
			if err != nil || d != tc.want {
				t.Fatalf("Set(%q) = %v, %v; want %v", tc.in, d, err, tc.want)
			}
			if got := (ageValue{&d}).String(); got != tc.printed {
				t.Errorf("String() = %q, want %q", got, tc.printed)
			}
			if !pattern.MatchString(tc.in) {
				t.Errorf("the schema's pattern %s refuses %q, which the flag reads", pattern, tc.in)
			}
		})
	}
}

// A day's age from the command line reaches the server's retention options as hours.
func TestRetentionInDaysReachesTheServer(t *testing.T) {
	t.Setenv("RBOOK_APPROVAL_SECRET", "c2lnbmluZy1zZWNyZXQtMDEyMzQ1Njc4OWFiY2RlZmdo")
	t.Setenv("RBOOK_CONFIG", "")
	cmd, s := newServe()
	cmd.SetArgs([]string{"--retention", "90d"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if s.cfg.Retention == nil || s.cfg.Retention.Age != 2160*time.Hour {
		t.Fatalf("retention options %+v, want an age of 2160h", s.cfg.Retention)
	}
}
