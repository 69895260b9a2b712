// Package aggregator is the aggregator role: it joins the members of a
// parallel group (fan-in) and emits the group's join once.
package aggregator
