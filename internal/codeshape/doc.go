// Package codeshape holds tests of the module's own source code: rules of
// the project's style that a reviewer would otherwise have to check by
// eye on every change (CONTRIBUTING.md). It has no code of its own.
//
//   - No function of product code is longer than MaxFuncLines: a longer
//     one is split by concern (tests, e2e/ and the bench/ module are not
//     product code).
//   - Imports come in groups, in this order: the standard library, other
//     modules, then this module (goimports -local github.com/warmpod/warmpod
//     writes them so).
package codeshape
