package badgerstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/pb"
	"github.com/dgraph-io/badger/v4/table"
	"google.golang.org/protobuf/proto"
)

// ErrUnsafeRepair is returned by RepairManifest when the directory holds
// tables that the MANIFEST does not list: dropping the missing ones could
// then lose data, and only a backup can help.
var ErrUnsafeRepair = errors.New("the MANIFEST cannot be repaired safely")

// RepairManifest removes from Badger's MANIFEST the tables whose files do
// not exist, and returns their file names (none when there is nothing to
// repair). It is the way back from a defect of Badger v4.9.6: when the
// MANIFEST's fsync fails during a memtable flush, Badger deletes the new
// table but keeps its record, retries the flush into another table, and the
// store no longer opens. Dropping such a record loses nothing, since the
// memtable was flushed again or is still in the write-ahead log; so the
// repair refuses when any table on disk is missing from the MANIFEST, the
// sign of another failure. The daemon must be stopped: RepairManifest takes
// the directory lock. Run Verify after it.
func RepairManifest(dir string) ([]string, error) {
	lock, err := LockDir(dir)
	if err != nil {
		return nil, err
	}
	defer lock.Close()
	path := filepath.Join(dir, badger.ManifestFilename)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	missing, valid, err := manifestMissing(f, dir)
	if err != nil || len(missing) == 0 {
		return nil, err
	}
	return removeTables(f, dir, valid, missing)
}

// removeTables appends to the MANIFEST f of dir, after its valid prefix
// (dropping a torn tail, as Badger would at open), one change set deleting
// the tables ids, syncs it and the directory, and returns their file names.
func removeTables(f *os.File, dir string, valid int64, ids []uint64) ([]string, error) {
	set := &pb.ManifestChangeSet{}
	var names []string
	for _, id := range ids {
		set.Changes = append(set.Changes, &pb.ManifestChange{Id: id, Op: pb.ManifestChange_DELETE})
		names = append(names, table.IDToFilename(id))
	}
	data, err := proto.Marshal(set)
	if err != nil {
		return nil, err
	}
	rec := manifestFrame(data)
	if err := f.Truncate(valid); err != nil { // a torn tail goes, as Badger would drop it at open
		return nil, err
	}
	if _, err := f.WriteAt(rec, valid); err != nil {
		return nil, err
	}
	if err := f.Sync(); err != nil {
		return nil, err
	}
	return names, syncDir(dir)
}

// replayManifest reads the MANIFEST f of dir as Badger does at open and
// returns it with the length of its valid prefix, past which a torn tail
// is ignored.
func replayManifest(f *os.File, dir string) (badger.Manifest, int64, error) {
	return badger.ReplayManifestFile(f, 0, badger.DefaultOptions(dir).WithLogger(nil))
}

// manifestFrame frames data, an encoded change set, as a record of the
// MANIFEST: its length, its CRC32C, then data.
func manifestFrame(data []byte) []byte {
	rec := binary.BigEndian.AppendUint32(nil, uint32(len(data)))
	rec = binary.BigEndian.AppendUint32(rec, crc32.Checksum(data, castagnoli))
	return append(rec, data...)
}

// manifestSets decodes the change sets of b, the valid prefix of a
// MANIFEST as replayManifest returned it (so their CRCs were checked).
func manifestSets(b []byte) ([]*pb.ManifestChangeSet, error) {
	var sets []*pb.ManifestChangeSet
	for off := 8; off+8 <= len(b); { // past the magic
		n := int(binary.BigEndian.Uint32(b[off:]))
		if off+8+n > len(b) {
			break
		}
		set := &pb.ManifestChangeSet{}
		if err := proto.Unmarshal(b[off+8:off+8+n], set); err != nil {
			return nil, err
		}
		sets = append(sets, set)
		off += 8 + n
	}
	return sets, nil
}

// manifestMissing reads the MANIFEST f of dir and returns the ids of the
// tables it names whose files do not exist, and the length of its valid
// prefix. It returns ErrUnsafeRepair when a table on disk is not named.
func manifestMissing(f *os.File, dir string) (missing []uint64, valid int64, err error) {
	m, valid, err := replayManifest(f, dir)
	if err != nil {
		return nil, 0, fmt.Errorf("read %s: %w", f.Name(), err)
	}
	if missing = absentTables(dir, m); len(missing) == 0 {
		return nil, valid, nil
	}
	ssts, err := filepath.Glob(filepath.Join(dir, "*.sst"))
	if err != nil {
		return nil, 0, err
	}
	var orphans []string
	for _, p := range ssts {
		id, ok := table.ParseFileID(filepath.Base(p))
		if _, listed := m.Tables[id]; ok && !listed {
			orphans = append(orphans, filepath.Base(p))
		}
	}
	if len(orphans) > 0 {
		return nil, 0, fmt.Errorf("%w: tables %s are on disk but not in the MANIFEST; restore the directory from a backup",
			ErrUnsafeRepair, strings.Join(orphans, ", "))
	}
	return missing, valid, nil
}

// openAdvice says what to do about a directory Badger cannot open: the
// exact repair-manifest and verify commands when its MANIFEST names tables
// that do not exist and every table on disk is named (the trace of
// Badger's failed-flush defect), else to restore it from a backup.
func openAdvice(dir string) string {
	const restore = "Restore the directory from a backup, or move it aside to start empty"
	f, err := os.Open(filepath.Join(dir, badger.ManifestFilename))
	if err != nil {
		return restore
	}
	defer f.Close()
	missing, _, err := manifestMissing(f, dir)
	if err != nil || len(missing) == 0 {
		return restore
	}
	names := make([]string, len(missing))
	for i, id := range missing {
		names[i] = table.IDToFilename(id)
	}
	return fmt.Sprintf("Its MANIFEST names %s, which does not exist, and lists every table on disk: the trace of Badger's "+
		"failed-flush defect (docs/reliability.md). With savepointd stopped, run: savepointd repair-manifest --data-dir %s, "+
		"then: savepointd verify --data-dir %s. If the repair refuses, restore the directory from a backup",
		strings.Join(names, ", "), dir, dir)
}

// absentTables returns, sorted, the tables m names whose files are not in
// dir.
func absentTables(dir string, m badger.Manifest) []uint64 {
	var ids []uint64
	for id := range m.Tables {
		if _, err := os.Stat(filepath.Join(dir, table.IDToFilename(id))); errors.Is(err, fs.ErrNotExist) {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}
