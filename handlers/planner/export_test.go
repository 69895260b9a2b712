package planner

// VerifyPlan is the verification pass, for the external tests.
var VerifyPlan = verifyPlan
