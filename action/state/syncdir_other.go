//go:build !windows

package state

import (
	"fmt"
	"os"
)

// replaceFile renames from to to, replacing to; syncDir then makes it durable (durable is
// for Windows, where the rename itself is made durable).
func replaceFile(from, to string, _ bool) error { return os.Rename(from, to) }

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
