//go:build !windows

package state

import (
	"fmt"
	"os"
)

// syncDir fsyncs a folder so a rename or link in it survives a crash.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("fsync folder %s: %w", dir, err)
	}
	return nil
}
