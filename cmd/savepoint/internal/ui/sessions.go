package ui

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// rpc returns the context of one RPC made for request r: --timeout long.
func (s *Server) rpc(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), s.opts.Timeout)
}

// sessionFilters are the Sessions page's query parameters.
type sessionFilters struct {
	Status  string
	Labels  string // "k=v,k2=v2"
	Pending bool
	Idle    string
	Prefix  string
	Order   string // "" (session id) or "updated" (last update first)
	Size    int
}

type sessionRow struct {
	ID, Task, State, Created, Updated, Labels string
	Turn                                      uint32
	Revision, Epoch                           uint64
	Pending, InDoubt                          uint32
	Resolved                                  string // "V/P": calls in doubt resolved by a verify hook, by a person
	Awaiting                                  uint32 // calls waiting for approval
}

type sessionsData struct {
	Filters  sessionFilters
	Rows     []sessionRow
	NextPage string // the next page's URL; empty on the last page
	Scanned  int    // sessions read to fill the page with an id prefix
	Query    string // the filters as a query, for the live updates
}

// maxPrefixScan bounds the sessions one page reads to find those with an
// id prefix, which ListSessions cannot filter on.
const maxPrefixScan = 5000

// parseSessionFilters reads the page's filters into a ListSessionsRequest.
func parseSessionFilters(q url.Values) (sessionFilters, *savepointv1.ListSessionsRequest, error) {
	f := sessionFilters{Status: q.Get("status"), Labels: strings.TrimSpace(q.Get("labels")), Pending: q.Get("pending") != "",
		Idle: strings.TrimSpace(q.Get("idle")), Prefix: strings.TrimSpace(q.Get("prefix")), Size: 50}
	req := &savepointv1.ListSessionsRequest{HasPendingToolUses: f.Pending, PageToken: q.Get("page")}
	switch f.Order = q.Get("order"); f.Order {
	case "", "id":
		f.Order = ""
	case "updated":
		req.OrderBy = "update_time desc"
	default:
		return f, nil, fmt.Errorf("The order %q is not id or updated.", f.Order)
	}
	if v := q.Get("size"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			return f, nil, fmt.Errorf("The page size %q is not a number from 1 to 1000.", v)
		}
		f.Size = n
	}
	switch f.Status {
	case "", "any":
		f.Status = ""
	case "active", "completed", "failed":
		req.StatusFilter = savepointv1.SessionStatus(savepointv1.SessionStatus_value["SESSION_STATUS_"+strings.ToUpper(f.Status)])
	default:
		return f, nil, fmt.Errorf("The status %q is not active, completed or failed.", f.Status)
	}
	if f.Labels != "" {
		req.LabelFilter = map[string]string{}
		for _, kv := range strings.Split(f.Labels, ",") {
			k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
			if !ok || k == "" {
				return f, nil, fmt.Errorf("The label filter %q is not KEY=VALUE.", kv)
			}
			req.LabelFilter[k] = v
		}
	}
	if f.Idle != "" {
		d, err := time.ParseDuration(f.Idle)
		if err != nil || d < 0 {
			return f, nil, fmt.Errorf("The idle time %q is not a duration such as 10m.", f.Idle)
		}
		req.MinIdle = durationpb.New(d)
	}
	return f, req, nil
}

// sessionState is what the Sessions page calls a session's state.
func sessionState(s *savepointv1.SessionSummary) string {
	switch {
	case s.GetRevision() == 0:
		return "damaged"
	case s.GetStatus() == savepointv1.SessionStatus_SESSION_STATUS_COMPLETED:
		return "completed"
	case s.GetStatus() == savepointv1.SessionStatus_SESSION_STATUS_FAILED:
		return "failed"
	case s.GetInDoubtToolUseCount() > 0:
		return "in doubt"
	case s.GetPendingToolUseCount() > 0:
		return "waiting"
	}
	return "active"
}

func labelText(m map[string]string) string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, k+"="+m[k])
	}
	return strings.Join(out, ", ")
}

func (s *Server) sessions(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f, req, err := parseSessionFilters(q)
	if err != nil {
		s.refuse(w, r, http.StatusBadRequest, "BAD_FILTER", err.Error())
		return
	}
	ctx, cancel := s.rpc(r)
	defer cancel()
	data := sessionsData{Filters: f}
	live := r.URL.Query()
	live.Del("page")
	data.Query = live.Encode()
	// Without a prefix, one ListSessions page is the page. With one, pages
	// are read, each no larger than what is still missing, until the page
	// is full, the list ends or maxPrefixScan sessions were read.
	for {
		req.PageSize = int32(f.Size - len(data.Rows))
		resp, err := s.opts.Client.Raw().ListSessions(ctx, req)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		for _, x := range resp.GetSessions() {
			data.Scanned++
			if !strings.HasPrefix(x.GetSessionId(), f.Prefix) {
				continue
			}
			data.Rows = append(data.Rows, row(x))
		}
		req.PageToken = resp.GetNextPageToken()
		if req.PageToken == "" || len(data.Rows) >= f.Size || f.Prefix == "" || data.Scanned >= maxPrefixScan {
			break
		}
	}
	if req.PageToken != "" {
		next := r.URL.Query()
		next.Set("page", req.PageToken)
		data.NextPage = "/sessions?" + next.Encode()
	}
	s.render(w, r, http.StatusOK, "sessions", "Sessions", "sessions", data)
}
