// Package bench measures agentbus against references run side by side in
// the same process and on the same embedded server: the JetStream floor (a
// bare publish, pull and ack), a LangGraph peer running the same 5-step
// plan, and agentbus itself under both durability modes. It reports
// ratios, because absolute figures on a shared 2-core machine mean little.
package bench
