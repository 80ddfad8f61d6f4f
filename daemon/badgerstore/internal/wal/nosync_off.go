//go:build !savepoint_nosync

package wal

const skipSync = false
