// Package ledger holds the ledgers the roles draw from: run budgets
// (Budgets, and the model wrapper that draws before each call), tenant
// token quotas, request limits (Limiter) and per-skill circuit breakers
// (Breakers).
package ledger
