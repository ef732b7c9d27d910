// Package doclinks holds one test: that the links of every Markdown file
// of the repository resolve. It has no code of its own to import.
//
// The documentation is split over the README, CONTRIBUTING.md and the
// pages under docs/ (guides, reference, explanations, design notes,
// decision records), which link to each other, to sections of each other
// and to files of the tree (deploy/, control/testdata/golden/, ...). A page
// moved, a heading renamed or a file deleted leaves a link that GitHub
// renders as a 404 or lands at the top of the page, and nothing else
// would notice. The test walks every *.md file (testdata directories and
// .git excepted), extracts its inline links, images, reference
// definitions and reference uses (not inside code blocks, code spans or
// HTML comments), and checks each:
//
//   - a relative target must exist, relative to the file that links it,
//     and stay inside the repository;
//   - a #fragment must be the GitHub anchor of a heading of the target
//     Markdown file (or of the file itself): the heading's text in lower
//     case, spaces as '-', punctuation other than '-' and '_' removed, with
//     -1, -2, ... for repeated headings;
//   - a reference use [text][label] must have a definition;
//   - http, https and mailto links are checked for syntax only: the test
//     never touches the network.
//
// Run it with `go test ./internal/doclinks`; it needs neither root nor a
// cluster.
package doclinks
