package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// Sweep removes task dirs under Root whose last modification is older than
// olderThan (DefaultSweepAge, 1 h, when zero or negative): the fallback for
// tasks whose Close never ran. It returns how many dirs it removed. Entries
// not named like task dirs are left alone.
func (s *Sandbox) Sweep(olderThan time.Duration) (int, error) {
	if olderThan <= 0 {
		olderThan = DefaultSweepAge
	}
	entries, err := os.ReadDir(s.cfg.Root)
	if err != nil {
		return 0, fmt.Errorf("%w: sweep: %w", ErrSetup, err)
	}
	cutoff := time.Now().Add(-olderThan)
	removed := 0
	var errs []error
	for _, e := range entries {
		if !e.IsDir() || !taskDirPattern.MatchString(e.Name()) {
			continue
		}
		info, err := e.Info()
		if err != nil || !info.ModTime().Before(cutoff) {
			continue
		}
		if err := removeTree(filepath.Join(s.cfg.Root, e.Name())); err != nil {
			errs = append(errs, err)
			continue
		}
		removed++
	}
	if len(errs) > 0 {
		return removed, fmt.Errorf("%w: sweep: %w", ErrSetup, errors.Join(errs...))
	}
	return removed, nil
}

// RunSweeper calls Sweep(olderThan) every interval until ctx is done, and
// returns ctx.Err(). onError, if not nil, receives each failed sweep's error.
func (s *Sandbox) RunSweeper(ctx context.Context, every, olderThan time.Duration, onError func(error)) error {
	if every <= 0 {
		every = 10 * time.Minute
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		if _, err := s.Sweep(olderThan); err != nil && onError != nil {
			onError(err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}
