// Package pool answers "which pool is this node in" and "is this node's pool state applied" for
// every part of pool-scheduler: the scheduler plugins, the labeler and the tools. Nothing else in
// the repository reads pool label keys or the managed-labels annotation directly.
package pool
