package pgstore_test

import (
	"strings"
	"testing"

	"github.com/savepoint-dev/savepoint/daemon/badgerstore"
	"github.com/savepoint-dev/savepoint/daemon/core"
	"github.com/savepoint-dev/savepoint/daemon/pgstore/pgtest"
	"github.com/savepoint-dev/savepoint/daemon/storecompare"
)

// TestImportKeepsDecisions: a session copied from Badger (as migrate-store
// copies it) keeps its calls' earlier resolutions and its count of calls
// waiting for approval, and storecompare names a copy whose counter
// differs from the source's.
func TestImportKeepsDecisions(t *testing.T) {
	src, err := badgerstore.Open("", badgerstore.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(src.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "s", Task: "t", PendingToolUses: []core.ToolUse{
		{ID: "pay", Name: "send_payment", InputJSON: `{"n":1}`, BeginTracked: true},
		{ID: "mail", Name: "send_email", BeginTracked: true}}}))
	must(src.BeginEffect(ctx, &core.BeginRequest{SessionID: "s", ToolUseID: "pay", RequiresApproval: true}))
	must(src.BeginEffect(ctx, &core.BeginRequest{SessionID: "s", ToolUseID: "mail"}))
	for _, by := range []string{"alice", "bob"} {
		must(src.ResolveEffect(ctx, &core.ResolveRequest{SessionID: "s", ToolUseID: "mail", Outcome: core.ResolvedNotDone,
			ResolverKind: core.ResolverPerson, ResolvedBy: by}))
		must(src.BeginEffect(ctx, &core.BeginRequest{SessionID: "s", ToolUseID: "mail"}))
	}
	var dump *core.SessionDump
	if err := src.Export(ctx, func(d *core.SessionDump) error { dump = d; return nil }); err != nil || dump == nil {
		t.Fatalf("export: %v", err)
	}
	srv := pgtest.Shared(t)
	dst := open(t, srv.URL("postgres"), newSchema())
	if err := dst.Import(ctx, dump); err != nil {
		t.Fatal(err)
	}
	if err := storecompare.Session(ctx, src, dst, "s"); err != nil {
		t.Fatalf("the copy differs: %v", err)
	}
	if sum, err := dst.Summary(ctx, "s"); err != nil || sum.AwaitingApproval != 1 || sum.ResolvedByPerson != 2 {
		t.Fatalf("the copy's summary: %+v %v", sum, err)
	}
	es, err := dst.Effects(ctx, "s", "", 10)
	if err != nil || len(es) != 2 || es[0].ToolUseID != "mail" || len(es[0].EarlierResolutions) != 1 || es[0].EarlierResolutions[0].ResolvedBy != "alice" {
		t.Fatalf("the copy's ledger: %+v %v", es, err)
	}
	dump.AwaitingApproval = 2
	bad := open(t, srv.URL("postgres"), newSchema())
	if err := bad.Import(ctx, dump); err != nil {
		t.Fatal(err)
	}
	if err := storecompare.Session(ctx, src, bad, "s"); err == nil || !strings.Contains(err.Error(), "counters differ (awaiting approval 1 and 2") {
		t.Fatalf("a copy with another counter: %v", err)
	}
}
