//go:build !race

package main

// raceBuild is 1 in a test binary built with -race.
const raceBuild = 0
