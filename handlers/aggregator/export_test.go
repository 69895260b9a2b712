package aggregator

// FaninState is a group's entry in the fanin bucket, for the external
// tests that read it.
type FaninState = faninState
