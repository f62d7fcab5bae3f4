package main

import (
	"bytes"
	"debug/pe"
	"encoding/binary"
	"testing"
)

// cString is the NUL-terminated string at off in b.
func cString(b []byte, off uint32) string {
	s := b[off:]
	if i := bytes.IndexByte(s, 0); i >= 0 {
		s = s[:i]
	}
	return string(s)
}

// TestDLLForwardsProcessPrngToRtlGenRandom reads the written DLL back as a loader would: an
// x86-64 DLL whose export directory names bcryptprimitives.dll and exports ProcessPrng as a
// forwarder (its address lies inside the export directory) to advapi32.SystemFunction036.
func TestDLLForwardsProcessPrngToRtlGenRandom(t *testing.T) {
	f, err := pe.NewFile(bytes.NewReader(forwardingDLL(dllName, exportName, forwardTo)))
	if err != nil {
		t.Fatalf("not a PE file: %v", err)
	}
	if f.Machine != pe.IMAGE_FILE_MACHINE_AMD64 || f.Characteristics&pe.IMAGE_FILE_DLL == 0 {
		t.Fatalf("machine %#x, characteristics %#x: want an AMD64 DLL", f.Machine, f.Characteristics)
	}
	opt, ok := f.OptionalHeader.(*pe.OptionalHeader64)
	if !ok {
		t.Fatalf("optional header %T, want PE32+", f.OptionalHeader)
	}
	if opt.AddressOfEntryPoint != 0 {
		t.Errorf("entry point %#x, want none", opt.AddressOfEntryPoint)
	}
	dir := opt.DataDirectory[pe.IMAGE_DIRECTORY_ENTRY_EXPORT]
	if len(f.Sections) != 1 {
		t.Fatalf("%d sections, want 1", len(f.Sections))
	}
	sec := f.Sections[0]
	data, err := sec.Data()
	if err != nil {
		t.Fatal(err)
	}
	// rva turns an RVA into an offset in data.
	rva := func(r uint32) uint32 { return r - sec.VirtualAddress }
	ed := data[rva(dir.VirtualAddress):]
	u32 := func(off int) uint32 { return binary.LittleEndian.Uint32(ed[off:]) }
	if got := cString(data, rva(u32(12))); got != dllName {
		t.Errorf("export directory names %q, want %q", got, dllName)
	}
	if n, names := u32(20), u32(24); n != 1 || names != 1 {
		t.Fatalf("%d functions, %d names; want 1 and 1", n, names)
	}
	fn := binary.LittleEndian.Uint32(data[rva(u32(28)):])
	name := binary.LittleEndian.Uint32(data[rva(u32(32)):])
	ord := binary.LittleEndian.Uint16(data[rva(u32(36)):])
	if got := cString(data, rva(name)); got != exportName || ord != 0 {
		t.Errorf("export %q at ordinal index %d, want %q at 0", got, ord, exportName)
	}
	if fn < dir.VirtualAddress || fn >= dir.VirtualAddress+dir.Size {
		t.Fatalf("ProcessPrng's RVA %#x is outside the export directory [%#x, +%#x): not a forwarder", fn, dir.VirtualAddress, dir.Size)
	}
	if got := cString(data, rva(fn)); got != forwardTo {
		t.Errorf("ProcessPrng forwards to %q, want %q", got, forwardTo)
	}
	if opt.SizeOfImage != sec.VirtualAddress+0x1000 || sec.Size != 0x200 {
		t.Errorf("image size %#x, section raw size %#x: want one page after the headers, one file block", opt.SizeOfImage, sec.Size)
	}
}
