package events

import (
	"fmt"
	"regexp"
	"strings"
)

// Event types. Every type is io.agentbus.<noun>.<verb>; its subject is
// agent.<noun>.<verb>.<tenant> (see Subject).
const (
	TypeRunRequested  = "io.agentbus.run.requested"
	TypeRunFinished   = "io.agentbus.run.finished"
	TypePlanRequested = "io.agentbus.plan.requested"
	TypePlanProposed  = "io.agentbus.plan.proposed"
	TypeStepRequested = "io.agentbus.step.requested"
	TypeStepIterated  = "io.agentbus.step.iterated"
	TypeStepFinished  = "io.agentbus.step.finished"
	TypeGroupJoined   = "io.agentbus.group.joined"
	// TypeStepJoined is a group of one joined by its only member's
	// executor: a type of its own, so the executor never needs the right
	// to publish group.joined.
	TypeStepJoined   = "io.agentbus.step.joined"
	TypeDeadLettered = "io.agentbus.dead.lettered"
	// TypeGroupDeadline is a fan-out group's deadline: published as a
	// scheduled message (ExtDeliverAt), the server delivers it to the
	// aggregator when the deadline passes.
	TypeGroupDeadline = "io.agentbus.group.deadline"
	// TypeRunDeadline is a run's wall-clock deadline, a scheduled message
	// to the router: a run still going then is stopped and ends TIMEOUT.
	TypeRunDeadline = "io.agentbus.run.deadline"
	// TypeApprovalDecided resolves a run's gate (approved, rejected,
	// cancelled): published by the ingress, or scheduled by the router at
	// the gate's TTL (expired). The router consumes it.
	TypeApprovalDecided = "io.agentbus.approval.decided"
	// TypeAlertEvaluate asks the monitor to evaluate a tenant's alert
	// rules: scheduled by the projector when a run finishes, and by the
	// monitor while an alert fires.
	TypeAlertEvaluate = "io.agentbus.alert.evaluate"
	// TypeRunParked tells the callers of a run that it waits at a gate;
	// the ingress reads it.
	TypeRunParked = "io.agentbus.run.parked"
	// TypeReplyChunk is a chunk of a streamed answer; its subject is
	// reply.<tenant>.<session> (see ReplySubject), in the REPLY stream.
	TypeReplyChunk = "io.agentbus.reply.chunk"
	// TypeAuditPrefix starts every audit event type, for example
	// io.agentbus.audit.skill.called. A hop's audit events ride in its
	// first output (HeaderTrail); a hop with no output to carry them
	// publishes them on agent.trail.recorded.<tenant> (TrailSubject).
	TypeAuditPrefix = "io.agentbus.audit."
)

// Stream names.
const (
	StreamAgent = "AGENT"
	StreamReply = "REPLY"
)

// Extension attribute names carried on every agentbus event.
const (
	ExtTenant      = "tenantid"
	ExtSession     = "sessionid"
	ExtRun         = "runid"
	ExtTask        = "taskid"
	ExtCorrelation = "correlationid"
	ExtTraceParent = "traceparent"
	// ExtDeliverAt (RFC 3339) makes an event a scheduled message: it is
	// stored on its ScheduleSubject and the server publishes it on its own
	// subject at that time (JetStream message schedules, nats-server 2.12+).
	// The delivered event no longer carries the extension.
	ExtDeliverAt     = "deliverat"
	sourcePrefix     = "agentbus/"
	typePrefix       = "io.agentbus."
	agentSubjectRoot = "agent"
	replySubjectRoot = "reply"
	// trailSubjectStem starts the subject of a trail published on its
	// own: agent.trail.recorded.<tenant>.
	trailSubjectStem = agentSubjectRoot + ".trail.recorded."
)

var (
	tokenRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
	typeRE  = regexp.MustCompile(`^[a-z_]+\.[a-z_]+$`)              // noun.verb
	nameRE  = regexp.MustCompile(`^[a-z0-9_]+(\.[a-z0-9_]+){0,3}$`) // audit event name
)

// ValidToken reports whether s can be used as a tenant or session id: it
// becomes a subject token, so it may hold only letters, digits, '_' and '-'.
func ValidToken(s string) bool { return tokenRE.MatchString(s) }

// Subject returns the NATS subject an event of type typ for tenant is
// published on: agent.<noun>.<verb>.<tenant> for orchestration events and
// agent.trail.recorded.<tenant> for an audit event published on its own.
func Subject(typ, tenant string) (string, error) {
	if !ValidToken(tenant) {
		return "", fmt.Errorf("%w: tenant %q", ErrInvalidToken, tenant)
	}
	if typ == TypeDeadLettered {
		return DeadSubject(tenant), nil
	}
	if name, ok := strings.CutPrefix(typ, TypeAuditPrefix); ok {
		if !nameRE.MatchString(name) {
			return "", fmt.Errorf("%w: %q", ErrUnknownType, typ)
		}
		return TrailSubject(tenant), nil
	}
	rest, ok := strings.CutPrefix(typ, typePrefix)
	if !ok || !typeRE.MatchString(rest) {
		return "", fmt.Errorf("%w: %q", ErrUnknownType, typ)
	}
	return agentSubjectRoot + "." + rest + "." + tenant, nil
}

// TrailSubject is the subject of a hop's audit trail published on its own
// (a hop with no output on AGENT to carry it): agent.trail.recorded.<tenant>.
func TrailSubject(tenant string) string { return trailSubjectStem + tenant }

// IsTrailSubject reports whether subject is a TrailSubject.
func IsTrailSubject(subject string) bool { return strings.HasPrefix(subject, trailSubjectStem) }

// AuditType returns the event type of the audit event name, for example
// AuditType("skill.called") = "io.agentbus.audit.skill.called".
func AuditType(name string) string { return TypeAuditPrefix + name }

// AuditName returns the short name of an audit event type ("skill.called").
func AuditName(typ string) string { return strings.TrimPrefix(typ, TypeAuditPrefix) }

// IsAuditType reports whether typ is an audit event type.
func IsAuditType(typ string) bool { return strings.HasPrefix(typ, TypeAuditPrefix) }

// TenantOfSubject returns the tenant token of an agent or audit subject, or
// "unknown" when the subject does not carry one.
func TenantOfSubject(subject string) string {
	toks := strings.Split(subject, ".")
	switch {
	case len(toks) >= 3 && toks[0] == agentSubjectRoot && ValidToken(toks[len(toks)-1]):
		return toks[len(toks)-1]
	}
	return "unknown"
}

// DeadSubject returns the dead-letter subject of a tenant.
func DeadSubject(tenant string) string {
	if !ValidToken(tenant) {
		tenant = "unknown"
	}
	return "agent.dead." + tenant
}

// ReplySubject returns the subject of a session's streaming reply chunks.
func ReplySubject(tenant, session string) string {
	return replySubjectRoot + "." + tenant + "." + session
}

// TypeOfSubject returns the event type of an agent.<noun>.<verb>.<tenant>
// subject, or "" for any other subject.
func TypeOfSubject(subject string) string {
	toks := strings.Split(subject, ".")
	if len(toks) != 4 || toks[0] != agentSubjectRoot {
		return ""
	}
	return typePrefix + toks[1] + "." + toks[2]
}

// ScheduleSubject is the subject a scheduled event waits on until its
// time: agent.schedule.<tenant>.<event id>. No role consumes it.
func ScheduleSubject(tenant, id string) string {
	return agentSubjectRoot + ".schedule." + tenant + "." + id
}
