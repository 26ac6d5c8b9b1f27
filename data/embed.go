// Package data bundles the real public datasets that `spur demo` imports,
// so the binary runs its main job anywhere. Each folder keeps its README
// with origin, licence and attribution:
//
//   - stackexchange-cardano: Cardano Stack Exchange activity, CC BY-SA 4.0
//     ("Data from Cardano Stack Exchange (cardano.stackexchange.com), Stack
//     Exchange Data Dump, December 2021, licensed CC BY-SA 4.0; reduced to an
//     event log (no post texts).")
//   - otto-sample: 20 real OTTO shop users, CC BY 4.0 ("OTTO Recommender
//     Systems Dataset, © OTTO (GmbH & Co KG), CC BY 4.0,
//     https://github.com/otto-de/recsys-dataset")
package data

import "embed"

// FS holds the bundled files: stackexchange-cardano/{events,users}.csv.gz,
// otto-sample/{train.jsonl,events.csv} and their README.md files.
//
//go:embed stackexchange-cardano otto-sample
var FS embed.FS
