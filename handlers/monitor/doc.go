// Package monitor is the monitor role: it evaluates each tenant's alert
// rules over its plan health and reports changes as audit events and
// signed webhooks.
package monitor
