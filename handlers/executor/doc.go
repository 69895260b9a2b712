// Package executor is the executor role (SubAgent-B): it runs one step
// turn by turn, calling the model and the skills under the run's budget,
// gates and circuit breakers, and writes the step's output to memory.
package executor
