// Package kvs holds the NATS KV helpers the roles' packages share: what
// a lost compare-and-swap looks like, a JSON read-modify-write, following
// a bucket, and mapping any string onto the key alphabet.
package kvs
