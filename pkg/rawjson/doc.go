// Package rawjson holds the rules by which mapper-apiserver reads and keeps JSON text as bytes
// without decoding it into trees of maps (docs/views.md, "Encode once, kept as bytes"): one
// validator, one walker, one framer, one interner, and one type for text that follows the rules.
//
// What it guarantees:
//
//   - Compact is JSON text of one value that is valid and compact (no whitespace outside
//     strings). It is made only by this package: Normalize (text of unknown shape, such as an
//     object the source sent), Marshal (encoding/json's output) and Splice (an edit of a
//     Compact whose inserted text the caller writes with encoding/json). Text from Normalize is
//     also read by kube-apiserver's decoder (sigs.k8s.io/json, non-strict) exactly as written:
//     invalid UTF-8 and duplicate member names are re-encoded the way the decoder reads them
//     (U+FFFD, the last member), and a number outside the range of a float64 is an error.
//     The view writes a Compact to clients as it is, without encoding/json's second pass
//     (pkg/registry/view raw_encoding.go).
//   - Check (and Valid) accept exactly what encoding/json.Valid accepts, nested up to 10,000
//     deep as encoding/json allows, and report what the decoder reads its own way (Report).
//     FuzzValidJSON holds Check to json.Valid.
//   - WalkObject, WalkArray, ValueRange and MemberRange find members and values structurally,
//     by walking the text, never by searching for bytes: on valid text they find what
//     encoding/json finds, a member on a path that occurs twice is an error, and on any text
//     they never read out of bounds (pkg/source's FuzzWalker and FuzzValueRange). They track
//     strings and nesting only: give them text Check found valid.
//   - Framer cuts a stream of JSON objects into frames as apimachinery's JSON framer does
//     (FuzzFramer holds it to that framer) without validating them.
//   - Interner keeps one copy of equal short strings for as long as the Interner lives.
//
// Libraries considered: go-json-experiment's jsontext (tokens and value spans) validates as
// it reads and was slower to walk an object's members; apimachinery's JSON framer reads each
// frame with encoding/json's scanner, about 30 times slower than Framer; unique.Make drops its
// canonical copy once no unique.Handle is held, so the cache, which keeps strings and not
// Handles, would copy shared label values again after each garbage collection. The figures are
// in docs/views.md, "The JSON-bytes rules".
package rawjson
