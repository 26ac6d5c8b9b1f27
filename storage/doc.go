// Package storage is Spur's embedded store: apps, shards, versions and
// their catalog, atomic imports, compaction, verification and recovery,
// and the trail scan. docs/storage.md describes the version lifecycle,
// the catalog format and the recovery procedure.
//
// On disk, a store directory holds its writer lock, one folder per app
// and the store-level documents:
//
//	DIR/LOCK                     the store's writer lock (spur serve holds it for its life)
//	DIR/apps/APP/CATALOG         the published version: settings, schema, segments (CRC-32C)
//	DIR/apps/APP/SETTINGS        a second, independently checksummed copy of the settings
//	DIR/apps/APP/LOCK            the app's writer lock, naming its holder
//	DIR/apps/APP/seg/*.seg       immutable segment files (package storage/segment)
//	DIR/apps/APP/wal/            the live layer's write-ahead log (package storage/wal)
//	DIR/apps/APP/meta/C/ID.doc   documents of collection C: saved cohorts, insights… (meta.go)
//	DIR/meta/C/ID.doc            store-level documents (the server's access keys)
//	DIR/apps/APP/manifest.json   the legacy manifest of stores from before catalogs (read, then replaced)
//	DIR/apps/APP/cohorts.json    legacy saved cohorts (moved into meta/cohorts by App.MigrateCohorts)
//
// The store reaches this state only through three seams (seams.go), so
// that a cluster can put it on other engines: the Metastore (catalogs,
// settings, the app list, the writer leases LOCK, documents), each app's
// segment Bucket (seg/) and each app's write-ahead Log (wal/, package
// storage/wal). The files above are their default implementations,
// written through Config.FS; Config.Metastore, Config.Buckets and
// Config.Logs select others. Only recovery (Store.Recover), which moves
// damaged files aside, works on the files directly.
//
// Placement: every event and every user-property write of one user id
// lives in exactly one shard, ShardOf(id, Shards) — the low bits of
// xxhash64 (seed 0) of the id's UTF-8 bytes (UserHash), Shards a power of
// two fixed when the app is created. Every routing site (import, live
// ingestion, a user's trail lookup) goes through ShardOf or ShardOfHash.
// This is what makes every per-shard partial Merge and every user list
// exact: a user is seen whole by one shard's scan and by no other, so
// scans of disjoint shard subsets (ScanSpec.Shards) see disjoint users
// and together the full scan. A segment holds
// rows of one shard sorted by (xxhash64(user_id), user_id, timestamp,
// arrival order). Events segments hold events; users segments hold user
// property writes (one row per write, event name "$set"), whose latest value
// per property is the user's current value.
//
// An import writes all its segments first and then publishes them in one
// atomic catalog swap (Metastore.Publish, a compare-and-swap on the catalog
// generation; the files: write CATALOG.tmp, fsync, rename, fsync the
// directory): a crash at any point before the swap leaves the store as it
// was (unreferenced segment files are removed by the next write); after it,
// the import is complete.
//
// Readers pin an immutable Version of an app (App.Acquire, Version.Release)
// and scan it shard by shard in parallel: per shard, a k-way merge across
// the segments yields each user's trail in order (see Version.Scan). Files
// stay on disk while a version that references them is pinned. A scan compiles the query per segment (ScanSpec.Compile:
// matcher bits per event code, row-level property filters evaluated per
// decoded block), carries requested property columns into the trail as
// typed bits, and merges the shard's users segments into the same k-way
// merge to hand each trail its user's current property values.
package storage
