// Package storetest is the contract suite every agentbus storage backend
// must pass. A backend's tests call Run with a constructor returning a
// fresh Backend, and RunRestart to prove durability:
//
//	func TestContract(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) storetest.Backend { return newBackend(t) })
//	}
//
// The suite uses random tenant, session and plan ids, so backends may share
// one underlying cluster (and indices) between sub-tests. It assumes
// read-your-writes: a document written by a successful call is visible to
// the next query (an OpenSearch backend must refresh, e.g.
// refresh=wait_for). Every vector it stores or queries has Dimension
// elements, so backends with a fixed vector dimension can run it. Ids
// contain characters special to URLs, KV keys and subjects.
package storetest
