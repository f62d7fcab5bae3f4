// Package atomicfile writes a file so that after a crash it holds either its old content or
// all of the new one: a temporary file in the same folder is written, fsynced and renamed
// over the target, then the folder is fsynced (the sequence of docs/decisions/durability.md).
// The control plane's retention exports and `rbook admin restore` use it.
package atomicfile

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// WriteFile writes data to path atomically with mode perm. Errors name path.
func WriteFile(path string, data []byte, perm os.FileMode) error {
	return WriteFrom(path, bytes.NewReader(data), perm)
}

// WriteFrom copies r to path atomically with mode perm: the temporary file is
// ".<name>.tmp-<digits>" beside path and is removed when anything fails. Errors name path.
func WriteFrom(path string, r io.Reader, perm os.FileMode) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	fail := func(err error) error {
		tmp.Close()
		os.Remove(tmp.Name())
		return fmt.Errorf("write %s: %w", path, err)
	}
	if _, err := io.Copy(tmp, r); err != nil {
		return fail(err)
	}
	if err := tmp.Chmod(perm); err != nil {
		return fail(err)
	}
	if err := tmp.Sync(); err != nil {
		return fail(err)
	}
	if err := tmp.Close(); err != nil {
		return fail(err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write %s: %w", path, err)
	}
	return SyncDir(dir)
}

// SyncDir fsyncs folder dir, so a rename in it survives a crash. Errors name dir.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !syncDirUnsupported(err) {
		return fmt.Errorf("fsync folder %s: %w", dir, err)
	}
	return nil
}
