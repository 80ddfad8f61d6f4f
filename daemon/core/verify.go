package core

import (
	"maps"
	"slices"
)

// VerifyCollector builds a store's VerifyReport as the store scans its
// records: the first problem noted for a session is the one reported,
// sessions are reported in id order, and a session already damaged is not
// checked further. The zero VerifyCollector is empty and ready to use.
type VerifyCollector struct {
	rep     VerifyReport
	damaged map[string]string
}

// Record counts one record checked.
func (c *VerifyCollector) Record() { c.rep.CheckedRecords++ }

// Session counts one session's head checked, besides its record.
func (c *VerifyCollector) Session() { c.rep.CheckedSessions++ }

// Note reports problem for the session, or outside any session when
// sessionID is empty, unless a problem was noted for it already.
func (c *VerifyCollector) Note(sessionID, problem string) {
	if c.damaged == nil {
		c.damaged = map[string]string{}
	}
	if _, seen := c.damaged[sessionID]; !seen {
		c.damaged[sessionID] = problem
	}
}

// Check calls check with each of the sessions not damaged yet, in id order,
// noting the error it returns as that session's problem.
func (c *VerifyCollector) Check(sessionIDs []string, check func(sessionID string) error) {
	for _, sid := range slices.Sorted(slices.Values(sessionIDs)) {
		if _, bad := c.damaged[sid]; bad {
			continue
		}
		if err := check(sid); err != nil {
			c.Note(sid, err.Error())
		}
	}
}

// Report returns the report of everything counted and noted.
func (c *VerifyCollector) Report() VerifyReport {
	rep := c.rep
	rep.Damaged = nil
	for _, sid := range slices.Sorted(maps.Keys(c.damaged)) {
		rep.Damaged = append(rep.Damaged, DamagedSession{SessionID: sid, Problem: c.damaged[sid]})
	}
	return rep
}
