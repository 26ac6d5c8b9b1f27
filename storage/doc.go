// Package storage is Spur's embedded store: apps, shards, the segment
// manifest, atomic imports and the trail scan.
//
// On disk, a store directory holds one folder per app:
//
//	DIR/apps/APP/manifest.json   the published state (segments, schema, shard count)
//	DIR/apps/APP/LOCK            flock(2) (Windows: LockFileEx) guard held by the one writer (import) at a time
//	DIR/apps/APP/seg/*.seg       immutable segment files (package storage/segment)
//	DIR/apps/APP/cohorts.json    saved cohort definitions (App.SaveCohort), replaced atomically
//	DIR/apps/APP/COHORTS.LOCK    flock(2) (Windows: LockFileEx) guard of cohorts.json updates
//
// Every user lives in one shard, shard = xxhash64(user_id) mod Shards
// (Shards a power of two, fixed when the app is created). A segment holds
// rows of one shard sorted by (xxhash64(user_id), user_id, timestamp,
// arrival order). Events segments hold events; users segments hold user
// property writes (one row per write, event name "$set"), whose latest value
// per property is the user's current value.
//
// An import writes all its segments first and then publishes them in one
// atomic manifest swap (write manifest.json.tmp, fsync, rename, fsync the
// directory): a crash at any point before the rename leaves the store as it
// was (unreferenced segment files are removed the next time the app is
// opened for writing); after it, the import is complete.
//
// Readers take an immutable Snapshot of an app (an atomic.Pointer swap, no
// lock on the query path) and scan it shard by shard in parallel: per shard,
// a k-way merge across the segments yields each user's whole trail in order
// (see Snapshot.Scan). A scan compiles the query per segment (ScanSpec.Compile:
// matcher bits per event code, row-level property filters evaluated per
// decoded block), carries requested property columns into the trail as
// typed bits, and merges the shard's users segments into the same k-way
// merge to hand each trail its user's current property values.
package storage
