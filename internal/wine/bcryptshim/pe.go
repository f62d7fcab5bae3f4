package main

import (
	"bytes"
	"encoding/binary"
)

// The DLL bcryptshim writes: its file name, its one export and where that export forwards.
const (
	dllName    = "bcryptprimitives.dll"
	exportName = "ProcessPrng"
	forwardTo  = "advapi32.SystemFunction036"
)

// Layout of the image (PE/COFF specification, "Optional Header" and "The .edata Section"):
// headers in the first file block, one read-only section holding the export directory at
// RVA sectionRVA.
const (
	fileAlign    = 0x200
	sectionAlign = 0x1000
	sectionRVA   = sectionAlign
	imageBase    = 0x180000000
	peOffset     = 0x40 // e_lfanew: the PE signature follows the 64-byte DOS header
)

// forwardingDLL returns an x86-64 PE DLL named name whose only export, export, is a
// forwarder to forward ("module.Function"): the loader resolves it to that function, so the
// DLL needs no code, no entry point and no relocations.
func forwardingDLL(name, export, forward string) []byte {
	edata := exportSection(name, export, forward)
	rawSize := align(len(edata), fileAlign)

	var b bytes.Buffer
	le := func(v ...any) {
		for _, x := range v {
			_ = binary.Write(&b, binary.LittleEndian, x)
		}
	}

	// DOS header: "MZ", then e_lfanew at offset 0x3c.
	dos := make([]byte, peOffset)
	copy(dos, "MZ")
	binary.LittleEndian.PutUint32(dos[0x3c:], peOffset)
	b.Write(dos)

	b.WriteString("PE\x00\x00")
	// COFF file header.
	le(uint16(0x8664))                   // Machine: AMD64
	le(uint16(1))                        // NumberOfSections
	le(uint32(0))                        // TimeDateStamp: 0 keeps the output reproducible
	le(uint32(0))                        // PointerToSymbolTable
	le(uint32(0))                        // NumberOfSymbols
	le(uint16(240))                      // SizeOfOptionalHeader: PE32+ with 16 data directories
	le(uint16(0x0002 | 0x0020 | 0x2000)) // EXECUTABLE_IMAGE | LARGE_ADDRESS_AWARE | DLL

	// PE32+ optional header.
	le(uint16(0x20b))                                        // Magic: PE32+
	le(uint8(14), uint8(0))                                  // linker version (informational)
	le(uint32(0))                                            // SizeOfCode
	le(uint32(rawSize))                                      // SizeOfInitializedData
	le(uint32(0))                                            // SizeOfUninitializedData
	le(uint32(0))                                            // AddressOfEntryPoint: none, so no DllMain call
	le(uint32(sectionRVA))                                   // BaseOfCode
	le(uint64(imageBase))                                    // ImageBase
	le(uint32(sectionAlign))                                 // SectionAlignment
	le(uint32(fileAlign))                                    // FileAlignment
	le(uint16(6), uint16(0))                                 // operating system version
	le(uint16(0), uint16(0))                                 // image version
	le(uint16(6), uint16(0))                                 // subsystem version
	le(uint32(0))                                            // Win32VersionValue
	le(uint32(sectionRVA + align(len(edata), sectionAlign))) // SizeOfImage
	le(uint32(fileAlign))                                    // SizeOfHeaders
	le(uint32(0))                                            // CheckSum: only drivers need one
	le(uint16(3))                                            // Subsystem: Windows console
	le(uint16(0x0100))                                       // DllCharacteristics: NX_COMPAT
	le(uint64(0x100000), uint64(0x1000))                     // stack reserve, commit
	le(uint64(0x100000), uint64(0x1000))                     // heap reserve, commit
	le(uint32(0))                                            // LoaderFlags
	le(uint32(16))                                           // NumberOfRvaAndSizes
	// Data directory 0 is the export table; its size must cover the forwarder string, since
	// an export whose RVA lies inside the export directory is what marks it a forwarder.
	le(uint32(sectionRVA), uint32(len(edata)))
	for range 15 {
		le(uint32(0), uint32(0))
	}

	// Section header.
	var sname [8]byte
	copy(sname[:], ".edata")
	b.Write(sname[:])
	le(uint32(len(edata)))        // VirtualSize
	le(uint32(sectionRVA))        // VirtualAddress
	le(uint32(rawSize))           // SizeOfRawData
	le(uint32(fileAlign))         // PointerToRawData
	le(uint32(0), uint32(0))      // relocations and line numbers: none
	le(uint16(0), uint16(0))      // their counts
	le(uint32(0x40 | 0x40000000)) // CNT_INITIALIZED_DATA | MEM_READ

	b.Write(make([]byte, fileAlign-b.Len()))
	b.Write(edata)
	b.Write(make([]byte, rawSize-len(edata)))
	return b.Bytes()
}

// exportSection returns the export directory of a DLL named name with one named export,
// export, forwarded to forward, laid out for RVA sectionRVA: the directory, the address,
// name and ordinal tables (one entry each), then the strings they point to.
func exportSection(name, export, forward string) []byte {
	const (
		dirSize   = 40
		eatRVA    = sectionRVA + dirSize
		namesRVA  = eatRVA + 4
		ordRVA    = namesRVA + 4
		stringRVA = ordRVA + 2
	)
	nameRVA := uint32(stringRVA)
	exportRVA := nameRVA + uint32(len(name)) + 1
	forwardRVA := exportRVA + uint32(len(export)) + 1

	var b bytes.Buffer
	le := func(v ...any) {
		for _, x := range v {
			_ = binary.Write(&b, binary.LittleEndian, x)
		}
	}
	le(uint32(0), uint32(0)) // Characteristics, TimeDateStamp
	le(uint16(0), uint16(0)) // version
	le(nameRVA)              // Name
	le(uint32(1))            // Base: the first ordinal
	le(uint32(1), uint32(1)) // NumberOfFunctions, NumberOfNames
	le(uint32(eatRVA), uint32(namesRVA), uint32(ordRVA))
	le(forwardRVA) // export address table: the forwarder string
	le(exportRVA)  // export name table
	le(uint16(0))  // ordinal table: index into the address table
	for _, s := range []string{name, export, forward} {
		b.WriteString(s)
		b.WriteByte(0)
	}
	return b.Bytes()
}

// align rounds n up to a multiple of a (a power of two).
func align(n, a int) int { return (n + a - 1) &^ (a - 1) }
