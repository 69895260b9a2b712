package app

import (
	"fmt"

	"github.com/rs/zerolog"
)

// ServerLogger hands an embedded nats-server's own lines to log: its
// notices at debug (its start-up banner is long), its warnings and errors
// at their levels, and a fatal one as an error (the process decides
// whether to exit, not the server's logger). The server's debug and
// trace lines are not asked for.
func ServerLogger(log zerolog.Logger) ServerLog {
	return ServerLog{log: log.With().Str("component", "nats-server").Logger()}
}

// ServerLog is the nats-server Logger ServerLogger returns.
type ServerLog struct{ log zerolog.Logger }

func (l ServerLog) Noticef(format string, v ...any) { l.log.Debug().Msg(fmt.Sprintf(format, v...)) }
func (l ServerLog) Warnf(format string, v ...any)   { l.log.Warn().Msg(fmt.Sprintf(format, v...)) }
func (l ServerLog) Errorf(format string, v ...any)  { l.log.Error().Msg(fmt.Sprintf(format, v...)) }
func (l ServerLog) Fatalf(format string, v ...any)  { l.log.Error().Msg(fmt.Sprintf(format, v...)) }
func (l ServerLog) Debugf(format string, v ...any)  { l.log.Trace().Msg(fmt.Sprintf(format, v...)) }
func (l ServerLog) Tracef(format string, v ...any)  { l.log.Trace().Msg(fmt.Sprintf(format, v...)) }
