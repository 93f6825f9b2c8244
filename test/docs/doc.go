// Package docs checks the repository's documentation against the repository: every link of
// README.md and docs/ resolves to a file (and heading) inside it, no file cites anything outside
// it, and the commands the docs show (mapper-apiserver, mapper, mapper-controller and make
// targets) name subcommands, flags and targets that exist.
package docs
