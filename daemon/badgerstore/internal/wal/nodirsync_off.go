//go:build !savepoint_nodirsync

package wal

const skipDirSync = false
