// Package kvs holds the NATS KV helpers the roles' packages share besides
// the compare-and-set of package kvcas: following a bucket, and mapping any
// string onto the key alphabet.
package kvs
