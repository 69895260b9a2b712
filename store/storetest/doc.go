// Package storetest is the contract suite every agentbus storage backend
// must pass. A backend's tests call Run with a constructor returning a
// fresh Backend, and RunRestart to prove durability:
//
//	func TestContract(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) storetest.Backend { return newBackend(t) })
//	}
//
// The suite uses random tenant, session and plan ids, so backends may share
// one underlying cluster between sub-tests. It assumes read-your-writes: a
// document written by a successful call is visible to the next query (an
// OpenSearch backend must refresh, e.g. refresh=wait_for).
package storetest
