package ui

import (
	"context"
	"errors"
	"maps"
	"net/http"
	"slices"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/savepoint-dev/savepoint/client"
)

// errorData is what the error page shows.
type errorData struct {
	Status int
	Reason string // the ErrorInfo reason, or the inspector's own
	Code   string // the gRPC code, when the daemon answered
	Msg    string
	// Meta is the ErrorInfo metadata, such as current_epoch, as "key=value".
	Meta []string
	// Damaged is the session whose stored data cannot be read, which the
	// page offers to delete.
	Damaged string
}

// refuse writes the inspector's own refusal as an error page.
func (s *Server) refuse(w http.ResponseWriter, r *http.Request, code int, reason, msg string) {
	s.render(w, r, code, "error", http.StatusText(code), "", errorData{Status: code, Reason: reason, Msg: msg})
}

// fail writes the daemon's error err as an error page with the HTTP status
// its gRPC code maps to (httpStatus).
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	d := describe(err)
	s.render(w, r, d.Status, "error", http.StatusText(d.Status), "", d)
}

// failSession is fail for an error reading session id: a damaged session
// gets a link to its deletion, the one thing left to do with it.
func (s *Server) failSession(w http.ResponseWriter, r *http.Request, err error, id string) {
	d := describe(err)
	if errors.Is(err, client.ErrCheckpointCorrupt) && !s.opts.ReadOnly {
		d.Damaged = id
	}
	s.render(w, r, d.Status, "error", http.StatusText(d.Status), "", d)
}

// describe turns a daemon error into what a page shows of it.
func describe(err error) errorData {
	st, _ := status.FromError(err)
	d := errorData{Code: st.Code().String(), Msg: st.Message()}
	if e, ok := errors.AsType[*client.Error](err); ok {
		d.Reason, d.Msg = e.Reason, e.Message
		for _, k := range slices.Sorted(maps.Keys(e.Metadata)) {
			d.Meta = append(d.Meta, k+"="+e.Metadata[k])
		}
	}
	if errors.Is(err, context.DeadlineExceeded) && st.Code() == codes.Unknown {
		d.Code = codes.DeadlineExceeded.String()
	}
	d.Status = httpStatus(st.Code(), err)
	if st.Code() == codes.Unavailable {
		d.Msg = "savepointd is not answering (" + d.Msg + "). The inspector reconnects by itself: reload this page once the daemon is back."
	}
	if d.Msg == "" {
		d.Msg = err.Error()
	}
	return d
}

// httpStatus maps a gRPC code to the HTTP status of the page that shows it.
func httpStatus(c codes.Code, err error) int {
	switch c {
	case codes.NotFound:
		return http.StatusNotFound
	case codes.Aborted, codes.FailedPrecondition, codes.AlreadyExists:
		return http.StatusConflict
	case codes.InvalidArgument, codes.OutOfRange:
		return http.StatusBadRequest
	case codes.PermissionDenied, codes.Unauthenticated:
		return http.StatusForbidden
	case codes.Unavailable:
		return http.StatusServiceUnavailable
	case codes.DeadlineExceeded:
		return http.StatusGatewayTimeout
	case codes.ResourceExhausted:
		return http.StatusInsufficientStorage
	case codes.Unimplemented:
		return http.StatusNotImplemented
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return http.StatusGatewayTimeout
	}
	return http.StatusInternalServerError
}
